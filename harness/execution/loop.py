"""The timed loop: warmup until the loader is in its steady state, then a measured window.

What a measured step is: wait for the next batch (`next()`), the host-to-device copy call,
then the train step. `loading_time` is the first two, as the Jean Zay course's chronometer
times them (https://github.com/IDRIS-CNRS/DLO-JZ, Jour2/tp_dlojz_jour2/dlojz2_3.py);
`next_time` is `next()` alone.

The rules of the window, each for a reason a user would otherwise be misled by:

- **Synchronised at the edges only.** The device is synchronised before and after the window,
  not inside it: a sync per step would stop the host from fetching batch N+1 while the device
  computes batch N, the overlap the loader settings exist for. `training_time` is exact; the
  per-step times are host wall times whose sum is the window (the last absorbs the final sync).
  The same shape as nanoGPT's bench.py and torchtitan's data-loading timer.
- **Nothing kept per step.** The window's steps are recorded in flat arrays (`Record`), a
  step's time from its start to the next one's: at steps of a few microseconds an object per
  step made the garbage collector pause inside the window and the harness's own work escaped
  the steps' times (an auto window then never settled; benchmarks/tiny_steps.py).
- **No stock in the window.** When the iterator starts, the workers prepare up to
  num_workers × prefetch_factor batches before the train step asks for them; a window that
  starts on that stock serves its first steps for free and flatters many workers. So the
  warmup lasts at least `stock` steps, and goes on (up to 4 × stock more) until no batch is
  left ready in the loader (its queue and its out-of-order batches; where the iterator cannot
  say, until a step has had to wait for its batch). A loader that never runs out keeps up with
  the step, and then its stock does not change the throughput.
- **Whole periods of the delivery.** Workers of equal per-batch cost stay in step, and their
  batches arrive in bursts of num_workers, once per worker period: a step faster than the
  loader waits once a burst. The warmup then goes on (within the same limit) until the waits'
  spacing has repeated (`steady.delivery`), and the window is rounded up to a whole number of
  periods: any stretch of whole periods lasts the same, whatever its phase, where a period and
  a half reads a burst more or a wait more (0.80 to 1.04 of the steady rate, issue 30). A
  window under MIN_PERIODS periods is said to be too short, in one line naming the fix.
- **At least `seconds`.** With `measure.seconds`, the window goes on in whole periods (at
  least CHUNK steps at a time) until it has lasted that long, as criterion.rs and pyperf
  size their samples by time; under DDP the ranks agree at each chunk's end (a collective).
- **Or as long as the rate needs (`steps: auto`).** The window is measured in blocks of
  whole periods, each at least AUTO_BLOCK_S long as its first CHUNK steps foretell
  (steady.block_steps; the ranks' largest), at least AUTO_MIN_BLOCKS of them, and stops at a block's
  end once it has lasted `seconds` and the blocks' durations give its step rate a relative
  standard error of at most AUTO_RSE (2 %); else at `max_seconds`, in one line saying so.
  Under DDP the ranks stop together: each block's end is a collective (`agree`), and the
  window ends when every rank's rate is known, or at its most.
- **Steady, or said not to be.** The window's second half is compared with its first
  (`drift`); a drift larger than 5 % and than twice its standard error marks the window not
  steady. Under 8 steps there is too little to tell (`steady` is None).
- **Ranks together.** Under DDP every rank leaves the warmup at the same step (they agree on
  when the stock is used up) and passes a barrier, so the ranks' windows coincide.
- **Epochs counted.** A window that crosses an epoch end pays for a new iterator (and new
  worker processes unless persistent_workers): such steps are counted and timed on their own.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from array import array
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, Protocol, TypeVar, cast

from harness.execution import steady
from harness.execution.batches import count_samples
from harness_schema.settings import AUTO_BLOCK_STEPS, AUTO_MIN_BLOCKS, AUTO_RSE, DRAIN_FACTOR, MIN_PERIODS

log = logging.getLogger(__name__)

WAITED = 0.05
"""A next() longer than this fraction of the median step so far means the queue was empty."""
DRIFT_FLOOR = 0.05
"""A drift under 5 % between the window's halves is never called unsteady."""
MIN_STEADY_STEPS = 8
_LOOKED_AT = steady.REPEATS + 2
"""The warmup's latest steps the delivery is read from, in stocks: the longest period looked
for is the stock, over REPEATS + 1 periods and one more (a hiccup in the last)."""
CHUNK = AUTO_BLOCK_STEPS
"""With measure.seconds, the window grows by at least this many steps at a time (whole
periods): under DDP each growth is a collective, which a per-step check would pay every step."""


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


def _identity(batch: Any) -> Any:
    return batch


def _alone(flag: bool) -> bool:
    return flag


@dataclass(kw_only=True, slots=True)
class Clocked:
    """One step, timed: next(), the copy call, the train step."""

    next_s: float
    copy_s: float
    total_s: float
    samples: int
    new_epoch: bool


