"""A rung's steps, timed: one step (`one_step`: next(), the copy call, the train step, a
`Clocked`), the measured window's steps kept in flat arrays (`Record`), and the figures they
make (`LoopTimes`: the means, the drift between the window's halves, whether it is steady).

A concept apart from the loop's rules (loop.py: when the window starts, how long it lasts) and
from the warmup (warmup.py): how a step is timed and what is kept of it, which the harness's
own loop, a user's loop under the probe (harness/probe/alone.py) and the benchmarks share.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol

DRIFT_FLOOR = 0.05
"""A drift under 5 % between the window's halves is never called unsteady."""
MIN_STEADY_STEPS = 8


class BatchStream(Protocol):
    """An endless source of batches (the ladder decides what is cached)."""

    def next(self) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopTimes:
    first_step_loading_time: float
    """The very first next() of the rung (warmup included): iterator and worker start-up."""
    warmup_steps: int
    """Steps run before the window (the spec's and those that used up the stock)."""
    loading_times: tuple[float, ...]
    """Per measured step: next() plus the copy call."""
    next_times: tuple[float, ...]
    step_times: tuple[float, ...]
    samples: int
    """Samples delivered in the window (the leading dimension of each batch's tensors)."""
    training_time: float
    epoch_restarts: int = 0
    epoch_restart_time: float = 0.0
    delivery_period: int | None = None
    """Steps per period of a periodic delivery (bursts of this many batches; None: not
    periodic): the window covers a whole number of them."""
    too_short: str | None = None
    """The line saying that the window covers too few periods, and what to set (else None)."""
    window_rse: float | None = None
    """An auto window's step rate's relative standard error (steady.block_rse); None for a
    window of fixed length."""
    capped: str | None = None
    """The line saying that an auto window stopped at max_seconds short of its precision."""

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
    def next_time(self) -> float:
        return statistics.fmean(self.next_times)

    @property
    def step_time(self) -> float:
        return statistics.fmean(self.step_times)

    @property
    def step_time_median(self) -> float:
        return statistics.median(self.step_times)

    @property
    def drift(self) -> float | None:
        """Mean step time of the second half over the first, minus 1."""
        first, second = _halves(self.step_times)
        if not first or not second:
            return None
        return statistics.fmean(second) / statistics.fmean(first) - 1

    @property
    def steady(self) -> bool | None:
        drift = self.drift
        if self.steps < MIN_STEADY_STEPS or drift is None:
            return None
        first, second = _halves(self.step_times)
        se = math.sqrt(
            statistics.variance(first) / len(first) + statistics.variance(second) / len(second)
        ) / statistics.fmean(first)
        return not (abs(drift) > DRIFT_FLOOR and abs(drift) > 2 * se)


def _halves(values: Sequence[float]) -> tuple[Sequence[float], Sequence[float]]:
    # The last step absorbs the final sync: leave it out of the comparison.
    body = values[:-1] if len(values) > 2 else values
    half = len(body) // 2
    return body[:half], body[half:]


@dataclass(kw_only=True, slots=True)
class Clocked:
    """One step, timed: next(), the copy call, the train step."""

    next_s: float
    copy_s: float
    total_s: float
    samples: int
    new_epoch: bool


def one_step(
    stream: BatchStream,
    to_device: Callable[[Any], Any],
    clock: Callable[[], float],
    count: Callable[[Any], int],
) -> Generator[Any, None, Clocked]:
    """next(), the copy, then the batch handed to the train step (the yield): the step is
    whatever the consumer does before it asks for the next batch."""
    epoch = getattr(stream, "epoch", 0)
    t0 = clock()
    batch = stream.next()
    t1 = clock()
    on_device = to_device(batch)
    t2 = clock()
    yield on_device
    t3 = clock()
    return Clocked(
        next_s=t1 - t0,
        copy_s=t2 - t1,
        total_s=t3 - t0,
        samples=count(batch),
        new_epoch=getattr(stream, "epoch", 0) != epoch,
    )


class Record:
    """The measured steps, timed: flat arrays of doubles (per step its start, next() and the
    copy call), the samples as a running count, the steps that started an epoch as their
    indices. A step's time is from its start to the next one's, so the steps tile the window.

    Why not an object per step (as the warmup keeps, a few dozen steps): at steps of a few
    microseconds an auto window takes a million of them, and a million objects kept alive in a
    list made the garbage collector's full passes over them last up to 0.3 s each (8 in a 9 s
    window, measured), a pause that grows with the window, inside it; and the harness's own work
    between steps (~5 us: the object, a generator per step, the batch's count) was left out of
    the per-step times (6 % of the window was in them), so the blocks of an auto window, summed
    from them, lasted 6 to 15 times their 0.1 s. With nothing kept per step, the collector did
    not run at all in a window of a million trivial steps (benchmarks/tiny_steps.py); it is left
    on: a step's own garbage is collected in the window as in training, part of its cost.
    """

    def __init__(
        self,
        stream: BatchStream,
        to_device: Callable[[Any], Any],
        clock: Callable[[], float],
        count: Callable[[Any], int],
    ) -> None:
        self.stream, self.to_device, self.clock, self.count = stream, to_device, clock, count
        self.starts, self.next_s, self.copy_s = array("d"), array("d"), array("d")
        self.samples = 0
        self.restarts: list[int] = []
        """Indices of the steps whose next() started an epoch (a new iterator)."""
        self.epoch = getattr(stream, "epoch", 0)
        self._last: Any = _NOTHING
        self._last_samples = 0

    def __len__(self) -> int:
        return len(self.starts)

    def run(self, steps: int) -> Generator[Any, None, None]:
        """`steps` more measured steps. The arrays are grown for all of them first, so that a
        step writes three doubles and allocates nothing that outlives it."""
        first = len(self.starts)
        room = bytes(8 * steps)
        for times in (self.starts, self.next_s, self.copy_s):
            times.frombytes(room)
        starts, next_s, copy_s = self.starts, self.next_s, self.copy_s
        fetch, to_device, clock = self.stream.next, self.to_device, self.clock
        for i in range(first, first + steps):
            t0 = clock()
            batch = fetch()
            t1 = clock()
            on_device = to_device(batch)
            t2 = clock()
            starts[i], next_s[i], copy_s[i] = t0, t1 - t0, t2 - t1
            self._counted(batch, i)
            # Only the latest host batch stays held while the step runs: _counted keeps it to
            # count a cached rung's (the same object every step) once.
            del batch
            yield on_device

    def _counted(self, batch: Any, index: int) -> None:
        # The cached rungs hand over the same batch at every step: counted once (a batch's
        # count walks its structure, ~3 us, a third of a trivial step).
        if batch is not self._last:
            self._last, self._last_samples = batch, self.count(batch)
        self.samples += self._last_samples
        epoch = getattr(self.stream, "epoch", 0)
        if epoch != self.epoch:
            self.epoch = epoch
            self.restarts.append(index)

    def totals(self, end: float) -> list[float]:
        """Each step's time: to the next step's start, the last one's to `end` (the window's
        end: it absorbs the final sync, which waits for the work the last steps queued)."""
        starts = self.starts
        return [b - a for a, b in pairwise(starts)] + [end - starts[-1]]

    def since(self, step: int, now: float) -> float:
        """The time from the start of `step` to `now`."""
        return now - self.starts[step]

    def span(self, first: int, last: int) -> float:
        """The time from the start of step `first` to that of step `last`."""
        return self.starts[last] - self.starts[first]


_NOTHING: Any = object()
