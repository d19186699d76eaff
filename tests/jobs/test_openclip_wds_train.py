"""jobs/openclip_wds_train.py (OpenCLIP's WebDataset data path: tar shards split by node and
worker, decoded, preprocessed and batched inside the workers, with_epoch, then
wds.WebLoader(dataset, batch_size=None, ...), and train_one_epoch's loop) under the harness: the
rows record the WebLoader's DataLoader's settings as the script's --workers made them and the
batch size its pipeline batches with, the sample-level rungs are refused (its DataLoader reads a
stream), and a known cost in the workers is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jobs.scripts import measured_rows

SCRIPT = Path(__file__).resolve().parents[2] / "jobs" / "openclip_wds_train.py"


def shards(root: Path) -> None:
    from harness.workloads.make_data import make_webdataset_shards

    make_webdataset_shards(root, images=48, shards=4, size=32)


def spec_text(data: Path, *args: str, rungs: str = "[host_batch, full]") -> str:
    flags = [
        "--train-data",
        f"{data}/shard-{{00000..00003}}.tar",
        "--train-num-samples",
        "48",
        "--text-key",
        "cls",
        "--image-size",
        "16",
        "--threads",
        "1",
        "--step-ms",
        "100",
        *args,
    ]
    return (
        f"name: openclip\nworkload: {{script: {SCRIPT}, args: {flags}, batch_size: 4,\n"
        "  flags: {num_workers: --workers, batch_size: --batch-size}}\n"
        "measure: {warmup_steps: 1, steps: 6, repeats: 3}\n"
        f"rungs: {rungs}\nloader: {{num_workers: 1}}\n"
    )


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"),
    [
        # 50 ms a sample's preprocess in the one worker (4 a batch: 200 ms) against a 100 ms step
        # of sleep: the WebLoader is measured whole, so the ladder names it whole.
        (
            ("--transform-ms", "50"),
            [
                "the loader as given (its reading, transforms, collation and hand-off: not split, the harness did not build it)"
            ],
        ),
        # Nothing injected, against a 300 ms step: the real read, decode and transforms of a
        # batch (a few ms: Accelerate's example read 6 % of a 100 ms step on a busy machine) stay
        # far under the 5 % margin, so that nothing is named where nothing was put.
        (("--step-ms", "300"), []),
    ],
    ids=["slow-transform", "nothing"],
)
def test_a_cost_injected_into_openclips_webloader_is_named_by_the_ladder(
    tmp_path: Path, injected: tuple[str, ...], named: list[str]
) -> None:
    from analysis.ladder.verdict import ladder_verdicts

    rows = measured_rows(tmp_path, lambda data: spec_text(data, *injected), make=shards)
    # What get_wds_dataset built from the point's --workers 1 (persistent_workers=args.workers > 0)
    # and --batch-size 4 (wds.batched in the workers; the WebLoader's DataLoader has None).
    assert set(zip(rows["num_workers"], rows["persistent_workers"], rows["batch_size"], strict=True)) == {
        (1, True, 4)
    }
    assert set(rows["loader_given"]) == {"webdataset.compat.WebLoader"}
    assert (rows["samples"] == rows["steps"] * 4).all()
    (verdict,) = ladder_verdicts(rows)
    assert verdict.stages == named, verdict.sentence
