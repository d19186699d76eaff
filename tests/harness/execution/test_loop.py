from __future__ import annotations

import gc
from typing import Any

import pytest
import torch

from harness.execution import loop, step_times, warmup


def timed_loop(*args: Any, **rules: Any) -> step_times.LoopTimes:
    """The loop on fake batches (ints): one sample each."""
    return loop.timed_loop(*args, count=lambda batch: 1, **rules)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class SlowStream:
    """next() costs `load` seconds of fake time; the first one costs `first` (worker start-up)."""

    def __init__(self, clock: FakeClock, load: float, first: float) -> None:
        self.clock, self.load, self.first, self.calls = clock, load, first, 0

    def next(self) -> int:
        self.clock.now += self.first if self.calls == 0 else self.load
        self.calls += 1
        return self.calls

    def close(self) -> None:
        pass


def test_loading_and_step_times_with_warmup_excluded() -> None:
    clock = FakeClock()
    stream = SlowStream(clock, load=0.25, first=5.0)
    seen: list[int] = []

    def step(batch: int) -> None:
        seen.append(batch)
        clock.now += 1.0

    synced: list[float] = []
    times = timed_loop(
        stream, step, warmup_steps=2, steps=4, sync=lambda: synced.append(clock.now), clock=clock
    )
    assert seen == [1, 2, 3, 4, 5, 6]  # warmup batches are trained on, not counted
    assert times.steps == 4
    assert times.first_step_loading_time == pytest.approx(5.0)
    assert times.loading_times == pytest.approx((0.25,) * 4)
    assert times.loading_time == pytest.approx(0.25)
    assert times.step_times == pytest.approx((1.25,) * 4)
    assert times.training_time == pytest.approx(5.0)
    assert len(synced) == 2  # before and after the measured region, not per step


def test_final_sync_is_charged_to_the_last_step() -> None:
    clock = FakeClock()
    stream = SlowStream(clock, load=0.0, first=0.0)

    def late_sync() -> None:
        clock.now += 3.0  # the device finishing queued work

    times = timed_loop(stream, lambda b: None, warmup_steps=0, steps=3, sync=late_sync, clock=clock)
    # The first sync (before the region) is not measured; the one after it is.
    assert times.training_time == pytest.approx(3.0)
    assert times.step_times[-1] == pytest.approx(3.0)
    assert sum(times.step_times) == pytest.approx(times.training_time)


def test_without_warmup_the_first_measured_step_is_the_first_step() -> None:
    clock = FakeClock()
    times = timed_loop(
        SlowStream(clock, 0.1, 2.0), lambda b: None, warmup_steps=0, steps=2, sync=lambda: None, clock=clock
    )
    assert times.first_step_loading_time == pytest.approx(2.0)
    assert times.loading_times == pytest.approx((2.0, 0.1))


def test_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="steps must be >= 1"):
        timed_loop(SlowStream(FakeClock(), 0, 0), lambda b: None, warmup_steps=0, steps=0, sync=lambda: None)


def test_the_window_yields_every_batch_to_the_consumer_and_returns_the_times() -> None:
    """A user's own loop drives the same window: the step is what it does between batches."""
    clock = FakeClock()
    window = loop.window(
        SlowStream(clock, 0.5, 0.5),
        warmup_steps=1,
        steps=2,
        sync=lambda: None,
        clock=clock,
        count=lambda b: 4,
    )
    seen = []
    try:
        batch = next(window)
        while True:
            seen.append(batch)
            clock.now += 2.0  # the user's step
            batch = window.send(None)
    except StopIteration as stop:
        times = stop.value
    assert seen == [1, 2, 3]
    assert times.step_times == pytest.approx((2.5, 2.5)) and times.samples == 8


def test_a_step_that_raises_is_thrown_into_the_generator_that_drives_it() -> None:
    """drive() hands a failing step back to the measurement, which decides what it records."""

    def measured() -> Any:
        try:
            yield "batch"
        except RuntimeError as e:
            return f"failed row: {e}"
        return "ok row"

    def bad_step(batch: str) -> None:
        raise RuntimeError("out of memory")

    assert loop.drive(measured(), bad_step) == "failed row: out of memory"
    assert loop.drive(measured(), lambda batch: None) == "ok row"


