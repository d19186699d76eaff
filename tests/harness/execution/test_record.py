"""The row of one measurement: the tail of the wait for data, checked exactly on a fake clock."""

from __future__ import annotations

import re

import pytest
import torch

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import loop, step_times
from harness.execution.dist import DistEnv
from harness.execution.record import RowMaker, percentile, waited_share
from tests.conftest import TINY_WORKLOAD


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class StallingStream:
    """next() costs `read` seconds of fake time, and `stalls[k]` instead at call k (0-based)."""

    def __init__(self, clock: FakeClock, read: float, stalls: dict[int, float]) -> None:
        self.clock, self.read, self.stalls, self.calls = clock, read, stalls, 0

    def next(self) -> torch.Tensor:
        self.clock.now += self.stalls.get(self.calls, self.read)
        self.calls += 1
        return torch.zeros(1)  # one sample

    def close(self) -> None:
        pass


def measured_row(stalls: dict[int, float], *, read: float, compute: float, steps: int):
    clock = FakeClock()

    def step(batch: object) -> None:
        clock.now += compute

    times = loop.timed_loop(
        StallingStream(clock, read, stalls), step, warmup_steps=0, steps=steps, sync=lambda: None, clock=clock
    )
    point = expand(parse_spec("name: t\n" + TINY_WORKLOAD)).points[0]
    return RowMaker(point, "s", DistEnv()).measured("full", 0, times, started="")


def test_stalls_at_known_steps_give_the_tail_and_the_share_exactly() -> None:
    # 20 steps of 20 ms compute; reads of 1 ms except two stalls, 100 ms at step 4, 200 ms at 13.
    row = measured_row({4: 0.100, 13: 0.200}, read=0.001, compute=0.020, steps=20)
    assert row.loading_time_p50 == pytest.approx(0.001)
    # Sorted waits: 18 × 1 ms, 100 ms, 200 ms; p95 sits at 0.95 × 19 = 18.05 between the two
    # stalls, p99 at 18.81 (linear interpolation, numpy's default).
    assert row.loading_time_p95 == pytest.approx(0.100 + 0.05 * 0.100)
    assert row.loading_time_p99 == pytest.approx(0.100 + 0.81 * 0.100)
    assert row.waited_share == pytest.approx(2 / 20)  # only the stalls outlast their 20 ms step
    # The mean is what the course's table shows: the stalls move it little.
    assert row.loading_time == pytest.approx((18 * 0.001 + 0.3) / 20)


def test_a_step_waited_when_its_wait_exceeds_its_own_compute_not_a_fixed_bar() -> None:
    # Compute 10 ms: a 9 ms wait is less than the step's compute, an 11 ms wait is more.
    row = measured_row({0: 0.011, 1: 0.009, 2: 0.011}, read=0.0, compute=0.010, steps=4)
    assert row.waited_share == pytest.approx(2 / 4)


def test_a_loader_that_keeps_up_never_waited() -> None:
    row = measured_row({}, read=0.002, compute=0.050, steps=10)
    assert row.waited_share == 0
    assert row.loading_time_p50 == row.loading_time_p99 == pytest.approx(0.002)


def test_percentile_of_one_step_is_that_step() -> None:
    assert percentile([0.3], 99) == 0.3
    assert percentile([0.0, 1.0], 95) == pytest.approx(0.95)
    assert waited_share([0.5], [0.7]) == 1.0  # waited 0.5 s, computed 0.2 s


# -- the rest of the row: what was measured, on what, and what failed ------------------------------


def test_a_measured_row_carries_the_figures_of_its_window_and_the_warmup_it_really_ran() -> None:
    # 10 steps of 0.5 s (reads free), one sample a batch; the loop ran 4 warmup steps where
    # the spec asked for 1 (the stock was used up): the row says 4.
    times = step_times.LoopTimes(
        first_step_loading_time=2.0,
        warmup_steps=4,
        loading_times=(0.1,) * 10,
        next_times=(0.08,) * 10,
        step_times=(0.5,) * 10,
        samples=80,
        training_time=5.0,
        epoch_restarts=2,
        epoch_restart_time=1.25,
        delivery_period=5,
    )
    point = expand(parse_spec("name: t\n" + TINY_WORKLOAD + "loader: {num_workers: 2}\n")).points[0]
    env = DistEnv(rank=1, world_size=2, hostname="n7", jobid="42_3")
    row = RowMaker(point, "sweep-a", env).measured("full", 2, times, started="2026-01-01T00:00:00.000+00:00")
    assert (row.sweep_id, row.point_id, row.rung, row.repeat, row.status) == (
        "sweep-a",
        point.id,
        "full",
        2,
        "ok",
    )
    assert (row.rank, row.world_size, row.hostname, row.jobid) == (1, 2, "n7", "42_3")
    assert row.settings["num_workers"] == 2 and row.settings["batch_size"] == 8
    assert (row.warmup_steps, row.steps, row.samples) == (4, 10, 80)
    assert row.samples_per_s == pytest.approx(16.0) and row.steps_per_s == pytest.approx(2.0)
    assert row.loading_time == pytest.approx(0.1) and row.loading_time_total == pytest.approx(1.0)
    assert row.next_time == pytest.approx(0.08) and row.first_step_loading_time == 2.0
    assert (row.window_drift, row.window_steady) == (0.0, True)
    assert (row.epoch_restarts, row.epoch_restart_time) == (2, 1.25)
    assert row.delivery_period == 5  # bursts of 5: the analysis then never calls the wait a tail
    assert row.started_at == "2026-01-01T00:00:00.000+00:00" and row.finished_at > row.started_at


def test_a_failed_row_keeps_who_and_what_but_no_figure() -> None:
    point = expand(parse_spec("name: t\n" + TINY_WORKLOAD)).points[0]
    row = RowMaker(point, "s", DistEnv(hostname="n1")).row(
        "full", 0, status="failed", error="OSError: disk on fire"
    )
    assert (row.status, row.error, row.hostname) == ("failed", "OSError: disk on fire", "n1")
    assert row.warmup_steps == 1  # the spec's: the loop never ran
    assert row.settings["dataset"] == "fake_cifar"
    assert row.samples_per_s is None and row.loading_time is None and row.training_time is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", row.started_at)
