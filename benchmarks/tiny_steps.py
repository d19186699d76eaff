"""Steps of a few microseconds through the timed window: do auto windows settle, and what does
the window's own bookkeeping cost a step? Before and after, in one run.

    .venv/bin/python benchmarks/tiny_steps.py

Two loops whose step is next to nothing, as a script's loop under `harness.probe` that does
nothing with its batches, or a cached rung (device_batch) with a trivial train step:

- cached: the same batch at every step (ladder.RepeatStream), the step does nothing;
- loader: a DataLoader without workers over tensors in memory (a batch of 4), the step
  does nothing (a fetch of ~10-20 us).

Each through an auto window (`measure.steps: auto`, seconds 1, max_seconds MAX_S), ROUNDS
times, by:

- before: the window as it was: an object per measured step in a growing list, the auto
  window's blocks summed from the steps' own times (next() to the step's end: the harness's
  work between steps left out);
- after: harness/execution/loop.py's Record: flat arrays of doubles, the steps' times from
  one step's start to the next (they tile the window), the blocks timed between their edges.

Printed per round: the window's length and steps, its relative standard error (2 % stops it),
the scatter of its batches (the blocks as the rule merged them, at least 0.1 s each: their
standard deviation over their mean), the garbage collector's passes inside the window and
their longest pause, and the window's time per step over the same loop's without the harness
(fetch, step) as a ratio, with the scatter of that bare loop's own 0.1 s blocks: the machine's,
which no window removes. Steps are CPU work: the figures move with the machine's load.
About a minute and a half.
"""

from __future__ import annotations

import gc
import logging
import math
import statistics
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch.utils.data import DataLoader, TensorDataset

from harness.execution import ladder, loop, steady
from harness.execution.loop import drive
from harness.execution.step_times import Clocked, LoopTimes, one_step
from harness_schema.settings import AUTO_MIN_BLOCKS, AUTO_RSE

SECONDS, MAX_S, ROUNDS = 1.0, 6.0, 2
CPU = torch.device("cpu")


def nothing(batch: Any) -> None:
    pass


class Looped:
    """A DataLoader without workers, epoch after epoch (as the window reads a loader)."""

    epoch = 0

    def __init__(self) -> None:
        data = TensorDataset(torch.zeros(4096, 3), torch.zeros(4096))
        self.loader = DataLoader(data, batch_size=4)
        self.it = iter(self.loader)

    def next(self) -> Any:
        try:
            return next(self.it)
        except StopIteration:
            self.it, self.epoch = iter(self.loader), self.epoch + 1
            return next(self.it)

    def close(self) -> None:
        pass


def cached() -> ladder.RepeatStream:
    return ladder.RepeatStream((torch.zeros(4, 3), torch.zeros(4)))


# --- before: the measured window as it was (an object per step; blocks from in-step times) ---


def before_window(stream: Any, clock: Callable[[], float] = time.perf_counter) -> Generator[Any, None, Any]:
    """The old measured window of an auto window, its warmup left out (the stream is warm):
    `step_times.one_step` per step into a list of Clocked, blocks summed from their `total_s`."""
    step = lambda: one_step(stream, loop._identity, clock, loop.count_samples)  # noqa: E731
    start = clock()
    measured: list[Clocked] = []
    for _ in range(loop.CHUNK):
        measured.append((yield from step()))
    block = steady.block_steps(1, statistics.fmean(m.total_s for m in measured))
    while len(measured) < AUTO_MIN_BLOCKS * block:
        measured.append((yield from step()))
    durations = [sum(m.total_s for m in measured[k : k + block]) for k in range(0, len(measured), block)]
    while True:
        elapsed = clock() - start
        rse = steady.block_rse(durations)
        if (elapsed >= SECONDS and rse is not None and rse <= AUTO_RSE) or elapsed >= MAX_S:
            return len(measured), clock() - start, rse, durations
        for _ in range(block):
            measured.append((yield from step()))
        durations.append(sum(m.total_s for m in measured[-block:]))


def after_window(stream: Any) -> Generator[Any, None, Any]:
    """The window as it is now, its durations seen through steady.block_rse."""
    seen: list[list[float]] = [[]]
    rse_of = steady.block_rse

    def spy(durations: Any) -> float | None:
        seen[0] = list(durations)
        return rse_of(durations)

    steady.block_rse = spy
    try:
        times: LoopTimes = yield from loop.window(
            stream, warmup_steps=0, steps=40, seconds=SECONDS, max_seconds=MAX_S, sync=lambda: None
        )
    finally:
        steady.block_rse = rse_of
    return times.steps, times.training_time, times.window_rse, seen[0]


# --- the figures -------------------------------------------------------------------------------


def batch_scatter(durations: list[float]) -> float:
    """The scatter of the batches steady.block_rse judged (blocks merged to at least 0.1 s)."""
    merged = max(math.ceil(0.1 / max(statistics.fmean(durations), 1e-12)), math.ceil(len(durations) / 30))
    batches = [sum(durations[k * merged : (k + 1) * merged]) for k in range(len(durations) // merged)]
    return statistics.stdev(batches) / statistics.fmean(batches) if len(batches) > 1 else math.nan


def bare(stream: Any, blocks: int = 10) -> tuple[float, float]:
    """The loop without the harness (fetch, step) in blocks of 0.1 s: seconds per step, and
    the scatter of its blocks' rates (the machine's own, which no window removes)."""
    fetch, per_step = stream.next, []
    for _ in range(blocks):
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < 0.1:
            for _ in range(100):
                nothing(fetch())
            n += 100
        per_step.append((time.perf_counter() - start) / n)
    return statistics.median(per_step), statistics.stdev(per_step) / statistics.fmean(per_step)


def one(kind: str, how: str, make: Callable[[], Any]) -> str:
    stream = make()
    for _ in range(2000):  # warm: allocator, first batches
        stream.next()
    empty, floor = bare(stream)
    pauses: list[float] = []

    def timed_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            timed_gc.t = time.perf_counter()  # type: ignore[attr-defined]
        else:
            pauses.append(time.perf_counter() - timed_gc.t)  # type: ignore[attr-defined]

    gc.callbacks.append(timed_gc)
    try:
        window = before_window if how == "before" else after_window
        steps, took, rse, durations = drive(window(stream), nothing)
    finally:
        gc.callbacks.remove(timed_gc)
    shown_rse = "unknown" if rse is None else f"{rse:.1%}"
    stopped = "at its most" if took >= MAX_S else "precise"
    return (
        f"{kind:7s}{how:7s} {took:4.1f} s {stopped:11s} {steps:>9,} steps, rse {shown_rse:>7s}, "
        f"batches scatter {batch_scatter(durations):6.1%}; gc {len(pauses):4d} passes, longest "
        f"{max(pauses, default=0.0) * 1e3:5.1f} ms; per step {took / steps * 1e6:5.2f} us = "
        f"{took / steps / empty:5.1f}x the bare loop's {empty * 1e6:.2f} us (its 0.1 s blocks "
        f"scatter {floor:.1%})"
    )


def main() -> None:
    logging.basicConfig(level=logging.ERROR)
    torch.set_num_threads(1)
    print(__doc__.split("\n\n", 2)[2].rsplit("\n\n", 1)[0])
    print()
    started = time.perf_counter()
    for kind, make in (("cached", cached), ("loader", Looped)):
        for _ in range(ROUNDS):
            for how in ("before", "after"):
                print(one(kind, how, make), flush=True)
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
