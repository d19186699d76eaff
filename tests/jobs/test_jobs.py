"""Every shipped spec loads and plans; the CPU variants run end to end (with fewer steps)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis.aggregate import summarize
from analysis.load import load_results
from analysis.render.tables import loader_tables
from harness.backends.inline import run_inline
from harness.backends.local import run_local
from harness.config.plan import expand
from harness.config.spec import load_spec, parse_spec
from harness.storage.sweep import create_sweep
from harness_schema import layout
from tests.jobs.scripts import make_script_data, shrunk

JOBS = Path(__file__).resolve().parents[2] / "jobs"
ALL = sorted(JOBS.glob("*.yaml"))
CPU = [p for p in ALL if p.stem.endswith("-cpu") or p.stem in ("quickstart", "caching_ladder")]


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_every_job_loads_plans_and_says_what_it_teaches(path: Path) -> None:
    plan = expand(load_spec(path))
    assert plan.points
    assert path.read_text().startswith("#"), "each spec opens with a comment on what it teaches"


def test_gpu_labs_have_a_cpu_variant() -> None:
    names = {p.stem for p in ALL}
    for gpu in (
        "dlojz_dataloader",
        "rand_optimisation_sequence",
        "io_lab",
        "text_lm",
        "segmentation",
        "shards_stream",
        "detection",
    ):
        assert gpu in names and f"{gpu}-cpu" in names
    assert {"caching_ladder", "caching_ladder_gpu"} <= names


@pytest.mark.parametrize("path", CPU, ids=[p.stem for p in CPU])
def test_cpu_variants_run_end_to_end(path: Path, tmp_path: Path) -> None:
    make_script_data(path, tmp_path)
    # Images at the size they are made (32 px), not resized up: what runs end to end is the
    # spec's every setting and rung, not its model's arithmetic (dlojz's toy_conv on 128 px
    # images was 27 of its 33 s).
    text = re.sub(r"resize: \d+", "resize: 32", shrunk(path, tmp_path))
    plan = expand(parse_spec(text, file=str(path)))
    sweep = create_sweep(plan, tmp_path / "results")
    outcomes = run_inline(plan.points, sweep)
    errors = [r.error for o in outcomes for r in o.rows if r.status != "ok"]
    assert errors == []
    tables = loader_tables(summarize(load_results([sweep]).rows))
    (table,) = tables.values()
    assert len(table) == len(plan.points)
    if plan.spec.sequence:
        # one row per cumulative step, in the sequence's order
        assert list(table["sequence_step"]) == [s.name for s in plan.spec.sequence]


@pytest.mark.serial
def test_the_imagenet_example_runs_inline_and_as_two_local_ranks(tmp_path: Path) -> None:
    """pytorch/examples' shape under the harness with no change but the probe's lines: its LR
    schedule sized by len(loader), its validation and its checkpoint every epoch, its own
    DataLoader flags mapped to each point's settings (its DATALOADER line prints the point's),
    inline and as 2 DDP ranks; every row ok."""
    text = shrunk(JOBS / "imagenet_script-cpu.yaml", tmp_path).replace('"256"', '"64"')
    spec_file = str(JOBS / "imagenet_script-cpu.yaml")
    inline = expand(parse_spec(text.replace("num_workers: [0, 1, 2]", "num_workers: [0, 2]"), file=spec_file))
    sweep = create_sweep(inline, tmp_path / "results")
    run_inline(inline.points, sweep)
    two = expand(parse_spec(text.replace("num_workers: [0, 1, 2]", "num_workers: 1"), file=spec_file))
    local = create_sweep(two, tmp_path / "results", backend="local", world_size=2)
    assert run_local(two.points, local, two.spec.slurm) == []
    rows = load_results([sweep, local]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 4 + 2 * 4  # points × rungs, ranks × rungs
    assert sorted(set(rows["world_size"])) == [1, 2]
    for folder, point, expected in (
        (sweep, inline.points[0], "DATALOADER 0 False False False 2 False"),
        (sweep, inline.points[1], "DATALOADER 2 True False False 2 False"),
        (local, two.points[0], "DATALOADER 1 True False False 2 False"),
    ):
        out, _ = layout.script_logs(layout.point_dir(folder, point.id), 0)
        assert out.read_text().splitlines()[0] == expected
        assert " * Acc@1 " in out.read_text()  # validated, every epoch
    assert (tmp_path / "checkpoints" / "checkpoint.pth.tar").is_file()
