"""The warmup: the spec's steps, at least the loader's stock, then on until the stock is used up
and the waits' pattern has settled, so that the window starts on the loader's steady state
(loop.py's docstring says why: no stock in the window, whole periods of the delivery).

A concept apart from the window's own length (loop.py) and from the timing of a step
(step_times.py): when the loader is steady enough to measure, read from the warmup's steps.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Generator, Sequence
from typing import Any

from harness.execution import steady
from harness.execution.step_times import BatchStream, Clocked, one_step
from harness_schema.settings import DRAIN_FACTOR

WAITED = 0.05
"""A next() longer than this fraction of the median step so far means the queue was empty."""
_LOOKED_AT = steady.REPEATS + 2
"""The warmup's latest steps the delivery is read from, in stocks: the longest period looked
for is the stock, over REPEATS + 1 periods and one more (a hiccup in the last)."""


def delivery_period(warm: Sequence[Clocked], stock: int) -> int:
    """Steps per period of the loader's delivery as the warmup's steady part shows it (its
    first step, the iterator's start, left out); 1 where it is not periodic. A period longer
    than the stock is no burst of the workers': left alone."""
    tail = [w for w in warm[1:] if not w.new_epoch][-_LOOKED_AT * max(stock, 1) :]
    pattern = steady.delivery([w.next_s for w in tail], [w.total_s for w in tail], stock)
    return pattern.period


def warm_up(
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
