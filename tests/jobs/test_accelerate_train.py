"""jobs/accelerate_train.py (Hugging Face Accelerate's cv_example.py, with the probe's lines)
under the harness: the loader `accelerator.prepare` re-makes from probe.loader's is measured
with the point's settings, its rows count every sample of every rank, and a known cost put in
its dataset is named by the ladder (and nothing where none is put)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.workloads.make_data import make_image_folder
from tests.jobs.scripts import measured_rows

pytest.importorskip("accelerate", reason="the libs extra (pip install -e .[libs]) has Accelerate")

SCRIPT = Path(__file__).resolve().parents[2] / "jobs" / "accelerate_train.py"


def spec_text(data: Path, *args: str, loader: str = "{num_workers: 0}", repeats: int = 3) -> str:
    flags = ["--data_dir", str(data), "--cpu", "--image_size", "16", "--step-ms", "100", *args]
    return (
        f"name: accelerate\nworkload: {{script: {SCRIPT}, args: {flags}, batch_size: 4}}\n"
        f"measure: {{warmup_steps: 1, steps: 6, repeats: {repeats}}}\n"
        f"rungs: [host_batch, processed_sample, full]\nloader: {loader}\n"
        "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n"
    )


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"),
    [
        # 50 ms a sample read (4 a batch, no workers) against a step of 100 ms of sleep (a GPU's:
        # no core used). cv_example's Dataset reads and transforms in one __getitem__ (no
        # load_raw): the ladder names the two stages together, full against processed_sample.
        (("--read-ms", "50"), ["transforms + raw data loading"]),
        # Nothing injected, against a 300 ms step: the real read, decode and transforms of a
        # batch (a few ms: Accelerate's example read 6 % of a 100 ms step on a busy machine) stay
        # far under the 5 % margin, so that nothing is named where nothing was put.
        (("--step-ms", "300"), []),
    ],
    ids=["slow-read", "nothing"],
)
def test_a_cost_injected_into_accelerates_example_is_named_by_the_ladder(
    tmp_path: Path, injected: tuple[str, ...], named: list[str]
) -> None:
    from analysis.ladder.verdict import ladder_verdicts

    rows = measured_rows(tmp_path, lambda images: spec_text(images, *injected))
    (verdict,) = ladder_verdicts(rows)
    assert verdict.stages == named, verdict.sentence


def test_two_ranks_each_read_their_share_and_the_rows_count_every_sample(tmp_path: Path) -> None:
    """Two local ranks (gloo): every row ok; each row's samples are its steps times the batch
    size; each rank's epoch is its half of the 32 training images (8 batches of 4 split in 2);
    the prepared loader's len() is what the loop receives (no warning that it differs)."""
    from analysis.load import load_results
    from harness.backends.local import run_local
    from harness.storage.sweep import create_sweep
    from harness_schema import layout

    make_image_folder(tmp_path / "images", images=40, size=32)
    plan = expand(parse_spec(spec_text(tmp_path / "images", loader="{num_workers: 1}", repeats=1)))
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 3
    assert sorted(set(rows["rank"])) == [0, 1]
    for row in rows.itertuples():
        assert (row.batch_size, row.num_workers, row.samples) == (4, 1, row.steps * 4)
    assert set(rows[rows["rung"] == "full"]["epoch_steps"]) == {4}
    for rank in (0, 1):
        _, err = layout.script_logs(layout.point_dir(sweep, plan.points[0].id), rank)
        assert "len(loader) says" not in err.read_text() and "measured as given" not in err.read_text()
