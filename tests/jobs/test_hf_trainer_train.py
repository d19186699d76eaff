"""jobs/hf_trainer_train.py (a transformers.Trainer script in run_clm.py's shape, with the
probe's lines: a Trainer subclass whose train loader is probe.loader's, prepared by the
Trainer's Accelerator, and whose loop iterates probe.measure) under the harness: the Trainer's
loop trains on every rung, the point's settings reach the Trainer's loader through its own
dataloader_* flags, each of two ranks reads its share, and a known cost put in the data set is
named by the ladder (nothing where none is put)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from tests.jobs.scripts import measured_rows

pytest.importorskip("transformers", reason="the libs extra (pip install -e .[libs]) has transformers")

SCRIPT = Path(__file__).resolve().parents[2] / "jobs" / "hf_trainer_train.py"
FLAGS = (
    "{num_workers: --dataloader_num_workers, persistent_workers: '--dataloader_persistent_workers=',"
    " pin_memory: '--dataloader_pin_memory=', drop_last: '--dataloader_drop_last=',"
    " batch_size: --per_device_train_batch_size}"
)


def spec_text(out: Path, *args: str, loader: str = "{num_workers: 0}", repeats: int = 3) -> str:
    flags = [
        "--output_dir", str(out), "--use_cpu", "--report_to", "none", "--disable_tqdm", "true",
        "--save_strategy", "no", "--train_blocks", "32", "--step_ms", "100", *args,
    ]  # fmt: skip
    return (
        f"name: hf-trainer\nworkload: {{script: {SCRIPT}, args: {flags}, batch_size: 4,\n"
        f"  flags: {FLAGS}}}\n"
        f"measure: {{warmup_steps: 1, steps: 6, repeats: {repeats}}}\n"
        f"rungs: [host_batch, processed_sample, full]\nloader: {loader}\n"
        "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n"
    )


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"),
    [
        # 50 ms a sample read (4 a batch, no workers) against a step of 100 ms of sleep (a GPU's:
        # no core used). The Dataset reads and makes its tensors in one __getitem__ (no
        # load_raw): the ladder names the two stages together, full against processed_sample.
        (("--read_ms", "50"), ["transforms + raw data loading"]),
        # Nothing injected, against a 300 ms step: the real read, decode and transforms of a
        # batch (a few ms: Accelerate's example read 6 % of a 100 ms step on a busy machine) stay
        # far under the 5 % margin, so that nothing is named where nothing was put.
        (("--step_ms", "300"), []),
    ],
    ids=["slow-read", "nothing"],
)
def test_a_cost_injected_into_the_trainers_data_is_named_by_the_ladder(
    tmp_path: Path, injected: tuple[str, ...], named: list[str]
) -> None:
    from analysis.ladder.verdict import ladder_verdicts

    rows = measured_rows(tmp_path, lambda _images: spec_text(tmp_path / "out", *injected))
    # The point's settings (through the Trainer's own flags), the rows' samples its batches.
    assert set(zip(rows["num_workers"], rows["batch_size"], rows["drop_last"], strict=True)) == {
        (0, 4, False)
    }
    assert (rows["samples"] == rows["steps"] * 4).all()
    (verdict,) = ladder_verdicts(rows)
    assert verdict.stages == named, verdict.sentence


def test_two_ranks_read_their_share_with_the_points_settings(tmp_path: Path) -> None:
    """Two local ranks (gloo, the Trainer's DDP): every row ok, with the point's settings (the
    Trainer's --dataloader_* flags carry them, and its loader is probe.loader's); each row's
    samples its steps times the batch size; each rank's epoch its half of the 32 blocks (8
    batches of 4, the Trainer's RandomSampler sharded by its Accelerator); the Trainer's loop
    is sized by len() of the prepared loader (no warning that the numbers differ)."""
    from analysis.load import load_results
    from harness.backends.local import run_local
    from harness.storage.sweep import create_sweep
    from harness_schema import layout

    loader = "{num_workers: 1, persistent_workers: true, drop_last: true, pin_memory: false}"
    plan = expand(parse_spec(spec_text(tmp_path / "out", loader=loader, repeats=1)))
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 3
    assert sorted(set(rows["rank"])) == [0, 1]
    for row in rows.itertuples():
        assert (row.batch_size, row.num_workers, row.persistent_workers, row.drop_last) == (4, 1, True, True)
        assert row.samples == row.steps * 4
    assert set(rows[rows["rung"] == "full"]["epoch_steps"]) == {4}
    for rank in (0, 1):
        _, err = layout.script_logs(layout.point_dir(sweep, plan.points[0].id), rank)
        said = err.read_text()
        assert "num_workers=1, persistent_workers=True, pin_memory=False" in said
        assert "len(loader) says" not in said and "measured as given" not in said
