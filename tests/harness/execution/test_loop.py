from __future__ import annotations

import pytest

from harness.execution.loop import timed_loop


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
