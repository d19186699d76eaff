"""sbatch/: the labs' standalone scripts, kept in git, must be those their specs render today."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.backends.slurm.sbatch import portable_script

ROOT = Path(__file__).resolve().parent.parent
LABS = ["dlojz_dataloader", "rand_optimisation_sequence", "io_lab", "caching_ladder_gpu"]


@pytest.mark.parametrize("lab", LABS)
def test_the_committed_script_is_the_one_its_spec_renders(
    lab: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the scripts name their spec relative to the clone's root
    fresh = tmp_path / f"{lab}.sbatch"
    fresh.write_text(portable_script(Path("jobs") / f"{lab}.yaml")[0])
    committed = ROOT / "sbatch" / f"{lab}.sbatch"
    refresh = f"harness sbatch jobs/{lab}.yaml --portable -o sbatch"
    assert committed.exists(), f"sbatch/{lab}.sbatch is missing: run `{refresh}`"
    assert committed.read_text() == fresh.read_text(), (
        f"sbatch/{lab}.sbatch is out of date with jobs/{lab}.yaml: run `{refresh}` and commit it"
    )


@pytest.mark.parametrize("lab", LABS)
def test_a_committed_script_names_no_path_of_this_machine(lab: str) -> None:
    text = (ROOT / "sbatch" / f"{lab}.sbatch").read_text()
    assert str(ROOT) not in text and "/submit-dir" not in text
    assert f"--spec jobs/{lab}.yaml" in text and "results/%A_%a_0_log.out" in text


def test_the_folder_says_how_to_submit_and_regenerate_each_script() -> None:
    readme = (ROOT / "sbatch" / "README.md").read_text()
    for lab in LABS:
        assert f"sbatch sbatch/{lab}.sbatch" in readme
    assert "harness sbatch jobs/<lab>.yaml --portable -o sbatch" in readme


def test_the_first_task_makes_the_sweep_and_the_others_find_it(tmp_path: Path) -> None:
    from harness.backends.slurm.sbatch import create_sweep_once
    from harness.config.plan import expand
    from harness.config.spec import parse_spec
    from tests.conftest import TINY_WORKLOAD

    plan = expand(parse_spec("name: tiny\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1]}\n"))
    sweep = tmp_path / "results" / "tiny" / "sbatch-42"
    assert create_sweep_once(plan, sweep, world_size=2) == sweep
    (sweep / "points").mkdir(exist_ok=True)
    (sweep / "points" / "mark").write_text("a task's results")
    assert create_sweep_once(plan, sweep, world_size=2) == sweep  # a later task: left as it is
    assert (sweep / "points" / "mark").exists() and (sweep / "slurm").is_dir()
    assert sorted(p.name for p in sweep.parent.iterdir()) == ["sbatch-42"]  # nothing left aside
