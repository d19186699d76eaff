"""A results root with a `%` or a line break is refused before anything is written: submitit
and Slurm would expand the `%` (a folder per job outside the root), and a line break would
put a line of its own into the sbatch script."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.config.sbatch_safe import UnsafePath, refuse_unsafe_results
from tests.conftest import TINY_WORKLOAD

PERCENT = (
    "is not allowed: submitit and Slurm replace '%' patterns in the job's paths (%j: the job id), "
    "so the results would land in another folder; choose a folder whose path has no '%'"
)
LINE_BREAK = (
    "is not allowed: a line break would start a line of its own in the sbatch script "
    "(an #SBATCH directive); choose a folder whose path is one line"
)


@pytest.mark.parametrize("verb", ["run", "submit", "sbatch", "tune"])
@pytest.mark.parametrize(("results", "why"), [("out/%j", PERCENT), ("out\n#SBATCH --x", LINE_BREAK)])
def test_every_verb_that_makes_a_sweep_refuses_the_results_root(
    verb: str,
    results: str,
    why: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: grid\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1]}\n")
    assert main([verb, str(spec), "--results", results]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"harness: --results: {results!r} ({str(tmp_path / results)!r}) {why}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]  # nothing made


def test_a_percent_in_the_working_directory_reaches_the_jobs_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "a%j"
    here.mkdir()
    monkeypatch.chdir(here)
    with pytest.raises(UnsafePath) as error:
        refuse_unsafe_results(Path("results"))
    assert str(error.value) == f"--results: 'results' ({str(here / 'results')!r}) {PERCENT}"


def test_the_default_from_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_RESULTS", "/scratch/r%A")
    with pytest.raises(UnsafePath, match=r"^--results \(\$HARNESS_RESULTS\): '/scratch/r%A' is not allowed"):
        refuse_unsafe_results(Path("/scratch/r%A"))


def test_a_plain_results_root_passes(tmp_path: Path) -> None:
    refuse_unsafe_results(tmp_path / "results-2024_v1.0")  # no exception
