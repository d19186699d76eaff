"""Standalone mode (`python train.py`, no harness): the script's own loader, one pass or
`epochs` of them (at most `steps` batches), each step timed as the Jean Zay course's
chronometer does (`next()` plus the copy), and one line at exit (`summary`)."""

from __future__ import annotations

import atexit
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any

import torch

from harness.execution.step_times import Clocked, one_step
from harness.probe import session
from harness.sources.length import length


class _Exhausted(Exception):
    """The user's loader has no batch left in this pass."""


class _Pass:
    """The user's iterable as the one chronometer (`step_times.one_step`) reads it."""

    def __init__(self, source: Iterable[Any]) -> None:
        self.source: Iterable[Any] = source
        self.iterator: Iterator[Any] | None = None
        self.epoch = 0
        """1 once the pass has started: the chronometer marks the step that started it."""

    def next(self) -> Any:
        if self.iterator is None:
            self.iterator, self.epoch = iter(self.source), 1
        try:
            return next(self.iterator)
        except StopIteration:
            raise _Exhausted from None

    def close(self) -> None:
        self.iterator = None


def passes(
    source: Iterable[Any],
    device: torch.device,
    epochs: int,
    steps: int | None,
    copy: Callable[[Any], Any],
    count: Callable[[Any], int],
) -> Generator[Any, None, None]:
    if not _seen:  # the first pass of this process: its line is printed once, at exit
        atexit.register(_print_summary)
    taken = 0
    try:
        for _ in range(epochs):
            stream = _Pass(source)
            while steps is None or taken < steps:
                try:
                    _seen.append((yield from one_step(stream, copy, session.clock, count)))
                except _Exhausted:
                    break
                taken += 1
    finally:
        session.sync(device)


def passes_length(source: Any, epochs: int, steps: int | None) -> int | None:
    """The batches `passes` yields: `epochs` passes of len(source), at most `steps` in all."""
    per_pass = length(source)
    if per_pass is None:
        return None
    return per_pass * epochs if steps is None else min(steps, per_pass * epochs)


_seen: list[Clocked] = []
"""Every step the probe timed in this process, alone (all passes, all measure calls)."""


def _print_summary() -> None:
    print(summary(_seen), file=sys.stderr)


def summary(clocked: Sequence[Clocked]) -> str:
    """One line: steps, samples/s in the loop and the course's loading_time (next() plus the
    copy) as a share of a step. Each pass's first step (the iterator and its workers starting)
    is shown on its own, not in the means."""
    if not clocked:
        return "harness.probe: no batch"
    body = [c for c in clocked if not c.new_epoch] or list(clocked)
    firsts = [c.next_s for c in clocked if c.new_epoch]
    step = sum(c.total_s for c in body) / len(body)
    loading = sum(c.next_s + c.copy_s for c in body) / len(body)
    samples = sum(c.samples for c in clocked)
    looped = sum(c.total_s for c in clocked)
    return (
        f"harness.probe: {len(clocked)} steps, {samples} samples in {looped:.1f} s "
        f"({samples / looped:.1f} samples/s); loading_time {loading:.4f} s/step "
        f"(next() + copy, {loading / step:.0%} of a step); first batch of a pass "
        f"{max(firsts, default=0.0):.2f} s"
    )
