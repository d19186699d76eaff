"""The timed loop: warmup, then measured steps; time blocked in next() vs the whole step.

The device is synchronised at the boundaries of the measured region, not inside it: a sync
per step would stop the host from fetching batch N+1 while the device computes batch N, and
that overlap is exactly what the loader settings are about. So `training_time` is exact, and
per-step times are host-side wall times whose sum is the region (the last one absorbs the
final sync). See nanoGPT's bench.py and torchtitan's data-loading timer for the same shape.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class BatchStream(Protocol):
    """An endless source of batches (the ladder decides what is cached)."""

    def next(self) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopTimes:
    first_step_loading_time: float
    """The very first next() of the rung (warmup included): iterator and worker start-up."""
    loading_times: tuple[float, ...]
    step_times: tuple[float, ...]
    training_time: float

    @property
    def steps(self) -> int:
        return len(self.step_times)

    @property
    def loading_time(self) -> float:
        return statistics.fmean(self.loading_times)

    @property
    def loading_time_median(self) -> float:
        return statistics.median(self.loading_times)

    @property
    def step_time(self) -> float:
        return statistics.fmean(self.step_times)

    @property
    def step_time_median(self) -> float:
        return statistics.median(self.step_times)


def timed_loop(
    stream: BatchStream,
    train_step: Callable[[Any], None],
    *,
    warmup_steps: int,
    steps: int,
    sync: Callable[[], None],
    clock: Callable[[], float] = time.perf_counter,
    mark: Callable[[str], None] = lambda region: None,
) -> LoopTimes:
    """`mark` is told "warmup", "measure" and "end" as the loop crosses those boundaries
    (the samplers shade the timeline with them)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1 (got {steps})")
    first: float | None = None
    mark("warmup")
    for _ in range(warmup_steps):
        t0 = clock()
        batch = stream.next()
        if first is None:
            first = clock() - t0
        train_step(batch)
    sync()

    loading: list[float] = []
    step_times: list[float] = []
    mark("measure")
    region_start = clock()
    for _ in range(steps):
        t0 = clock()
        batch = stream.next()
        t1 = clock()
        train_step(batch)
        t2 = clock()
        loading.append(t1 - t0)
        step_times.append(t2 - t0)
        if first is None:
            first = t1 - t0
    sync()
    region_end = clock()
    mark("end")
    # The final sync waits for work queued by the last steps: charge it to the last step.
    step_times[-1] += region_end - (region_start + sum(step_times))
    assert first is not None
    return LoopTimes(
        first_step_loading_time=first,
        loading_times=tuple(loading),
        step_times=tuple(step_times),
        training_time=region_end - region_start,
    )
