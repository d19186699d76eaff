"""harness/probe/harnessed.py: under the harness (HARNESS_PROBE set, here in this process or
as a job runs it), the point's rungs through runner.measure_point from the script's own loop."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import torch
from torch.utils.data import TensorDataset

import harness.probe as probe
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.loop_length import batches_per_loop
from harness.probe import harnessed as harnessed_module
from harness_schema import layout
from harness_schema import rows as results
from tests.harness.probe.common import (
    COURSE,
    LADDER,
    SCRIPT,
    Numbers,
    course_point,
    milestones,
    pairs,
    rows_of,
    script_point,
)


def test_under_the_harness_the_scripts_loop_runs_every_rung_with_the_points_loader(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point())
    loader = probe.loader(Numbers(), batch_size=2, num_workers=3, collate_fn=pairs)
    assert (loader.num_workers, loader.batch_size, loader.collate_fn) == (0, 2, pairs)  # the point's workers
    served = list(probe.measure(loader, "cpu", epochs=5, keep_running=True))
    # Three rungs of 1 warmup and 3 measured steps (no workers, no stock), whatever epochs says,
    # and the untimed batch that closes the loop: as many as len(loader) said.
    assert len(served) == 3 * 4 + 1 == len(loader)
    assert all(b["by"] == "mine" and b["x"].shape == (2, 3) for b in served)
    rows = rows_of(job)
    assert [(r["rung"], r["status"], r["samples"], r["batch_size"]) for r in rows] == [
        ("device_batch", "ok", "6", "2"),
        ("host_batch", "ok", "6", "2"),
        ("full", "ok", "6", "2"),
    ]
    assert milestones(job) == ["reached", "done"]
    # keep_running: the point is measured, the next epoch ends at once.
    assert list(probe.measure(loader, "cpu", keep_running=True)) == []


def test_a_loop_that_breaks_tells_the_job_how_far_it_got(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch, full]"))
    loader = probe.loader(Numbers(), batch_size=2)
    for n, _ in enumerate(probe.measure(loader, "cpu")):
        if n == 5:  # in full's warmup: host_batch has its row, full has none
            break
    assert [r["rung"] for r in rows_of(job)] == ["host_batch"]
    assert milestones(job) == ["reached", "left:6"]


def test_a_script_sized_by_len_loader_runs_the_whole_ladder_and_stops_after_its_point(tmp_path: Path) -> None:
    from harness.execution.runner import run_point

    out = tmp_path / "out"
    out.mkdir()
    point = course_point(out)
    outcome = run_point(point, tmp_path / "sweep", env=DistEnv(hostname="node-a"))
    rows = results.read_rows(layout.rank_file(layout.point_dir(tmp_path / "sweep", point.id), 0))
    # OneCycleLR(total_steps=len(loader) * epochs) held: every rung of every repeat is ok.
    assert (outcome.ok, outcome.failed) == (15, 0), [r["error"] for r in rows]
    # The end-of-epoch validation ran once, on the loop's last batch (the untimed closing one),
    # its checkpoint was written, and the script went no further: no second epoch, no code
    # after its loop.
    last = batches_per_loop(point) - 1
    assert (out / "validations-rank0").read_text() == f"0 {last}\n"
    assert (out / "checkpoint-rank0.pt").is_file()
    assert not (out / "after-loop-rank0").exists()
    # What the script's probe.settings() said is what every row records.
    said = json.loads((out / "settings-rank0.json").read_text())
    assert said == {
        "batch_size": 4,
        "num_workers": 1,  # the point's, in place of the script's 3
        "persistent_workers": False,
        "pin_memory": True,  # the script's own: the spec does not name it
        "non_blocking": True,
        "prefetch_factor": 2,
        "drop_last": False,
    }
    for row in rows:
        assert {k: row[k] for k in said} == {k: str(v) for k, v in said.items()}


def test_the_scripts_own_copy_is_timed_as_loading(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch]"))
    asked: list[bool] = []

    def course_copy(batch: Any, *, non_blocking: bool) -> Any:
        asked.append(non_blocking)
        time.sleep(0.05)
        return batch["x"].to("cpu", non_blocking=non_blocking), batch["y"]

    loader = probe.loader(Numbers(), batch_size=2, collate_fn=pairs)
    served = list(probe.measure(loader, "cpu", copy=course_copy, non_blocking=True, keep_running=True))
    assert all(isinstance(b, tuple) for b in served) and set(asked) == {True}
    (row,) = rows_of(job)
    assert float(row["loading_time"]) >= 0.05  # the copy's 50 ms are loading, as the course counts


def test_a_memory_format_is_given_to_the_images_copy(harnessed) -> None:  # type: ignore[no-untyped-def]
    harnessed(script_point(rungs="[full]"))
    images = TensorDataset(torch.rand(8, 3, 4, 4), torch.arange(8))
    loader = probe.loader(images, batch_size=2)
    served = list(probe.measure(loader, "cpu", memory_format=torch.channels_last, keep_running=True))
    assert all(x.is_contiguous(memory_format=torch.channels_last) and y.dim() == 1 for x, y in served)


def test_the_script_ends_when_its_loop_asks_past_the_point(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch, full]"))
    loader = probe.loader(Numbers(), batch_size=2)
    taken = 0
    with pytest.raises(SystemExit) as ended:
        for _ in probe.measure(loader, "cpu"):
            taken += 1
    assert ended.value.code == 0 and taken == len(loader) == 2 * 4 + 1
    assert [r["status"] for r in rows_of(job)] == ["ok", "ok"]  # written before the end
    # ...and the job told why the probe ends it, in case an error is raised over its exit.
    assert milestones(job) == ["reached", "done", "ending:" + quote(harnessed_module.MEASURED, safe="")]


def test_a_second_iter_before_any_batch_is_taken_is_not_a_new_pass(harnessed) -> None:  # type: ignore[no-untyped-def]
    """Lightning's Trainer calls iter() on the train loader once only to check that it can be
    iterated, then again to train: the first measure, from which no batch was taken, gives way
    to the second, which measures the point; the first, asked after all, says why it will not."""
    job = harnessed(script_point(rungs="[host_batch, full]"))
    loader = probe.loader(Numbers(), batch_size=2)
    looked = iter(probe.measure(loader, "cpu"))  # the framework's look: no batch taken
    taken = 0
    with pytest.raises(SystemExit) as ended:
        for _ in probe.measure(loader, "cpu"):
            taken += 1
    assert ended.value.code == 0 and taken == len(loader) == 2 * 4 + 1
    assert [r["status"] for r in rows_of(job)] == ["ok", "ok"]
    with pytest.raises(
        RuntimeError, match=r"replaced by a later one before it yielded a batch \(a second iter\(\)"
    ):
        next(looked)


def test_a_measure_after_a_batch_was_taken_is_a_later_epoch(harnessed) -> None:  # type: ignore[no-untyped-def]
    """Once a batch is taken, a later measure is the next epoch: it ends the script (as
    before), saying why to the job."""
    job = harnessed(script_point(rungs="[full]"))
    loader = probe.loader(Numbers(), batch_size=2)
    first = probe.measure(loader, "cpu")
    next(first)
    with pytest.raises(SystemExit) as ended:
        probe.measure(loader, "cpu")
    assert ended.value.code == 0
    assert milestones(job)[-1] == "ending:" + quote(harnessed_module.AGAIN, safe="")


def test_ddp_ranks_get_as_many_batches_each_and_stop_together(tmp_path: Path) -> None:
    """Two local DDP ranks (an all-reduce in every step, untimed batches included): the ranks
    stay in step to the closing batch, validate there, and end."""
    from analysis.load import load_results
    from harness.backends.local import run_local
    from harness.storage.sweep import create_sweep

    out = tmp_path / "out"
    out.mkdir()
    spec = parse_spec(
        f"name: ddp\nworkload: {{script: {COURSE}, args: [--out, '{out}', --ddp]}}\n"
        f"measure: {{warmup_steps: 1, steps: 3, repeats: 1}}\nrungs: {LADDER}\n"
        "loader: {num_workers: 1}\nslurm: {tasks_per_node: 2, gpus_per_node: 0}\n"
    )
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, spec.slurm) == []
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 5
    last = batches_per_loop(plan.points[0]) - 1
    assert [(out / f"validations-rank{r}").read_text() for r in (0, 1)] == [f"0 {last}\n"] * 2
    assert not list(out.glob("after-loop-rank*"))


# --- known costs injected into such a script: the ladder's verdict names them --------------------


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "rungs", "named"),
    [
        # Per sample 50 ms of reading (4 a batch, no workers): 200 ms a batch against a step of
        # 100 ms of sleep (a GPU's step: the thread blocked, no core used). The raw samples
        # served from memory cost nothing: the drop lands between raw_sample and full.
        (("--read-ms", "50"), "[host_batch, raw_sample, full]", ["raw data loading"]),
        # The same cost in the transform: the drop lands between processed_sample and raw_sample.
        (("--transform-ms", "50"), "[host_batch, processed_sample, raw_sample, full]", ["transforms"]),
        # Nothing injected: a torch.load of a 200-byte tensor and a normalisation per sample,
        # about 1 % of the step (a 50 ms step read a real 5 % drop once, on a busy CI machine).
        ((), "[host_batch, processed_sample, raw_sample, full]", []),
    ],
    ids=["slow-read", "slow-transform", "nothing"],
)
def test_a_cost_injected_into_a_real_shaped_script_is_named_by_the_ladder(
    tmp_path: Path, injected: tuple[str, ...], rungs: str, named: list[str]
) -> None:
    """Issue 25's criterion: a script with an LR schedule sized by len(loader), end-of-epoch
    validation and a checkpoint, measured under the ladder with 3 repeats: every row is ok, and
    the verdict names the stage where the cost was put (and none where none was)."""
    from analysis.ladder.verdict import ladder_verdicts
    from analysis.load import load_results
    from harness.execution.runner import run_point

    out = tmp_path / "out"
    out.mkdir()
    args = ("--step-ms", "100", "--num-workers", "0", *injected)
    point = course_point(out, *args, loader="{num_workers: 0}", rungs=rungs, repeats=3, steps=6)
    outcome = run_point(point, tmp_path / "sweep", env=DistEnv(hostname="node-a"))
    assert outcome.failed == 0 and outcome.skipped == 0, [r.error for r in outcome.rows]
    (verdict,) = ladder_verdicts(load_results([tmp_path / "sweep"]).rows)
    assert verdict.stages == named, verdict.sentence
    assert (out / "checkpoint-rank0.pt").is_file() and not (out / "after-loop-rank0").exists()


@pytest.mark.serial
def test_an_auto_window_runs_in_the_scripts_own_loop(harnessed, caplog) -> None:  # type: ignore[no-untyped-def]
    """measure.steps: auto under the probe: the script's loop gets batches until each rung's
    window is precise (or at its most), more than len(loader) announced (its least), and says so."""
    spec = parse_spec(
        f"name: p\nworkload: {{script: {SCRIPT}}}\nrungs: [host_batch, full]\nloader: {{num_workers: 0}}\n"
        "measure: {warmup_steps: 1, steps: auto, seconds: 0.05, max_seconds: 2, repeats: 1}\n"
    )
    (point,) = expand(spec).points
    job = harnessed(point)
    loader = probe.loader(Numbers(), batch_size=2, collate_fn=pairs)
    assert len(loader) == 2 * (1 + 40) + 1  # the least: 5 blocks of 8 steps a rung
    with caplog.at_level("WARNING", logger="harness.probe"):
        served = []
        for batch in probe.measure(loader, "cpu", keep_running=True):
            served.append(batch)
            time.sleep(0.002)  # the script's train step
    rows = rows_of(job)
    assert [(r["rung"], r["status"]) for r in rows] == [("host_batch", "ok"), ("full", "ok")]
    assert all(float(r["window_rse"]) <= 0.02 for r in rows)
    assert all(int(r["steps"]) >= 40 and r["window_rse"] for r in rows)
    # What the loop got, and what len(loader) had said.
    assert len(served) > len(loader)
    assert (
        f"harness.probe: {len(served)} batches yielded where {len(loader)} were announced" in caplog.messages
    )


def test_under_the_harness_measure_says_the_batches_it_yields_to_a_logger_that_asks(harnessed) -> None:  # type: ignore[no-untyped-def]
    from tests.fixtures.metric_logger import MetricLogger, train_one_epoch

    job = harnessed(script_point())
    loader = probe.loader(Numbers(), batch_size=2)
    measured = probe.measure(loader, "cpu", keep_running=True)
    assert len(measured) == len(loader) == 3 * 4 + 1
    logger = MetricLogger()
    assert train_one_epoch(measured, logger, print_freq=100) == len(loader)
    assert logger.lines[-1].startswith(f"Epoch: [0] [{len(loader) - 1}/{len(loader)}]")
    assert [(r["rung"], r["status"]) for r in rows_of(job)] == [
        ("device_batch", "ok"),
        ("host_batch", "ok"),
        ("full", "ok"),
    ]
    assert len(probe.measure(loader, "cpu", keep_running=True)) == 0  # the point is measured