# -- the steadiness rule (LoopTimes.drift, steady), against known step times ----------------------


def window_of(step_costs: list[float]) -> step_times.LoopTimes:
    """A window whose measured steps cost exactly `step_costs` of fake time (no warmup, free
    batches, a sync that costs nothing), so that every step time is known."""
    clock = FakeClock()
    costs = iter(step_costs)

    def step(batch: int) -> None:
        clock.now += next(costs)

    return timed_loop(
        SlowStream(clock, 0.0, 0.0),
        step,
        warmup_steps=0,
        steps=len(step_costs),
        sync=lambda: None,
        clock=clock,
    )


def halves(first: list[float], second: list[float]) -> list[float]:
    """Step costs whose halves are `first` and `second`, and a last step (left out of the
    comparison: it absorbs the final sync) that is wildly off, to show it is left out."""
    return [*first, *second, 50.0]


@pytest.mark.parametrize(("drift", "steady"), [(0.049, True), (0.051, False), (-0.051, False)])
def test_a_drift_is_called_unsteady_only_beyond_the_5_percent_floor(drift: float, steady: bool) -> None:
    # No noise at all (the standard error is 0): the floor alone decides.
    times = window_of(halves([1.0] * 4, [1.0 + drift] * 4))
    assert times.drift == pytest.approx(drift)
    assert times.steady is steady


@pytest.mark.parametrize(("spread", "steady"), [(0.058, False), (0.064, True)])
def test_a_drift_within_twice_its_standard_error_is_steady(spread: float, steady: bool) -> None:
    """A 10 % drift, with steps alternating ±spread around each half's mean: the standard
    error of the drift is spread × sqrt(2/3) (4 steps per half), so 2 × SE crosses 10 % at
    spread = 0.0612; these two spreads pin the factor between 1.91 and 2.11."""
    first = [1.0 - spread, 1.0 + spread] * 2
    second = [1.1 - spread, 1.1 + spread] * 2
    times = window_of(halves(first, second))
    assert times.drift == pytest.approx(0.10)
    assert times.steady is steady


def test_under_8_steps_steadiness_is_not_judged() -> None:
    assert window_of([1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 1.0]).steady is None  # a 100 % drift, 7 steps
    assert window_of([1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 1.0]).steady is False  # the same, 8 steps


# -- the drain rule: the window starts on an empty stock ----------------------------------------


class StockedLoader:
    """A loader on the fake clock: its workers finish a batch every `every` seconds and hold at
    most `stock` ready (the prefetch limit: they pause while it is full, and go on when a batch
    is taken). next() takes a ready batch at no cost, or waits for the next one. `ready()`
    says how many are ready, as LoaderStream.ready does; `has_ready=False` hides it (a
    loader that cannot say)."""

    def __init__(self, clock: FakeClock, *, stock: int, every: float, has_ready: bool = True) -> None:
        self.clock, self.stock, self.every = clock, stock, every
        self.made = self.taken = 0
        self.next_done = clock.now + every
        if has_ready:
            self.ready = self._ready

    def _advance(self) -> None:
        while self.made - self.taken < self.stock and self.next_done <= self.clock.now:
            self.made += 1
            self.next_done += self.every

    def _ready(self) -> int:
        self._advance()
        return self.made - self.taken

    def next(self) -> int:
        self._advance()
        if self.made == self.taken:
            self.clock.now = self.next_done  # the wait for data
            self._advance()
        if self.made - self.taken == self.stock:  # a slot frees: the paused workers go on
            self.next_done = self.clock.now + self.every
        self.taken += 1
        return self.taken

    def close(self) -> None:
        pass


def loader_bound(clock: FakeClock, first_step: float = 10.0) -> Any:
    """A 1 s step whose first call takes `first_step` (a GPU job's start-up): meanwhile the
    workers fill their whole stock."""
    calls = [0]

    def step(batch: int) -> None:
        calls[0] += 1
        clock.now += first_step if calls[0] == 1 else 1.0

    return step


