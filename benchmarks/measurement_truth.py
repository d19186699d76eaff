"""Does the timed window tell the truth? Two figures, on the CPU, with the emulated accelerator.

    .venv/bin/python benchmarks/measurement_truth.py

(a) Short window against long window, loader-bound: 8 workers × prefetch 2 (a stock of 16
    batches) deliver half of what a 20 ms step asks for, and the first step is slow (0.5 s, as
    a GPU job's first step is), so the workers fill their stock meanwhile. samples/s of a
    20-step window over that of a 200-step one: with the rule of harness/execution/loop.py
    (the warmup uses the stock up) and with the old one (1 warmup step, stock ignored). 1.00 is
    the truth; above 1 the short window is flattered by batches made before it started.
(b) The caching ladder on a staged workload (read 10 ms + transform 5 ms per sample, batches
    of 4, 2 workers) against a 20 ms emulated step: each rung's loader capacity (batches/s
    with no train step) next to the step's demand (device_batch steps/s), and the verdict of
    analysis.ladder.verdict, from run_point on a tiny sweep in a temporary folder.

Costs are sleeps (no CPU core needed), so the figures hold on a loaded machine. About 1.5 min.
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch.utils.data import Dataset

from analysis.ladder.verdict import ladder_verdicts
from analysis.ladder.verdict_text import render_verdict
from analysis.load import load_results
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import dataloader, ladder
from harness.execution.dist import DistEnv
from harness.execution.loop import timed_loop
from harness.execution.runner import run_point
from harness.execution.step_times import LoopTimes
from harness.execution.train_step import TrainStep
from harness.storage.sweep import create_sweep
from harness.workloads.emulated import emulated
from harness_schema.settings import LoaderSettings
from tests.fixtures.workloads import AddOne, Sleep, StagedDataset, ToTensor

CPU = dataloader.Placement(device=torch.device("cpu"))
STEP_MS = 20.0
SHORT, LONG, ROUNDS = 20, 200, 3


def staged(size: int = 256, read_ms: float = 10.0, transform_ms: float = 5.0) -> Dataset[Any]:
    """A pipeline with a known cost per stage (loaded by run_point as a user's factory)."""
    return StagedDataset(size, 8, read_ms / 1000, [ToTensor(), Sleep(transform_ms / 1000), AddOne()])


def _window(steps: int, *, drain: bool) -> LoopTimes:
    model = emulated(num_classes=10, step_ms=STEP_MS)
    step = TrainStep(model, torch.device("cpu"), non_blocking=False)
    first = [True]

    def train(batch: Any) -> None:
        if first[0]:
            first[0] = False
            time.sleep(0.5)  # the first step of a GPU job: context, autotuning, compilation
        step.compute(batch)

    # 8 workers, batches of 4 at 80 ms a sample: one batch per 40 ms, half the demand.
    loader = LoaderSettings(num_workers=8, prefetch_factor=2)
    stream = ladder.build_stream("full", staged(4096, read_ms=80, transform_ms=0), loader, 4, CPU)
    try:
        stock = stream.stock if drain else 0
        return timed_loop(stream, train, warmup_steps=1, steps=steps, stock=stock, sync=lambda: None)
    finally:
        stream.close()


def _rate(times: LoopTimes) -> float:
    return times.samples / times.training_time


def window_ratios() -> None:
    long = _window(LONG, drain=True)
    print(f"(a) long window: {LONG} steps, {_rate(long):.1f} samples/s, warmup {long.warmup_steps} steps")
    for name, drain in (("new rule (stock used up)", True), ("old rule (stock ignored)", False)):
        shorts = [_window(SHORT, drain=drain) for _ in range(ROUNDS)]
        ratios = [_rate(s) / _rate(long) for s in shorts]
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        steady = ", ".join(str(s.steady) for s in shorts)
        warm = ", ".join(str(s.warmup_steps) for s in shorts)
        print(
            f"    {name}: short/long = {statistics.median(ratios):.2f} (median; rounds {shown}); "
            f"warmup steps {warm}; window_steady {steady}"
        )


LADDER_SPEC = f"""\
    name: truth
    workload:
      dataset: benchmarks.measurement_truth:staged
      dataset_args: {{size: 256, read_ms: 10, transform_ms: 5}}
      model: emulated
      model_args: {{step_ms: {STEP_MS}}}
      batch_size: 4
      device: cpu
    loader: {{num_workers: 2, prefetch_factor: 2, persistent_workers: true}}
    measure: {{warmup_steps: 2, steps: 20, repeats: 3}}
    rungs: [device_batch, processed_sample, raw_sample, full]
    """


def ladder_verdict() -> None:
    plan = expand(parse_spec(textwrap.dedent(LADDER_SPEC)))
    with tempfile.TemporaryDirectory() as tmp:
        sweep = create_sweep(plan, Path(tmp), backend="inline")
        for point in plan.points:
            run_point(point, sweep, env=DistEnv(hostname="cpu"))
        rows = load_results([sweep]).rows
    ok = rows[rows["status"] == "ok"]
    demand = statistics.median(ok[ok["rung"] == "device_batch"]["steps_per_s"])
    print(f"(b) emulated step {STEP_MS:.0f} ms: demand {demand:.1f} batches/s (device_batch steps/s)")
    for rung in ("processed_sample", "raw_sample", "full"):
        of = ok[ok["rung"] == rung]
        capacity = statistics.median(of["loader_capacity"])
        print(
            f"    {rung:17s} loader capacity {capacity:6.1f} batches/s "
            f"({capacity / demand:.2f} × demand), steps/s {statistics.median(of['steps_per_s']):.1f}"
        )
    for verdict in ladder_verdicts(rows):
        print(textwrap.indent(render_verdict(verdict), "    "))


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The emulated step stands for a GPU's: its host side must be nearly free. Two intra-op
    # threads on two busy cores make the train step's cross-entropy spin ~15 ms per step.
    torch.set_num_threads(1)
    # 8 workers on a 2-core machine is the point of (a): PyTorch's advice against it is noise here.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    print(__doc__.split("\n\n", 2)[2].rsplit("\n\n", 1)[0])
    print()
    started = time.perf_counter()
    window_ratios()
    ladder_verdict()
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
