"""The caching ladder on a GPU: jobs/caching_ladder_gpu.yaml, shrunk to a minute, run by the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis import ladder_verdicts
from analysis.load import load_results
from harness.cli import main

pytestmark = pytest.mark.gpu

JOB = Path(__file__).resolve().parents[2] / "jobs" / "caching_ladder_gpu.yaml"

SHRINK = {
    r"dataset_args: \{[^}]*\}": "dataset_args: {size: 512, input_size: 512, crop: 256}",
    r"batch_size: \d+": "batch_size: 32",
    r"measure: \{[^}]*\}": "measure: {warmup_steps: 3, steps: 12, repeats: 1}",
}
"""Still starved (a 512² random image and a scipy dilation per sample, on 4 workers), a
step of a few milliseconds on any GPU."""


def shrunk_job(tmp_path: Path) -> Path:
    text = JOB.read_text()
    for pattern, replacement in SHRINK.items():
        text, count = re.subn(pattern, replacement, text)
        assert count == 1, f"{JOB.name} no longer has {pattern}: update SHRINK"
    path = tmp_path / "caching_ladder_gpu_small.yaml"
    path.write_text(text)
    return path


def test_the_gpu_ladder_finds_the_starved_pipeline_and_its_costliest_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["run", str(shrunk_job(tmp_path)), "--results", str(tmp_path / "results")])
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]
    (sweep,) = (tmp_path / "results").glob("*/*")
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"}, rows[["rung", "error"]].to_string()
    assert set(rows["device"]) == {"cuda:0"}
    rate = rows.groupby("rung")["samples_per_s"].median()
    # The bound and the starved end of the ladder: caching everything must beat decoding
    # and dilating every sample on four workers, on any GPU.
    assert rate["device_batch"] > rate["full"]
    # NVML followed the GPU through the run: every row carries its phase's utilisation.
    assert rows["gpu_util"].notna().all() and rows["gpu_util"].between(0, 100).all()

    # The verdict a user reads: the loader (its capacity measured beside the bound rungs) does
    # not keep up with the GPU's demand, and the stage that costs it the most is one of the
    # loader's, not the copy to the GPU.
    (verdict,) = ladder_verdicts(rows)
    assert verdict.keeps_up is False, verdict.sentence
    assert verdict.sentence.startswith("the input pipeline does not keep up: full delivers "), (
        verdict.sentence
    )
    assert verdict.bound == "host_batch" and verdict.demand is not None
    assert verdict.capacity_full is not None and verdict.capacity_full < verdict.demand
    assert verdict.costliest is not None and verdict.stages[0] == verdict.costliest
    assert verdict.costliest not in ("host-to-device copy", "collation and worker IPC"), verdict.sentence
    assert verdict.sentence.split(".")[0] in out  # the report printed it