Window = Generator[Any, None, "LoopTimes"]
"""A measured rung as its consumer sees it: it yields each batch, on the device, for the
train step to run on, and returns the LoopTimes when the window is done."""


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


def _alone_count(count: int) -> int:
    return count


def window(
    stream: BatchStream,
    *,
    warmup_steps: int,
    steps: int,
    sync: Callable[[], None],
    to_device: Callable[[Any], Any] = _identity,
    stock: int = 0,
    seconds: float | None = None,
    max_seconds: float | None = None,
    max_seconds_said: str | None = None,
    agree: Callable[[bool], bool] = _alone,
    largest: Callable[[int], int] = _alone_count,
    barrier: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
    mark: Callable[[str], None] = lambda region: None,
    count: Callable[[Any], int] = count_samples,
) -> Window:
    """The one timed loop, as a generator: the warmup, then the measured window, yielding
    every batch (on the device) to whoever runs the train step: the harness's own step
    (`timed_loop`) or a user's training loop (`harness.probe`). Both get the same rules.

    `stock`: batches the loader can hold ready (num_workers × prefetch_factor). `agree`
    turns this rank's "the stock is used up" into the ranks' common answer (all of them);
    `largest` turns this rank's delivery period into the ranks' largest (so that every rank
    measures as many steps). `seconds`: the window's least duration (None: `steps` decides).
    `max_seconds`: an auto window's most (steps: auto; None: a window of fixed length);
    `max_seconds_said`: where it came from, where not from the spec's measure.max_seconds
    (steady.most_said: a tune profile window's quarter of it), for the line when it stops there.
    `mark` is told "warmup", "measure" and "end" as the loop crosses those boundaries.
    `count` gives the samples of a batch (as it came from the loader)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1 (got {steps})")
    mark("warmup")
    warm = yield from _warm_up(stream, to_device, clock, count, warmup_steps, stock, agree)
    period = largest(_period(warm, stock))
    sync()
    barrier()
    mark("measure")
    record = Record(stream, to_device, clock, count)
    region_start = clock()
    yield from record.run(0 if max_seconds else steady.whole_periods(steps, period))
    rse = yield from _extend(record, period, (region_start, seconds, max_seconds), (agree, largest))
    sync()
    region_end = clock()
    mark("end")
    return _said(_times(warm, record, region_start, region_end), period, rse, (max_seconds, max_seconds_said))


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


def _said(
    times: LoopTimes, period: int, rse: float | None, most: tuple[float | None, str | None]
) -> LoopTimes:
    """The window's times with what a user must read about them: an auto window's standard
    error (and that it stopped at its most: `most` is its seconds and where they came from),
    a periodic delivery (and a window too short)."""
    max_seconds, said = most
    if max_seconds:
        times = replace(times, window_rse=rse, capped=steady.capped(rse, times.steps, max_seconds, said))
        if times.capped:
            log.warning("%s", times.capped)
    if period < 2:
        return times
    short = steady.too_short(times.steps, period, MIN_PERIODS)
    if short:
        log.warning("%s", short)
    return replace(times, delivery_period=period, too_short=short)


def _extend(
    record: Record,
    period: int,
    bounds: tuple[float, float | None, float | None],
    ranks: tuple[Callable[[bool], bool], Callable[[int], int]],
) -> Generator[Any, None, float | None]:
    """The window past its `steps`, `bounds` being (start, seconds, max_seconds) and `ranks`
    (agree, largest): an auto window until it is precise (`_until_precise`, which returns its
    standard error); with `seconds` alone, whole periods (at least CHUNK steps at a time) until
    it has lasted that long; else nothing more."""
    start, seconds, max_seconds = bounds
    agree, largest = ranks
    clock = record.clock
    if max_seconds:
        yield from record.run(steady.whole_periods(CHUNK, period))
        # The block's steps as these first steps foretell them (criterion.rs's warm-up estimate),
        # the ranks' largest: every rank's blocks end on the same steps.
        step_s = record.since(0, clock()) / len(record)
        block = largest(steady.block_steps(period, step_s))
        return (yield from _until_precise(record, block, (start, seconds or 0.0, max_seconds), agree))
    if seconds:
        chunk = steady.whole_periods(CHUNK, period)
        # Every rank asks the same number of times, so that the collective in `agree` pairs up.
        while not agree(clock() - start >= seconds):
            yield from record.run(chunk)
    return None


def _until_precise(
    record: Record,
    block: int,
    bounds: tuple[float, float, float],
    agree: Callable[[bool], bool],
) -> Generator[Any, None, float | None]:
    """An auto window in blocks of `block` steps: AUTO_MIN_BLOCKS, then one more at a time
    until it has lasted the least seconds and its rate's relative standard error is at most
    AUTO_RSE, or has lasted the most; `bounds` is (start, least seconds, most seconds).
    Returns the standard error. Under DDP the window ends when every rank may stop (`agree`,
    asked once a block by every rank, so that its collective pairs up): the ranks' windows
    end on the same step. A block lasts from its first step's start to the next block's (the
    clock at its end, for the latest): the harness's own work between steps included."""
    start, least_s, most_s = bounds
    yield from record.run(max(AUTO_MIN_BLOCKS * block - len(record), 0))
    durations: list[float] = []
    while True:
        now = record.clock()
        ends = len(record) // block
        durations += [record.span(k * block, (k + 1) * block) for k in range(len(durations), ends - 1)]
        durations.append(record.since((ends - 1) * block, now))
        elapsed = now - start
        rse = steady.block_rse(durations)
        precise = elapsed >= least_s and rse is not None and rse <= AUTO_RSE
        if agree(precise or elapsed >= most_s):
            return rse
        yield from record.run(block)


