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
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import Any, TypeVar, cast

from harness.execution import steady, warmup
from harness.execution.batches import count_samples
from harness.execution.step_times import BatchStream, Clocked, LoopTimes, Record
from harness_schema.settings import AUTO_BLOCK_STEPS, AUTO_MIN_BLOCKS, AUTO_RSE, MIN_PERIODS

log = logging.getLogger(__name__)

CHUNK = AUTO_BLOCK_STEPS
"""With measure.seconds, the window grows by at least this many steps at a time (whole
periods): under DDP each growth is a collective, which a per-step check would pay every step."""


def _identity(batch: Any) -> Any:
    return batch


def _alone(flag: bool) -> bool:
    return flag


Window = Generator[Any, None, "LoopTimes"]
"""A measured rung as its consumer sees it: it yields each batch, on the device, for the
train step to run on, and returns the LoopTimes when the window is done."""


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
    warm = yield from warmup.warm_up(stream, to_device, clock, count, warmup_steps, stock, agree)
    period = largest(warmup.delivery_period(warm, stock))
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
