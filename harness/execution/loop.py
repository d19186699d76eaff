"""The timed loop: warmup until the loader is in its steady state, then a measured window.

What a measured step is: wait for the next batch (`next()`), the host-to-device copy call,
then the train step. `loading_time` is the first two, as the Jean Zay course's chronometer
times them (004_*); `next_time` is `next()` alone.

The rules of the window, each for a reason a user would otherwise be misled by:

- **Synchronised at the edges only.** The device is synchronised before and after the window,
  not inside it: a sync per step would stop the host from fetching batch N+1 while the device
  computes batch N, the overlap the loader settings exist for. `training_time` is exact; the
  per-step times are host wall times whose sum is the window (the last absorbs the final sync).
  The same shape as nanoGPT's bench.py and torchtitan's data-loading timer.
- **No stock in the window.** When the iterator starts, the workers prepare up to
  num_workers × prefetch_factor batches before the train step asks for them; a window that
  starts on that stock serves its first steps for free and flatters many workers. So the
  warmup lasts at least `stock` steps, and goes on (up to 4 × stock more) until no batch is
  left ready in the loader (its queue and its out-of-order batches; where the iterator cannot
  say, until a step has had to wait for its batch). A loader that never runs out keeps up with
  the step, and then its stock does not change the throughput.
- **Steady, or said not to be.** The window's second half is compared with its first
  (`drift`); a drift larger than 5 % and than twice its standard error marks the window not
  steady. Under 8 steps there is too little to tell (`steady` is None).
- **Ranks together.** Under DDP every rank leaves the warmup at the same step (they agree on
  when the stock is used up) and passes a barrier, so the ranks' windows coincide.
- **Epochs counted.** A window that crosses an epoch end pays for a new iterator (and new
  worker processes unless persistent_workers): such steps are counted and timed on their own.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

DRAIN_FACTOR = 4
"""After the stock's own steps, at most this many times more to see the stock used up."""
WAITED = 0.05
"""A next() longer than this fraction of the median step so far means the queue was empty."""
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
    """Samples delivered in the window (len of each batch's targets)."""
    training_time: float
    epoch_restarts: int = 0
    epoch_restart_time: float = 0.0

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


def _identity(batch: Any) -> Any:
    return batch


def _alone(flag: bool) -> bool:
    return flag


@dataclass(kw_only=True, slots=True)
class _Clocked:
    """One step, timed: next(), the copy call, the train step."""

    next_s: float
    copy_s: float
    total_s: float
    samples: int
    new_epoch: bool


def _one_step(
    stream: BatchStream,
    to_device: Callable[[Any], Any],
    train_step: Callable[[Any], None],
    clock: Callable[[], float],
) -> _Clocked:
    epoch = getattr(stream, "epoch", 0)
    t0 = clock()
    batch = stream.next()
    t1 = clock()
    on_device = to_device(batch)
    t2 = clock()
    train_step(on_device)
    t3 = clock()
    return _Clocked(
        next_s=t1 - t0,
        copy_s=t2 - t1,
        total_s=t3 - t0,
        samples=batch_samples(batch),
        new_epoch=getattr(stream, "epoch", 0) != epoch,
    )


def batch_samples(batch: Any) -> int:
    """Samples in a batch: the length of its targets (or of the batch itself)."""
    target = batch[1] if isinstance(batch, (tuple, list)) and len(batch) > 1 else batch
    try:
        return len(target)
    except TypeError:
        return 1


def timed_loop(
    stream: BatchStream,
    train_step: Callable[[Any], None],
    *,
    warmup_steps: int,
    steps: int,
    sync: Callable[[], None],
    to_device: Callable[[Any], Any] = _identity,
    stock: int = 0,
    agree: Callable[[bool], bool] = _alone,
    barrier: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
    mark: Callable[[str], None] = lambda region: None,
) -> LoopTimes:
    """`stock`: batches the loader can hold ready (num_workers × prefetch_factor). `agree`
    turns this rank's "the stock is used up" into the ranks' common answer (all of them).
    `mark` is told "warmup", "measure" and "end" as the loop crosses those boundaries."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1 (got {steps})")
    mark("warmup")
    warm = _warm_up(stream, to_device, train_step, clock, warmup_steps, stock, agree)
    sync()
    barrier()
    mark("measure")
    region_start = clock()
    measured = [_one_step(stream, to_device, train_step, clock) for _ in range(steps)]
    sync()
    region_end = clock()
    mark("end")
    step_times = [m.total_s for m in measured]
    # The final sync waits for work queued by the last steps: charge it to the last step.
    step_times[-1] += region_end - (region_start + sum(step_times))
    first = warm[0].next_s if warm else measured[0].next_s
    restarts = [m for m in measured if m.new_epoch]
    return LoopTimes(
        first_step_loading_time=first,
        warmup_steps=len(warm),
        loading_times=tuple(m.next_s + m.copy_s for m in measured),
        next_times=tuple(m.next_s for m in measured),
        step_times=tuple(step_times),
        samples=sum(m.samples for m in measured),
        training_time=region_end - region_start,
        epoch_restarts=len(restarts),
        epoch_restart_time=sum(m.total_s for m in restarts),
    )


def _warm_up(
    stream: BatchStream,
    to_device: Callable[[Any], Any],
    train_step: Callable[[Any], None],
    clock: Callable[[], float],
    warmup_steps: int,
    stock: int,
    agree: Callable[[bool], bool],
) -> list[_Clocked]:
    """The spec's warmup, at least `stock` steps, then on until the stock is used up."""
    done: list[_Clocked] = []
    for _ in range(max(warmup_steps, stock)):
        done.append(_one_step(stream, to_device, train_step, clock))
    if stock == 0:
        return done
    used_up = _stock_used_up(stream, done)
    for _ in range(DRAIN_FACTOR * stock):
        # Every rank asks the same number of times, so that the collective in `agree` pairs up.
        if agree(used_up):
            break
        done.append(_one_step(stream, to_device, train_step, clock))
        used_up = _stock_used_up(stream, done)
    return done


def _stock_used_up(stream: BatchStream, done: Sequence[_Clocked]) -> bool:
    """No batch left ready in the loader, where it can say (LoaderStream.ready); else the last
    step waited for its batch: longer than WAITED of a step and than 3 ready fetches (a ready
    batch still costs its IPC, ~2 ms on 2 cores; seen: 5 % of a 20 ms step alone misfires)."""
    ready = getattr(stream, "ready", lambda: None)()
    if ready is not None:
        return bool(ready == 0)
    last = done[-1]
    if last.new_epoch or len(done) < 3:
        return False
    typical_step = statistics.median(s.total_s for s in done)
    typical_fetch = statistics.median(s.next_s for s in done[1:])
    return last.next_s > max(WAITED * typical_step, 3 * typical_fetch)


def capacity_loop(
    stream: BatchStream,
    *,
    steps: int,
    stock: int,
    barrier: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Batches per second the loader delivers with no train step: its capacity.

    The stock is drained first (with no step, it is handed over at once), so the time counts
    batches made while the clock runs. Every rank runs it at the same time (the barrier), as
    the loaders of the ranks of a node share its cores during training.
    """
    for _ in range(stock + 1):
        stream.next()
    barrier()
    start = clock()
    for _ in range(steps):
        stream.next()
    return steps / (clock() - start)
