"""Workers in step, through a window of ordinary length: does it read the steady rate?

    .venv/bin/python benchmarks/window_bursts.py

Workers of equal per-batch cost that start together stay in step, and their batches arrive
in bursts of num_workers once per worker period; a step faster than the loader takes a burst,
then waits for the next (issue 30: 0.80 of a 400-step run's rate through a 20-step window).
Here each worker makes a batch of 4 samples in 4 × 20 ms (sleeps), the step sleeps 2 ms, the
spec's warmup is 2 steps, its window 20 steps; the truth is a 400-step window. samples/s of
the short window over the long one's, median of ROUNDS, for 6 and 8 workers:

- before: the rule before issue 30 (the warmup until the stock is used up, then `steps`
  steps, whatever the phase of the bursts they cover);
- after: the warmup goes on until the waits' spacing repeats, and the window is rounded up
  to whole periods of the delivery (harness/execution/steady.py);
- auto: `measure.steps: auto` with `seconds: 1`: blocks of whole periods until the window has
  lasted a second and its rate's relative standard error is at most 2 % (max_seconds 20).

1.00 is the truth. Costs are sleeps, so the figures hold on a loaded machine. About 3 min.
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from harness.execution import dataloader, ladder, warmup
from harness.execution.loop import timed_loop
from harness.execution.step_times import LoopTimes
from harness_schema.settings import LoaderSettings
from tests.fixtures.workloads import slow_read

CPU = dataloader.Placement(device=torch.device("cpu"))
READ_S, STEP_S, BATCH = 0.02, 0.002, 4
SHORT, LONG, WARMUP, ROUNDS = 20, 400, 2, 3


@contextmanager
def before() -> Iterator[None]:
    """The window as it was: no period read off the waits, so no rounding and no wait for the
    pattern to repeat."""
    period, settled = warmup.delivery_period, warmup._settled
    warmup.delivery_period = lambda warm, stock: 1  # type: ignore[assignment]
    warmup._settled = lambda done, stock: True  # type: ignore[assignment]
    try:
        yield
    finally:
        warmup.delivery_period, warmup._settled = period, settled  # type: ignore[assignment]


def run(workers: int, steps: int, auto: bool = False) -> LoopTimes:
    loader = LoaderSettings(num_workers=workers, prefetch_factor=2)
    stream = ladder.build_stream("full", slow_read(100_000, READ_S), loader, BATCH, CPU)
    try:
        return timed_loop(
            stream,
            lambda batch: time.sleep(STEP_S),
            warmup_steps=WARMUP,
            steps=steps,
            seconds=1.0 if auto else None,
            max_seconds=20.0 if auto else None,
            stock=stream.stock,
            sync=lambda: None,
        )
    finally:
        stream.close()


def rate(times: LoopTimes) -> float:
    return times.samples / times.training_time


def ratios(workers: int, long: float, auto: bool = False) -> tuple[float, list[float], list[LoopTimes]]:
    shorts = [run(workers, SHORT, auto) for _ in range(ROUNDS)]
    found = [rate(s) / long for s in shorts]
    return statistics.median(found), found, shorts


def main() -> None:
    logging.basicConfig(level=logging.ERROR)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    print(__doc__.split("\n\n", 2)[2].rsplit("\n\n", 1)[0])
    print()
    started = time.perf_counter()
    for workers in (6, 8):
        long = rate(run(workers, LONG))
        print(f"{workers} workers: long window {LONG} steps, {long:.0f} samples/s")
        with before():
            median, found, shorts = ratios(workers, long)
        print(
            f"    before: short/long = {median:.2f} (rounds {', '.join(f'{r:.2f}' for r in found)}; "
            f"windows of {', '.join(str(s.steps) for s in shorts)} steps)"
        )
        median, found, shorts = ratios(workers, long)
        periods = ", ".join(str(s.delivery_period) for s in shorts)
        print(
            f"    after:  short/long = {median:.2f} (rounds {', '.join(f'{r:.2f}' for r in found)}; "
            f"windows of {', '.join(str(s.steps) for s in shorts)} steps; periods {periods})"
        )
        median, found, autos = ratios(workers, long, auto=True)
        print(
            f"    auto:   short/long = {median:.2f} (rounds {', '.join(f'{r:.2f}' for r in found)}; "
            f"windows of {', '.join(str(s.steps) for s in autos)} steps, "
            f"{', '.join(f'{s.training_time:.1f}' for s in autos)} s; relative standard error "
            f"{', '.join(f'{s.window_rse:.1%}' for s in autos if s.window_rse is not None)})"
        )
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
