"""The loader's steady state, read off the per-step waits: is its delivery periodic, and how
many steps is one period?

Workers of equal per-batch cost that start together stay in step: each is always busy (it
holds prefetch_factor requests), so all of them finish a batch at the same moments and the
batches arrive in bursts of num_workers, once per worker period. A step faster than the
loader takes a burst in num_workers quick steps, then waits for the next: one step in every
num_workers waits, the others do not. A window that covers a period and a half then reads
the phase it happens to cover (a burst more or a wait more): 0.80 to 1.04 of the steady rate
in issue 30, with nothing unsteady between its halves. A window of whole periods reads the
steady rate from any phase, since every period of the pattern lasts the same.

An auto window (`measure.steps: auto`) is measured in blocks of whole periods (each at least
AUTO_BLOCK_S long, as its first steps foretell: criterion.rs and pyperf size their samples
the same way), and stops once
it has lasted `measure.seconds` and the blocks' durations say its step rate to AUTO_RSE (batch
means, as pyperf and criterion.rs judge their samples), or at `measure.max_seconds`, said.

Torch-free and pure: `harness/execution/loop.py` and `warmup.py` ask it about the steps they timed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from harness_schema.settings import (
    AUTO_BLOCK_S,
    AUTO_BLOCK_STEPS,
    AUTO_MAX_BATCHES,
    AUTO_MIN_BLOCKS,
    AUTO_RSE,
)

WAITED = 0.05
"""A next() longer than this fraction of the median step may be a wait (loop.py's rule)."""
FETCH_FACTOR = 3.0
"""... and longer than this many typical fetches (a ready batch still costs its IPC)."""
BURST_SHARE = 0.25
"""... and at least this share of the longest wait seen: in a burst, the batches after the
first arrive a few milliseconds apart on a busy machine (measured: 1-6 ms after a 56 ms wait),
which is not the wait between bursts."""
REPEATS = 2
"""Periods seen after the first before a pattern is called periodic (and more waits than
this among them): one match is a coincidence."""
ALIKE = 0.25
"""Most the waits of a period may differ from those of the next, as a share of their sum: a
wait that crosses the line between a wait and a ready batch (12 ms in one period, 20 in the
next) weighs as little as it lasts, where counting waits would make it a broken pattern."""
SMOOTH = 0.8
"""Share of steps that wait beyond which the delivery is smooth (every step waits alike)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """What the waits of a stretch of steps say about the loader's delivery."""

    kind: str
    """"keeps up" (no step waited), "smooth" (nearly every step waits), "periodic" (the waits
    recur every `period` steps: bursts), "irregular" (no period up to the longest looked for),
    or "unsettled" (too few steps yet to tell)."""
    period: int = 1
    """Steps per period: the burst's size (num_workers for workers in step); 1 unless periodic."""

    @property
    def settled(self) -> bool:
        """The pattern is known (or there is none to wait for): the warmup may end."""
        return self.kind != "unsettled"


def waits(next_s: Sequence[float], total_s: Sequence[float]) -> list[bool]:
    """Per step: did its next() wait for a batch (see WAITED, FETCH_FACTOR, BURST_SHARE)?"""
    if not next_s:
        return []
    typical_step = statistics.median(total_s)
    fetches = sorted(next_s)
    typical_fetch = fetches[len(fetches) // 4]  # the lower quartile: a ready batch's cost
    floor = max(WAITED * typical_step, FETCH_FACTOR * typical_fetch, BURST_SHARE * fetches[-1])
    return [s > floor for s in next_s]


def delivery(next_s: Sequence[float], total_s: Sequence[float], longest: int) -> Delivery:
    """The delivery pattern of these steps (the steady part of a warmup): the shortest period
    of at most `longest` steps (the loader's stock) with which the waits recur."""
    if next_s and sorted(next_s)[len(next_s) // 4] > 0.5 * statistics.median(total_s):
        return Delivery("smooth")  # three steps in four wait most of their time: no burst
    waited = waits(next_s, total_s)
    count = sum(waited)
    if count == 0:
        return Delivery("keeps up")
    if count >= SMOOTH * len(waited):
        return Delivery("smooth")
    for period in range(2, min(longest, len(waited) // (REPEATS + 1)) + 1):
        # The latest periods only (the warmup's first ones still show the workers' start), or
        # those just before them (a hiccup in the last period does not undo the pattern).
        span = (REPEATS + 1) * period
        for end in (len(waited), len(waited) - period):
            stretch = slice(max(end - span, 0), end)
            if end >= span and sum(waited[stretch]) > REPEATS and _alike(next_s[stretch], period):
                return Delivery("periodic", period)
    if len(waited) >= (REPEATS + 1) * longest:
        return Delivery("irregular")
    return Delivery("unsettled")


def _alike(next_s: Sequence[float], period: int) -> bool:
    """Does each step wait about as long as the step `period` earlier (ALIKE)? A burst that
    arrives in two parts (a long wait, then a shorter one halfway) is not two periods."""
    pairs = list(zip(next_s, next_s[period:], strict=False))
    total = sum(a + b for a, b in pairs)
    return total > 0 and sum(abs(a - b) for a, b in pairs) <= ALIKE * total


def whole_periods(steps: int, period: int) -> int:
    """`steps` rounded up to a whole number of periods."""
    if period < 2:
        return steps
    return -(-steps // period) * period


def too_short(steps: int, period: int | None, min_periods: int) -> str | None:
    """The one line a user reads when a window covers fewer than `min_periods` periods of a
    periodic delivery, naming the setting that fixes it; None when the window is long enough."""
    if period is None or period < 2 or steps >= min_periods * period:
        return None
    return (
        f"the window of {steps} steps covers {steps // period} period(s) of the loader's delivery "
        f"(bursts of {period} batches, a wait every {period} steps): too short to read its steady "
        f"rate; set measure.steps: {min_periods * period} or more, or measure.seconds"
    )


def block_steps(period: int, step_s: float | None = None) -> int:
    """Steps in a block of an auto window (steps: auto), where a step takes about `step_s`: at
    least AUTO_BLOCK_STEPS and AUTO_BLOCK_S, in whole periods, so that every block lasts the
    same whatever the bursts' phase, and the blocks' durations scatter as the loader's rate
    does, not as the clock's hiccups."""
    least = AUTO_BLOCK_STEPS
    if step_s is not None and step_s > 0:
        least = max(least, math.ceil(AUTO_BLOCK_S / step_s))
    return whole_periods(least, period)


def auto_least(period: int) -> int:
    """The fewest steps an auto window measures: AUTO_MIN_BLOCKS blocks of the fewest steps
    (a step of AUTO_BLOCK_S or longer)."""
    return AUTO_MIN_BLOCKS * block_steps(period)


def block_rse(durations: Sequence[float]) -> float | None:
    """The relative standard error of the window's step rate from batch means over its blocks'
    `durations` (each of the same steps, whole periods): their standard deviation over the
    square root of their count, over their mean. Blocks of whole periods cancel the bursts
    within a period, and blocks that last at least AUTO_BLOCK_S (neighbours merged where the
    window's first steps foretold them shorter) the clock's hiccups; past AUTO_MAX_BATCHES
    blocks, neighbours are merged too (a fixed number of batches), so that a batch outlasts
    the loader's slow drifts: what scatters between them is the rate itself (the delta
    method: the rate's relative error is the duration's).
    None under AUTO_MIN_BLOCKS of them."""
    if not durations:
        return None
    merged = max(
        math.ceil(AUTO_BLOCK_S / max(statistics.fmean(durations), 1e-12)),
        math.ceil(len(durations) / AUTO_MAX_BATCHES),
    )
    count = len(durations) // merged
    if count < AUTO_MIN_BLOCKS:
        return None
    batches = [sum(durations[k * merged : (k + 1) * merged]) for k in range(count)]
    mean = statistics.fmean(batches)
    return statistics.stdev(batches) / math.sqrt(count) / mean if mean > 0 else None


def capped(rse: float | None, steps: int, max_seconds: float, said: str | None = None) -> str | None:
    """The one line a user reads when an auto window stopped at its most before its step rate
    was known to AUTO_RSE; None when it was. `said`: where the most came from where it is not
    the spec's measure.max_seconds (the point's adjustment that changed it, `most_said`: a
    tune profile window's quarter of it), so that the line names the limit the window had."""
    if rse is not None and rse <= AUTO_RSE:
        return None
    shown = "unknown" if rse is None else f"{rse:.1%}"
    where = (
        f"measure.max_seconds ({max_seconds:g} s, {steps} steps)"
        if said is None
        else f"its most, {said}, after {steps} steps,"
    )
    return (
        f"the auto window stopped at {where} with its "
        f"step rate's relative standard error at {shown}, above the {AUTO_RSE:.0%} it aims for: the "
        "rate varies between blocks of the window (a noisy loader or a busy machine); raise "
        "measure.max_seconds, or compare with more repeats"
    )


MOST = "measure.max_seconds"


def most_said(adjustments: Sequence[str]) -> str | None:
    """A point's adjustment of its auto window's most (one that starts with MOST and a space:
    `harness tune`'s profile windows run a quarter of the spec's, harness/tune/rounds.py), or
    None where the point keeps the spec's measure.max_seconds."""
    return next((a for a in adjustments if a.startswith(f"{MOST} ")), None)