@pytest.mark.parametrize("has_ready", [True, False])
def test_the_warmup_uses_the_stock_up_and_every_measured_step_waits_as_in_the_steady_state(
    has_ready: bool,
) -> None:
    """Workers that make a batch every 2 s for a 1 s step: in the steady state each step waits
    1 s for its batch. The 4 batches stocked during the slow first step must not be measured."""
    clock = FakeClock()
    loader = StockedLoader(clock, stock=4, every=2.0, has_ready=has_ready)
    left: list[int] = []
    times = timed_loop(
        loader,
        loader_bound(clock),
        warmup_steps=1,
        steps=6,
        stock=4,
        sync=lambda: None,
        clock=clock,
        mark=lambda region: left.append(loader.made - loader.taken) if region == "measure" else None,
    )
    assert left == [0]  # no batch ready when the window starts
    assert times.warmup_steps > 4  # past the stock's own steps: the workers kept refilling it
    assert times.loading_times == pytest.approx((1.0,) * 6)


def test_without_the_drain_the_window_is_served_from_the_stock() -> None:
    """The failure the rule prevents, on the same loader: the first measured steps wait for
    nothing, and the window's throughput is flattered."""
    clock = FakeClock()
    times = timed_loop(
        StockedLoader(clock, stock=4, every=2.0),
        loader_bound(clock),
        warmup_steps=1,
        steps=6,
        sync=lambda: None,
        clock=clock,
    )
    assert times.warmup_steps == 1
    assert times.loading_times[:3] == pytest.approx((0.0, 0.0, 0.0))


def test_a_loader_that_never_runs_out_ends_the_warmup_after_the_drain_limit() -> None:
    """Workers faster than the step keep the stock full: the warmup gives up after the
    stock's steps and DRAIN_FACTOR × stock more, and no measured step waits."""
    clock = FakeClock()
    times = timed_loop(
        StockedLoader(clock, stock=4, every=0.5),
        loader_bound(clock),
        warmup_steps=1,
        steps=6,
        stock=4,
        sync=lambda: None,
        clock=clock,
    )
    assert times.warmup_steps == 4 + warmup.DRAIN_FACTOR * 4
    assert times.loading_times == pytest.approx((0.0,) * 6)


# -- capacity_loop: the loader alone, its stock drained first --------------------------------------


def test_capacity_counts_only_batches_made_while_the_clock_runs() -> None:
    """3 batches stocked (free), then one per 0.25 s: the capacity is exactly 4 batches/s;
    counting the stock would give 6.4."""
    clock = FakeClock()
    loader = StockedLoader(clock, stock=3, every=0.25)
    clock.now += 10.0  # the workers filled their stock during the rung before
    read_at_barrier: list[int] = []
    capacity = loop.capacity_loop(
        loader, steps=8, stock=3, barrier=lambda: read_at_barrier.append(loader.taken), clock=clock
    )
    assert capacity == pytest.approx(4.0)
    assert loader.taken == 3 + 1 + 8
    assert read_at_barrier == [0]  # the ranks meet, then drain, then the clock starts


def test_a_fast_loader_is_timed_for_at_least_the_rungs_window() -> None:
    """One batch per 10 ms against a 1 s window: 8 batches would be timed over 80 ms, where
    one 50 ms hiccup of a loaded machine reads as a 40 % loss. The loop goes on for the
    window's second (100 batches), where the same hiccup moves the figure by 5 %. A slow
    loader, past the window at its 8 batches, is not held longer."""
    clock = FakeClock()
    loader = StockedLoader(clock, stock=3, every=0.01)
    assert loop.capacity_loop(loader, steps=8, stock=3, min_seconds=1.0, clock=clock) == pytest.approx(100.0)
    assert loader.taken == 3 + 1 + 100
    slow = StockedLoader(FakeClock(), stock=3, every=0.5)  # already past the window at 8 batches
    assert loop.capacity_loop(slow, steps=8, stock=3, min_seconds=1.0, clock=slow.clock) == pytest.approx(2.0)
    assert slow.taken == 3 + 1 + 8


