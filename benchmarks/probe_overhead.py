"""What does the probe cost a training loop? One figure, on the CPU, in one run.

    .venv/bin/python benchmarks/probe_overhead.py

The same loop, over the same DataLoader, with the same train step: once as a script writes it
alone (`for batch in loader: batch = to_device(batch); step(batch)`), once through
`harness.probe.measure(loader, device)` (its chronometer: four clock reads, the generic copy
and the sample count per step, through a generator). Rounds alternate (ABAB...) so that a slow
spell of the machine falls on both; the figure is the probe's samples/s over the plain loop's,
paired by round, with its 95 % interval (analysis.noise.paired_ratio). Goal: at least 0.98
where the interval is narrow enough to see it.

The step is a real one (a small CNN, forward, backward and SGD on 16 images of 32×32, a few
milliseconds): the shorter the step, the larger the probe's share; the loader serves images
already in memory, so the loop is all step and overhead. Then the same two loops with a no-op
step: the probe's own time per step, a figure the machine's noise hardly moves. About a minute.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import harness.probe as probe
from analysis.noise import paired_ratio
from harness.execution.batches import to_device

ROUNDS, PASSES = 8, 2
DEVICE = torch.device("cpu")


def step_of() -> Any:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        images, labels = batch
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()

    return step


def plain(loader: DataLoader[Any], step: Any) -> float:
    samples, start = 0, time.perf_counter()
    for _ in range(PASSES):
        for batch in loader:
            batch = to_device(batch, DEVICE)
            step(batch)
            samples += len(batch[0])
    return samples / (time.perf_counter() - start)


def probed(loader: DataLoader[Any], step: Any) -> float:
    samples, start = 0, time.perf_counter()
    for batch in probe.measure(loader, DEVICE, epochs=PASSES):
        step(batch)
        samples += len(batch[0])
    return samples / (time.perf_counter() - start)


def main() -> None:
    torch.set_num_threads(1)  # one core for the step: less jitter from a shared machine
    data = TensorDataset(torch.randn(1024, 3, 32, 32), torch.randint(0, 10, (1024,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    step = step_of()
    plain(loader, step)  # burn-in: allocator, first iterations
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(plain(loader, step))
        b.append(probed(loader, step))
    ratio = paired_ratio(a, b)
    # The probe's own time per step, without the step (a no-op): the cost the ratio carries.
    bare_a, bare_b = [], []
    for _ in range(ROUNDS):
        bare_a.append(plain(loader, lambda batch: None))
        bare_b.append(probed(loader, lambda batch: None))
    per_step = 16 * (1 / statistics.median(bare_b) - 1 / statistics.median(bare_a))
    step_s = 16 / statistics.median(a)
    print(f"plain loop:   {statistics.median(a):8.1f} samples/s (median of {ROUNDS} rounds)")
    print(f"under probe:  {statistics.median(b):8.1f} samples/s")
    interval = f"95% interval {ratio.low:.3f}-{ratio.high:.3f}" if ratio.low is not None else "untested"
    print(f"ratio probe/plain: {ratio.estimate:.3f} ({interval}; goal >= 0.98)")
    print(
        f"the probe's own cost: {per_step * 1e6:.0f} us per step (no-op step, median of {ROUNDS} "
        f"rounds), {per_step / step_s:.1%} of this {step_s * 1e3:.1f} ms step: a ratio of "
        f"{1 / (1 + per_step / step_s):.3f}"
    )


if __name__ == "__main__":
    main()
