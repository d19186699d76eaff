"""jobs/timm_train.py (timm's train.py data path: create_dataset, create_loader with its fast
collate and PrefetchLoader, train_one_epoch's loop) under the harness: every rung runs (the
cached stages pass through the PrefetchLoader as the live batches do), the rows record the
settings create_loader was given through the script's flags, and a known cost is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jobs.scripts import measured_rows

pytest.importorskip("timm", reason="the libs extra (pip install -e .[libs]) has timm")

SCRIPT = Path(__file__).resolve().parents[2] / "jobs" / "timm_train.py"


def spec_text(data: Path, *args: str, loader: str = "{num_workers: 0}") -> str:
    flags = [str(data), "--input-size", "16", "--threads", "1", "--step-ms", "100", *args]
    return (
        f"name: timm\nworkload: {{script: {SCRIPT}, args: {flags}, batch_size: 4,\n"
        "  flags: {num_workers: --workers, batch_size: --batch-size}}\n"
        "measure: {warmup_steps: 1, steps: 6, repeats: 3}\n"
        f"rungs: [host_batch, processed_sample, full]\nloader: {loader}\n"
    )


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"),
    [
        # 50 ms a sample read (4 a batch, no workers) against a 100 ms step of sleep: timm's
        # ImageDataset reads and transforms in one __getitem__, and the PrefetchLoader is a loader
        # of timm's: the ladder names full against processed_sample, the loader's own work with it.
        (
            ("--read-ms", "50"),
            ["transforms + raw data loading + the loader's own work (the loader as given, not split)"],
        ),
        # Nothing injected, against a 300 ms step: the real read, decode and transforms of a
        # batch (a few ms: Accelerate's example read 6 % of a 100 ms step on a busy machine) stay
        # far under the 5 % margin, so that nothing is named where nothing was put.
        (("--step-ms", "300"), []),
    ],
    ids=["slow-read", "nothing"],
)
def test_a_cost_injected_into_timms_loader_is_named_by_the_ladder(
    tmp_path: Path, injected: tuple[str, ...], named: list[str]
) -> None:
    from analysis.ladder.verdict import ladder_verdicts

    rows = measured_rows(tmp_path, lambda images: spec_text(images, *injected))
    # What create_loader was given (the point's --workers and -b, timm's drop_last for training).
    assert set(zip(rows["num_workers"], rows["batch_size"], rows["drop_last"], strict=True)) == {(0, 4, True)}
    assert (rows["samples"] == rows["steps"] * 4).all()
    (verdict,) = ladder_verdicts(rows)
    assert verdict.stages == named, verdict.sentence
