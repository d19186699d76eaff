"""What the samplers cost the training loop: throughput with both samplers at 10 Hz against both off.

    .venv/bin/python benchmarks/sampler_cost.py [--spec jobs/quickstart.yaml] [--rounds 8] [--steps 12]

Builds the quick start's point with num_workers=2 (persistent_workers false: workers start and
exit at every epoch, the case the host sampler works hardest for) as the runner does, then runs
its `full` rung `--rounds` times with the samplers on and off, interleaved in this one process
(on/off, then off/on, ...) so that drift in the machine's speed hits both alike. Prints each
round's throughputs and ratio, and the CPU other processes used meanwhile (on a shared machine
another job moves throughput by far more than 1 %); the median ratio and the ratio of the
means, over all rounds and over the quiet ones; the goal is a ratio >= 0.99. Then the sampling
thread's own CPU time (immune to other jobs) and the cost of one host sample, with and without
reading PSS. No assertions: it measures. About 1.5 minutes on a quiet 2-core VM.
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

from harness.config.plan import Point, expand
from harness.config.spec import load_spec
from harness.execution import dataloader, ladder, loader_stream
from harness.execution.device import choose_device, device_sync
from harness.execution.loop import timed_loop
from harness.execution.step_times import LoopTimes
from harness.execution.train_step import TrainStep
from harness.execution.workload import build_workload
from harness.sampling.host import DEFAULT_MEMORY_INTERVAL_S, MEMORY_CPU_BUDGET, HostSampler
from harness.sampling.timeline import RankSampler

ROOT = Path(__file__).resolve().parents[1]
QUIET_CORES = 0.25


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
    dataset, step = build_workload(point, device)
    where = dataloader.Placement(device=device)
    batch = point.workload.batch_size
    print(
        f"point {point.id}: {point.workload.dataset} {point.workload.model}, batch {batch}, "
        f"num_workers {point.loader.num_workers}, persistent_workers {point.loader.persistent_workers}, "
        f"device {device}; {point.measure.warmup_steps} warmup + {args.steps} measured steps per run, "
        f"samplers at {args.hz:g} Hz"
    )

    thread_share: list[float] = []
    watch = HostSampler()  # outside the measured region: who else used the CPU meanwhile

    def run(sampled: bool) -> tuple[float, float]:
        """One run of the rung: (samples per second, cores used by other processes meanwhile)."""
        stream = ladder.build_stream("full", dataset, point.loader, batch, where)
        sampler = RankSampler(hz=args.hz, host=True, gpu=True, device=device) if sampled else None
        before, started = watch.read(memory=False, exact=True), time.perf_counter()
        try:
            if sampler is not None:
                sampler.start()
                with sampler.phase("full/0"):
                    times = _loop(stream, step, point, device)
                sampler.stop()
                thread_share.append(sampler.thread_cpu_s / (time.perf_counter() - started))
            else:
                times = _loop(stream, step, point, device)
            after, wall = watch.read(memory=False, exact=True), time.perf_counter() - started
        finally:
            stream.close()
        ours = (after.main_cpu_s - before.main_cpu_s) + (after.loader_cpu_s - before.loader_cpu_s)
        others = max(0.0, (after.system_busy_s - before.system_busy_s) - ours) / wall
        return times.steps * batch / times.training_time, others

    run(False)  # burn-in: allocator, first forks, caches
    rounds: list[tuple[float, float, float, float]] = []  # on, off, other load during on, off
    print(
        f"\n{'round':>5}  {'order':>7}  {'on (samples/s)':>14}  {'off (samples/s)':>15}  {'on/off':>7}"
        f"  {'other load on/off (cores)':>25}"
    )
    started = time.perf_counter()
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        figures = {sampled: run(sampled) for sampled in order}
        (on, load_on), (off, load_off) = figures[True], figures[False]
        rounds.append((on, off, load_on, load_off))
        label = "on,off" if order[0] else "off,on"
        loads = f"{load_on:.2f} / {load_off:.2f}"
        print(f"{r:>5}  {label:>7}  {on:>14.2f}  {off:>15.2f}  {on / off:>7.4f}  {loads:>25}")
    _report("all rounds", rounds)
    # Another job on the machine (a shared VM, a login node) moves throughput far more than the
    # samplers do; rounds in which it stayed away on both sides say more.
    quiet = [r for r in rounds if max(r[2], r[3]) < QUIET_CORES]
    if quiet:
        _report(f"quiet rounds (other load < {QUIET_CORES} cores), {len(quiet)} of {len(rounds)}", quiet)
    else:
        print(f"no quiet round (other load < {QUIET_CORES} cores on both sides): the ratios above are noise")
    # Unlike throughput, this does not move when another job shares the machine. The thread holds
    # the GIL for at most its CPU time, so it cannot slow the loop by more than that share.
    print(
        f"sampling thread CPU: {100 * statistics.fmean(thread_share):.2f} % of one core "
        f"(runs from {100 * min(thread_share):.2f} to {100 * max(thread_share):.2f} %), "
        f"so at worst (all of it on the critical path) on/off >= {1 - statistics.fmean(thread_share):.4f}"
    )
    print(f"({time.perf_counter() - started:.0f} s of runs)")
    _sample_costs(dataset, point, where)


def _report(title: str, rounds: list[tuple[float, float, float, float]]) -> None:
    ratios = [on / off for on, off, _, _ in rounds]
    on_mean = statistics.fmean(on for on, _, _, _ in rounds)
    off_mean = statistics.fmean(off for _, off, _, _ in rounds)
    print(
        f"throughput on/off, {title}: median {statistics.median(ratios):.4f}, "
        f"ratio of the means {on_mean / off_mean:.4f} (from {min(ratios):.4f} to {max(ratios):.4f}); "
        "goal >= 0.99"
    )


def _loop(
    stream: loader_stream.LoaderStream | ladder.RepeatStream,
    step: TrainStep,
    point: Point,
    device: torch.device,
) -> LoopTimes:
    return timed_loop(
        stream,
        step,
        warmup_steps=point.measure.warmup_steps,
        steps=point.measure.steps,
        sync=device_sync(device),
    )


def _sample_costs(dataset: Dataset[Any], point: Point, where: dataloader.Placement) -> None:
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
