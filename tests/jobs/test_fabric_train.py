"""jobs/fabric_train.py (Lightning Fabric's image classifier example, with the probe's lines)
under the harness: the loader `fabric.setup_dataloaders` wraps is measured as probe.loader's,
its len() is what the loop receives, each of two ranks reads its share, and a known cost put in
the ImageFolder's read or transform is named by the ladder (nothing where none is put)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.workloads.make_data import make_image_folder
from tests.jobs.scripts import measured_rows

pytest.importorskip("lightning", reason="the libs extra (pip install -e .[libs]) has Lightning")

SCRIPT = Path(__file__).resolve().parents[2] / "jobs" / "fabric_train.py"
LADDER = "[host_batch, processed_sample, raw_sample, full]"


def spec_text(data: Path, *args: str, loader: str = "{num_workers: 0}", repeats: int = 3) -> str:
    flags = [str(data), "--image-size", "16", "--step-ms", "100", *args]
    return (
        f"name: fabric\nworkload: {{script: {SCRIPT}, args: {flags}, batch_size: 4}}\n"
        f"measure: {{warmup_steps: 1, steps: 6, repeats: {repeats}}}\n"
        f"rungs: {LADDER}\nloader: {loader}\nslurm: {{tasks_per_node: 2, gpus_per_node: 0}}\n"
    )


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"),
    [
        # 50 ms a sample (4 a batch, no workers) against a step of 100 ms of sleep: the stock
        # ImageFolder is cut at raw_sample (its loader read, its transform run on the cached image).
        (("--read-ms", "50"), ["raw data loading"]),
        (("--transform-ms", "50"), ["transforms"]),
        # Nothing injected, against a 300 ms step: the real read, decode and transforms of a
        # batch (a few ms: Accelerate's example read 6 % of a 100 ms step on a busy machine) stay
        # far under the 5 % margin, so that nothing is named where nothing was put.
        (("--step-ms", "300"), []),
    ],
    ids=["slow-read", "slow-transform", "nothing"],
)
def test_a_cost_injected_into_fabrics_example_is_named_by_the_ladder(
    tmp_path: Path, injected: tuple[str, ...], named: list[str]
) -> None:
    from analysis.ladder.verdict import ladder_verdicts

    rows = measured_rows(tmp_path, lambda images: spec_text(images, *injected))
    (verdict,) = ladder_verdicts(rows)
    assert verdict.stages == named, verdict.sentence


def test_two_ranks_each_read_their_share_and_the_rows_count_every_sample(tmp_path: Path) -> None:
    """Fabric(devices=2) as two local ranks (gloo): every row ok, each row's samples its steps
    times the batch size, each rank's epoch its half of the 40 images (10 batches of 4, split in
    two), and len() of Fabric's loader is the batches the loop receives."""
    from analysis.load import load_results
    from harness.backends.local import run_local
    from harness.execution.loop_length import batches_per_loop
    from harness.storage.sweep import create_sweep
    from harness_schema import layout

    make_image_folder(tmp_path / "images", images=40, size=32)
    text = spec_text(tmp_path / "images", "--devices", "2", loader="{num_workers: 1}", repeats=1)
    plan = expand(parse_spec(text))
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 4
    for row in rows.itertuples():
        assert (row.batch_size, row.num_workers, row.samples) == (4, 1, row.steps * 4)
    assert set(rows[rows["rung"] == "full"]["epoch_steps"]) == {5}
    for rank in (0, 1):
        out, err = layout.script_logs(layout.point_dir(sweep, plan.points[0].id), rank)
        assert "len(loader) says" not in err.read_text() and "measured as given" not in err.read_text()
    # The script's own progress line: len(train_loader) after setup_dataloaders, on rank 0.
    out, _ = layout.script_logs(layout.point_dir(sweep, plan.points[0].id), 0)
    assert f"Train Epoch: 1 [0/{batches_per_loop(plan.points[0])}]" in out.read_text()
