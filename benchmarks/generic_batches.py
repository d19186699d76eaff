"""What the generic copy and sample count cost: samples/s of one built-in workload through
batches.to_device/count_samples (TrainStep.to_device and .count) against the fixed
(inputs, targets) path the harness had before them (re-implemented below), as a ratio.

    .venv/bin/python benchmarks/generic_batches.py [--rounds 10] [--steps 200] [--batch 32]

The workload is fake_cifar (3×32×32 uint8 images, gpu_normalize on, so the copy does work on
the inputs as the old path did) with the `linear` model on the CPU, the cheapest step the
harness ships: the copy and count are then the largest share of a step they can ever be. Each
round measures both paths through the one timed window (loop.window, driven by the same
TrainStep.compute), on `host_batch` (the same host batch every step: copy and count, no
loader) and on `full` (a fresh batch from the DataLoader each step), in turn and in
alternating order, so that drift in the machine's speed hits both. Prints each round's
samples/s and ratio, the median ratios, and the cost of one copy+count call of each path in
microseconds. No assertions: it measures. About a minute on a quiet 2-core VM.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.execution import dataloader, ladder
from harness.execution.loop import drive, window
from harness.execution.train_step import TrainStep
from harness.execution.workload import build_workload

SPEC = """\
name: generic-batches
workload: {{dataset: fake_cifar, dataset_args: {{size: 4096, image_size: 32, resize: null}},
  model: linear, batch_size: {batch}, device: cpu, gpu_normalize: true}}
"""


def old_copy(step: TrainStep) -> Callable[[Any], Any]:
    """TrainStep.to_device as it was before batches.to_device (commit b468127^)."""

    def to_device(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = batch[0], batch[1]
        inputs = inputs.to(step.device, non_blocking=step.non_blocking)
        targets = targets.to(step.device, non_blocking=step.non_blocking)
        if step.normalize is not None:
            inputs = step.normalize(inputs)
        if inputs.dim() == 4 and step.memory_format is torch.channels_last:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        return inputs, targets

    return to_device


def old_count(batch: Any) -> int:
    """loop.batch_samples as it was: the length of the targets."""
    target = batch[1] if isinstance(batch, (tuple, list)) and len(batch) > 1 else batch
    try:
        return len(target)
    except TypeError:
        return 1


def samples_per_s(
    point: Point,
    dataset: Any,
    step: TrainStep,
    rung: str,
    paths: tuple[Callable[[Any], Any], Callable[[Any], int]],
    steps: int,
) -> float:
    copy, count = paths
    where = dataloader.Placement(device=step.device)
    stream = ladder.build_stream(rung, dataset, point.loader, point.workload.batch_size, where)
    try:
        times = drive(
            window(stream, to_device=copy, count=count, warmup_steps=5, steps=steps, sync=lambda: None),
            step.compute,
        )
    finally:
        stream.close()
    return times.samples / times.training_time


def per_call_us(
    batch: Any, paths: dict[str, tuple[Callable[[Any], Any], Callable[[Any], int]]]
) -> dict[str, float]:
    """Microseconds per copy+count call of each path: the median of 7 rounds of 5000 calls,
    the paths in alternating order."""
    rounds: dict[str, list[float]] = {name: [] for name in paths}
    for r in range(7):
        for name in sorted(paths, reverse=r % 2 == 1):
            copy, count = paths[name]
            start = time.perf_counter()
            for _ in range(5000):
                count(batch)
                copy(batch)
            rounds[name].append((time.perf_counter() - start) / 5000 * 1e6)
    return {name: statistics.median(times) for name, times in rounds.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=200, help="measured steps per run")
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)  # one core for the step: the other is left to the machine
    (point,) = expand(parse_spec(SPEC.format(batch=args.batch))).points
    dataset, step = build_workload(point, torch.device("cpu"))
    paths = {"generic": (step.to_device, step.count), "old": (old_copy(step), old_count)}
    for rung in ("host_batch", "full"):
        ratios = []
        print(f"{rung}: samples/s, generic and old, per round")
        for r in range(args.rounds):
            order = ("generic", "old") if r % 2 == 0 else ("old", "generic")
            rate = {
                name: samples_per_s(point, dataset, step, rung, paths[name], args.steps) for name in order
            }
            ratios.append(rate["generic"] / rate["old"])
            print(
                f"  round {r}: generic {rate['generic']:9.0f}  old {rate['old']:9.0f}  ratio {ratios[-1]:.3f}"
            )
        quartiles = statistics.quantiles(ratios, n=4)
        print(
            f"{rung}: median ratio generic/old {statistics.median(ratios):.3f} "
            f"(quartiles {quartiles[0]:.3f}..{quartiles[2]:.3f}, {args.rounds} rounds)\n"
        )
    batch = next(
        iter(
            dataloader.make_loader(
                dataset, point.loader, args.batch, dataloader.Placement(device=step.device)
            )
        )
    )
    plain = TrainStep(step.model, step.device, non_blocking=False)  # no normalisation: the walk alone
    plain_paths = {"generic": (plain.to_device, plain.count), "old": (old_copy(plain), old_count)}
    for label, calls in (
        ("gpu_normalize", per_call_us(batch, paths)),
        ("plain", per_call_us(batch, plain_paths)),
    ):
        print(
            f"one copy+count call, {label}: generic {calls['generic']:.1f} µs, old {calls['old']:.1f} µs "
            f"({calls['generic'] - calls['old']:+.1f} µs a step)"
        )


if __name__ == "__main__":
    main()
