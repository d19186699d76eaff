"""Whether the processed_sample rung's loader moves a batch between processes as training does:
its capacity (batches/s of the loader alone, as the ladder reports it) against a plain
DataLoader over the same samples, distinct objects, read for free, as a ratio (issue 41).

    PYTHONPATH=. .venv/bin/python benchmarks/ladder_ipc.py [--rounds 3] [--batches 60]

The data set is tests/fixtures/pipelines.FreeDetection: one premade detection sample (a
3×96×96 uint8 image, a target dict of boxes and labels) given as a deep copy at every read,
torchvision's detection collate (`tuple(zip(*batch))`), 16 samples a batch, one worker: the
only cost is collation and worker IPC. The plain loader reads a list of 16 distinct copies made
ahead (no copy inside the loop). The harness's figure is the processed_sample row's `capacity`
from one run of the point (3 repeats). Before issue 41 the rung served one object, 16 times a
batch, and read many times the plain loader's rate; the goal is a ratio within 10 % of 1.
Prints each round's rates and ratio, then the median ratio.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torch.utils.data import DataLoader, Dataset

from analysis.load import load_results
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import sample_cache
from harness.execution.runner import run_point
from tests.fixtures.pipelines import FreeDetection, keep_samples

BATCH = 16
P = "tests.fixtures.pipelines"


class Premade(Dataset[Any]):
    """BATCH distinct copies of the sample, made ahead: a free read of distinct objects."""

    def __init__(self, size: int) -> None:
        sample = FreeDetection().sample
        self.samples = [copy.deepcopy(sample) for _ in range(BATCH)]
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Any:
        return self.samples[index % BATCH]


def rate(dataset: Dataset[Any], batches: int) -> float:
    """Batches/s of a DataLoader over `dataset`, one worker, torchvision's detection collate,
    timed after its queue is full."""
    loader = DataLoader(dataset, batch_size=BATCH, num_workers=1, collate_fn=keep_samples())
    it = iter(loader)
    for _ in range(8):  # the worker started and its queue filled
        next(it)
    started = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches / (time.perf_counter() - started)


def harness_rate() -> float:
    """The processed_sample rung's capacity (batches/s) from one run of the point: 1,000
    batches an epoch, so that no epoch ends inside the timing (a new epoch starts new workers,
    which a capacity rightly counts, and the plain loops here never pay)."""
    spec = parse_spec(
        f"name: ipc\nworkload: {{dataset: {P}:free_detection, dataset_args: {{size: 16000}}, "
        f"collate: {P}:keep_samples, model: emulated, model_args: {{step_ms: 5}}, batch_size: {BATCH}, "
        "device: cpu}\nmeasure: {warmup_steps: 2, steps: 12, repeats: 3}\n"
        "rungs: [host_batch, processed_sample, full]\nloader: {num_workers: 1}\n"
    )
    (point,) = expand(spec).points
    with tempfile.TemporaryDirectory() as folder:
        run_point(point, Path(folder))
        rows = load_results([Path(folder)]).rows
    cells = rows.loc[rows["rung"] == "processed_sample", "loader_capacity"]
    return float(cells.median())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args()
    size = BATCH * (args.batches + 8)
    loaders = {
        "plain DataLoader, distinct samples": lambda: Premade(size),
        "processed_sample rung (distinct, as now)": lambda: sample_cache.sample_dataset(
            "processed_sample", FreeDetection(size=size), BATCH
        ),
        "processed_sample rung (one object, before)": lambda: sample_cache.sample_dataset(
            "processed_sample", FreeDetection(size=size), 1
        ),
    }
    rates: dict[str, list[float]] = {name: [] for name in loaders}
    reported = []
    for k in range(args.rounds):  # in turn, so that drift in the machine's speed hits each
        for name, make in loaders.items():
            rates[name].append(rate(make(), args.batches))
        reported.append(harness_rate())
        print(f"round {k + 1}: " + ", ".join(f"{name} {r[-1]:.1f}" for name, r in rates.items()))
    plain = statistics.median(rates["plain DataLoader, distinct samples"])
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"{name}: {median:.1f} batches/s, {median / plain:.2f}× plain")
    print(
        f"the ladder's reported processed_sample capacity: {statistics.median(reported):.1f} batches/s, "
        f"{statistics.median(reported) / plain:.2f}× plain (goal: within 10 %)"
    )


if __name__ == "__main__":
    main()