def _period(warm: Sequence[Clocked], stock: int) -> int:
    """Steps per period of the loader's delivery as the warmup's steady part shows it (its
    first step, the iterator's start, left out); 1 where it is not periodic. A period longer
    than the stock is no burst of the workers': left alone."""
    tail = [w for w in warm[1:] if not w.new_epoch][-_LOOKED_AT * max(stock, 1) :]
    pattern = steady.delivery([w.next_s for w in tail], [w.total_s for w in tail], stock)
    return pattern.period


def _times(warm: Sequence[Clocked], record: Record, start: float, end: float) -> LoopTimes:
    step_times = record.totals(end)
    first = warm[0].next_s if warm else record.next_s[0]
    return LoopTimes(
        first_step_loading_time=first,
        warmup_steps=len(warm),
        loading_times=tuple(n + c for n, c in zip(record.next_s, record.copy_s, strict=True)),
        next_times=tuple(record.next_s),
        step_times=tuple(step_times),
        samples=record.samples,
        training_time=end - start,
        epoch_restarts=len(record.restarts),
        epoch_restart_time=sum(step_times[i] for i in record.restarts),
    )


R = TypeVar("R")


def drive(batches: Generator[Any, None, R], train_step: Callable[[Any], None]) -> R:
    """Run `train_step` on every batch a generator yields (a `window`, a point's rungs) and
    return what it returns. A step that raises is thrown into the generator at its yield, so
    that the measurement around it records the failure (a failed row) and goes on."""
    try:
        batch = next(batches)
        while True:
            try:
                train_step(batch)
            except Exception as e:  # the generator decides what a failure is
                batch = batches.throw(e)
            else:
                batch = batches.send(None)
    except StopIteration as stop:
        return cast(R, stop.value)


def timed_loop(
    stream: BatchStream,
    train_step: Callable[[Any], None],
    **rules: Any,
) -> LoopTimes:
    """The harness's own train step through `window` (its keyword arguments are `rules`)."""
    return drive(window(stream, **rules), train_step)


def _warm_up(
    stream: BatchStream,
    to_device: Callable[[Any], Any],
    clock: Callable[[], float],
    count: Callable[[Any], int],
    warmup_steps: int,
    stock: int,
    agree: Callable[[bool], bool],
) -> Generator[Any, None, list[Clocked]]:
    """The spec's warmup, at least `stock` steps, then on until the stock is used up and the
    waits' pattern has settled (at most DRAIN_FACTOR × stock more)."""
    done: list[Clocked] = []
    for _ in range(max(warmup_steps, stock)):
        done.append((yield from one_step(stream, to_device, clock, count)))
    if stock == 0:
        return done
    ready = _stock_used_up(stream, done) and _settled(done, stock)
    for _ in range(DRAIN_FACTOR * stock):
        # Every rank asks the same number of times, so that the collective in `agree` pairs up.
        if agree(ready):
            break
        done.append((yield from one_step(stream, to_device, clock, count)))
        ready = _stock_used_up(stream, done) and _settled(done, stock)
    return done


def _settled(done: Sequence[Clocked], stock: int) -> bool:
    """The waits' pattern is known: none, every step alike, or a spacing that has repeated
    (steady.delivery); the iterator's first step is left out (its start-up)."""
    tail = [d for d in done[1:] if not d.new_epoch][-_LOOKED_AT * max(stock, 1) :]
    return steady.delivery([d.next_s for d in tail], [d.total_s for d in tail], stock).settled


def _stock_used_up(stream: BatchStream, done: Sequence[Clocked]) -> bool:
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
    min_seconds: float = 0.0,
    barrier: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Batches per second the loader delivers with no train step: its capacity.

    Every rank runs it at the same time (the barrier first), as the loaders of the ranks of a
    node share its cores during training. Then the stock is drained (with no step, it is handed
    over at once), so the time counts batches made while the clock runs: drained before the
    barrier, a rank's workers would refill it while the rank waits there, and hand it over
    free inside the timed region.

    At least `steps` batches, and on for at least `min_seconds` (the rung's window): a loader
    far faster than the step makes the window's steps in a few milliseconds, where one hiccup
    of a loaded machine would decide the figure.
    """
    barrier()
    for _ in range(stock + 1):
        stream.next()
    start = clock()
    made = 0
    while made < steps or clock() - start < min_seconds:
        stream.next()
        made += 1
    return made / (clock() - start)
