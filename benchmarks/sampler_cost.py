"""What the samplers cost the training loop: throughput with both samplers at 10 Hz against both off.

    .venv/bin/python benchmarks/sampler_cost.py [--spec jobs/quickstart.yaml] [--rounds 8] [--steps 12]

Builds the quick start's point with num_workers=2 (persistent_workers false: workers start and
exit at every epoch, the case the host sampler works hardest for) as the runner does, then runs
its `full` rung `--rounds` times with the samplers on and off, interleaved in this one process
(on/off, then off/on, ...) so that drift in the machine's speed hits both alike. Prints each
round's throughputs and ratio, the median ratio and the ratio of the totals; the goal is a
ratio >= 0.99. Also the cost of one host sample, with and without reading PSS, workers alive.
No assertions: it measures. About a minute on a 2-core VM.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch.utils.data import Dataset

from harness import ladder
from harness.loop import LoopTimes, timed_loop
from harness.plan import Point, expand
from harness.sampling.host import DEFAULT_MEMORY_INTERVAL_S, MEMORY_CPU_BUDGET, HostSampler
from harness.sampling.timeline import RankSampler
from harness.spec import load_spec
from harness.train_step import TrainStep, choose_device, device_sync
from harness.workloads.build import build_dataset, build_model

ROOT = Path(__file__).resolve().parents[1]


def pick_point(spec_path: Path) -> Point:
    plan = expand(load_spec(spec_path))
    for point in plan.points:
        if point.loader.num_workers == 2 and not point.loader.persistent_workers:
            return point
    raise SystemExit(f"{spec_path}: no point with num_workers 2 and persistent_workers false")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "jobs" / "quickstart.yaml")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=12, help="measured steps per run")
    parser.add_argument("--hz", type=float, default=10.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    point = pick_point(args.spec)
    point = replace(point, measure=replace(point.measure, steps=args.steps))
    device = choose_device(point.workload.device)
    dataset = build_dataset(point.workload)
    model = build_model(point.workload, int(getattr(dataset, "num_classes", 10)))
    step = TrainStep(
        model,
        device,
        non_blocking=point.loader.non_blocking,
        amp=point.workload.amp,
        compile=point.workload.compile,
    )
    where = ladder.Placement(device=device)
    batch = point.workload.batch_size
    print(
        f"point {point.id}: {point.workload.dataset} {point.workload.model}, batch {batch}, "
        f"num_workers {point.loader.num_workers}, persistent_workers {point.loader.persistent_workers}, "
        f"device {device}; {point.measure.warmup_steps} warmup + {args.steps} measured steps per run, "
        f"samplers at {args.hz:g} Hz"
    )

    thread_share: list[float] = []

    def run(sampled: bool) -> float:
        """One run of the rung; samples per second."""
        stream = ladder.build_stream("full", dataset, point.loader, batch, where)
        sampler = RankSampler(hz=args.hz, host=True, gpu=True, device=device) if sampled else None
        try:
            if sampler is not None:
                started = time.perf_counter()
                sampler.start()
                with sampler.phase("full/0"):
                    times = _loop(stream, step, point, device)
                sampler.stop()
                thread_share.append(sampler.thread_cpu_s / (time.perf_counter() - started))
            else:
                times = _loop(stream, step, point, device)
        finally:
            stream.close()
        return times.steps * batch / times.training_time

    run(False)  # burn-in: allocator, first forks, caches
    on_all: list[float] = []
    off_all: list[float] = []
    print(f"\n{'round':>5}  {'order':>7}  {'on (samples/s)':>14}  {'off (samples/s)':>15}  {'on/off':>7}")
    started = time.perf_counter()
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        figures = {sampled: run(sampled) for sampled in order}
        on_all.append(figures[True])
        off_all.append(figures[False])
        label = "on,off" if order[0] else "off,on"
        on, off = figures[True], figures[False]
        print(f"{r:>5}  {label:>7}  {on:>14.2f}  {off:>15.2f}  {on / off:>7.4f}")
    ratios = [a / b for a, b in zip(on_all, off_all, strict=True)]
    print(
        f"\nthroughput on/off: median of rounds {statistics.median(ratios):.4f}, "
        f"ratio of the means {statistics.fmean(on_all) / statistics.fmean(off_all):.4f} "
        f"(rounds from {min(ratios):.4f} to {max(ratios):.4f}); goal >= 0.99"
    )
    # Unlike throughput, this does not move when another job shares the machine. The thread holds
    # the GIL for at most its CPU time, so it cannot slow the loop by more than that share.
    print(
        f"sampling thread CPU: {100 * statistics.fmean(thread_share):.2f} % of one core "
        f"(runs from {100 * min(thread_share):.2f} to {100 * max(thread_share):.2f} %)"
    )
    bound = 1 - statistics.fmean(thread_share)
    print(f"so at worst (every cycle of it on the critical path) on/off >= {bound:.4f}")
    print(f"({time.perf_counter() - started:.0f} s of runs)")
    _sample_costs(dataset, point, where)


def _loop(
    stream: ladder.LoaderStream | ladder.RepeatStream, step: TrainStep, point: Point, device: torch.device
) -> LoopTimes:
    return timed_loop(
        stream,
        step,
        warmup_steps=point.measure.warmup_steps,
        steps=point.measure.steps,
        sync=device_sync(device),
    )


def _sample_costs(dataset: Dataset[Any], point: Point, where: ladder.Placement) -> None:
    """CPU cost of one host read with the point's workers alive (they are part of the tree) and
    idle (their prefetch done), so that contention does not inflate it."""
    stream = ladder.build_stream("full", dataset, point.loader, point.workload.batch_size, where)
    try:
        stream.next()  # workers up
        time.sleep(3.0)  # their prefetch done
        host = HostSampler()
        host.read(memory=True)

        def cost_us(memory: bool, n: int) -> tuple[float, float]:
            """(wall, CPU of this thread) per read."""
            w0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(n):
                host.read(memory=memory)
            return (time.perf_counter() - w0) / n * 1e6, (time.thread_time() - c0) / n * 1e6

        (cpu_wall, cpu_cpu), (pss_wall, pss_cpu) = cost_us(False, 200), cost_us(True, 20)
    finally:
        stream.close()
    pss_every_s = max(DEFAULT_MEMORY_INTERVAL_S, (pss_cpu - cpu_cpu) / 1e6 / MEMORY_CPU_BUDGET)
    share = (10 * cpu_cpu + (pss_cpu - cpu_cpu) / pss_every_s) / 1e4
    print(
        f"one host sample (rank + {point.loader.num_workers} idle workers): CPU times {cpu_wall:.0f} us "
        f"(CPU {cpu_cpu:.0f} us); with PSS {pss_wall:.0f} us (CPU {pss_cpu:.0f} us), so PSS is read "
        f"every {pss_every_s:.1f} s; the host sampler at 10 Hz uses {share:.2f} % of one core"
    )


if __name__ == "__main__":
    main()
