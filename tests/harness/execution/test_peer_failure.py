"""A rank whose step raises tells the others at once: the point fails on every rank with the
first rank's error, within seconds, and the sweep goes on (before: the other rank waited in
the gradients' all-reduce until the point's limit, 5 minutes, saying nothing; issue 37)."""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path

import pytest

from harness.backends.local import run_local
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import peer_failure
from harness.storage.sweep import create_sweep, latest_jobs
from harness_schema import layout
from harness_schema import rows as results

SPEC = """\
name: peers
workload:
  dataset: tests.fixtures.workloads:plain_dataset
  dataset_args: {size: 64}
  model: tests.fixtures.workloads:failing_on_rank
  model_args: {after: 3}
  batch_size: 4
  device: cpu
measure: {warmup_steps: 1, steps: 3, repeats: 1}
rungs: [full]
loader: {num_workers: 0, drop_last: [false, true]}
limits: {dist_timeout_s: 300}
slurm: {tasks_per_node: 2, gpus_per_node: 0}
"""


@pytest.mark.serial
def test_a_step_that_raises_on_one_rank_fails_the_point_on_every_rank_at_once(tmp_path: Path) -> None:
    spec = parse_spec(SPEC)
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path, backend="local", world_size=2)
    started = time.monotonic()
    run_local(plan.points, sweep, spec.slurm)
    # Two points, each a job of two ranks started afresh: far under the 300 s a rank waited.
    assert time.monotonic() - started < 120
    for point in plan.points:
        rows = {
            rank: results.read_rows(layout.point_dir(sweep, point.id) / f"rank{rank}.csv")[0]
            for rank in (0, 1)
        }
        assert [rows[rank]["status"] for rank in (0, 1)] == ["failed", "failed"]
        assert rows[1]["error"] == "ValueError: loss is NaN at step 3 on this rank"
        # Rank 0's own row where it wrote one (its collective lost rank 1), else its job's
        # controller's, which ended it waiting.
        assert re.fullmatch(
            r"(rank 1 failed first: |its job ended rank 0 in rung full after \d+ s, waiting there for "
            r"rank 1, which failed first: )ValueError: loss is NaN at step 3 on this rank",
            rows[0]["error"],
        ), rows[0]["error"]
        # The waiting rank failed within 30 s of the failing one (before: limits.dist_timeout_s).
        ended = [datetime.fromisoformat(rows[rank]["finished_at"]) for rank in (0, 1)]
        assert abs((ended[0] - ended[1]).total_seconds()) < 30, ended


@pytest.mark.slow
def test_points_that_fail_on_every_rank_go_on_in_the_same_job(tmp_path: Path) -> None:
    """A data set broken on every rank: no rank waits for another, so the job is not ended
    for it (each point would pay a fresh job's start)."""
    spec = parse_spec(
        SPEC.replace("plain_dataset", "raising_dataset")
        .replace("{size: 64}", "{size: 16}")
        .replace("tests.fixtures.workloads:failing_on_rank\n  model_args: {after: 3}", "linear")
    )
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path, backend="local", world_size=2)
    run_local(plan.points, sweep, spec.slurm)
    jobs = latest_jobs(sweep)
    assert len({jobs[p.id] for p in plan.points}) == 1
    for point in plan.points:
        for rank in (0, 1):
            (row,) = results.read_rows(layout.point_dir(sweep, point.id) / f"rank{rank}.csv")
            assert row["error"].startswith("OSError: Caught OSError in DataLoader worker") or (
                "disk on fire" in row["error"]
            ), row["error"]


def test_the_first_rank_to_fail_is_the_one_every_row_names(monkeypatch: pytest.MonkeyPatch) -> None:
    class Store:
        def __init__(self) -> None:
            self.values: dict[str, bytes] = {}

        def set(self, key: str, value: str) -> None:
            self.values[key] = value.encode()

        def check(self, keys: list[str]) -> bool:
            return all(k in self.values for k in keys)

        def compare_set(self, key: str, expected: str, desired: str) -> bytes:
            current = self.values.get(key)
            if current is None and expected == "":
                self.values[key] = desired.encode()
            return self.values[key]

    store = Store()
    monkeypatch.setattr(peer_failure, "_store", lambda: store)
    assert peer_failure.told("p1", 1, "ValueError: nan") == "ValueError: nan"
    assert peer_failure.told("p1", 0, "RuntimeError: Connection closed by peer") == (
        "rank 1 failed first: ValueError: nan"
    )
    assert peer_failure.told("p2", 0, "OSError: disk") == "OSError: disk"  # a key a point
    assert peer_failure.every_rank_failed("p1", 2, wait_s=0)
    assert not peer_failure.every_rank_failed("p2", 2, wait_s=0)  # rank 1 may wait for rank 0