def test_a_long_wait_at_the_barrier_is_not_counted_as_capacity() -> None:
    """A rank that waits 10 s for its peers: its workers refill their stock meanwhile. Drained
    before the barrier, those 3 batches were handed over free in the timed region (6.4
    batches/s instead of 4); drained after it, the capacity stays exact."""
    clock = FakeClock()
    loader = StockedLoader(clock, stock=3, every=0.25)

    def slow_peers() -> None:
        clock.now += 10.0

    assert loop.capacity_loop(loader, steps=8, stock=3, barrier=slow_peers, clock=clock) == pytest.approx(4.0)


# -- steps of a few microseconds: nothing kept per step, the steps tile the window ---------------


def test_the_harness_own_work_between_steps_is_in_the_step_it_follows_not_heaped_on_the_last() -> None:
    """The harness counts each batch's samples between steps (here 1 s of fake time, as a
    batch's count costs ~3 us against a trivial step of ~1 us): that time belongs to the step
    it follows. Left out of the steps' times, it all fell on the last step (3.5 s of 4.5), and
    an auto window's blocks, summed from the steps, missed most of their real duration."""
    clock = FakeClock()

    def counted(batch: int) -> int:
        clock.now += 1.0
        return 1

    times = loop.timed_loop(
        SlowStream(clock, load=0.25, first=0.25),
        lambda b: None,
        warmup_steps=0,
        steps=3,
        sync=lambda: None,
        clock=clock,
        count=counted,
    )
    assert times.step_times == pytest.approx((1.25, 1.25, 1.25))
    assert sum(times.step_times) == pytest.approx(times.training_time)


def test_a_window_of_a_hundred_thousand_trivial_steps_makes_the_garbage_collector_run_not_once() -> None:
    """A cached rung's batch and a step that does nothing: the window keeps nothing per step
    (flat arrays), so the collector never pauses inside it. With an object per step, 100,000
    steps made it run ~140 times, and its full passes over the growing list lasted up to 0.3 s
    at a million steps: a pause inside the window that grew with it."""
    from harness.execution.ladder import RepeatStream

    passes: list[int] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and inside[0]:
            passes.append(info["generation"])

    inside = [False]
    gc.collect()
    gc.callbacks.append(seen)
    try:
        times = loop.timed_loop(
            RepeatStream((torch.zeros(4, 3), torch.zeros(4))),
            lambda b: None,
            warmup_steps=0,
            steps=100_000,
            sync=lambda: None,
            mark=lambda region: inside.__setitem__(0, region == "measure"),
        )
    finally:
        gc.callbacks.remove(seen)
    assert times.steps == 100_000 and times.samples == 400_000
    assert passes == []


def test_a_step_that_raises_inside_a_long_window_reaches_the_measurement_that_records_it() -> None:
    """The arrays change nothing of how a failing step is handled: it is thrown back at its
    yield and ends the window (a failed row, by the runner)."""
    from harness.execution.ladder import RepeatStream

    steps = [0]

    def fails_late(batch: Any) -> None:
        steps[0] += 1
        if steps[0] == 5_000:
            raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        loop.timed_loop(
            RepeatStream(torch.zeros(2)), fails_late, warmup_steps=0, steps=10_000, sync=lambda: None
        )
    assert steps[0] == 5_000


def test_an_auto_window_counts_its_blocks_from_edge_to_edge() -> None:
    """Blocks of an auto window timed between their edges: with the harness's own work
    between steps as long as the steps themselves, every block lasts what the clock says and
    the rate is exact (standard error 0); summed from the steps' own times, the blocks missed
    half of it."""
    clock = FakeClock()

    def counted(batch: int) -> int:
        clock.now += 0.01
        return 1

    times = loop.timed_loop(
        SlowStream(clock, load=0.01, first=0.01),
        lambda b: None,
        warmup_steps=0,
        steps=40,
        seconds=1.0,
        max_seconds=5.0,
        sync=lambda: None,
        clock=clock,
        count=counted,
    )
    assert times.window_rse == pytest.approx(0.0) and times.capped is None
    assert times.step_times == pytest.approx((0.02,) * times.steps)
    assert 1.0 <= times.training_time < 1.5
