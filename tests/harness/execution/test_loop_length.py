"""The batches a point yields to the loop that drives it: what a script's len(loader) says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.execution.loop_length import (
    DRAIN_FACTOR,
    batches_before_run,
    batches_per_loop,
    stock,
    stock_decided_by_script,
)

SCRIPT = Path(__file__).resolve().parents[2] / "fixtures" / "probe_script.py"


def test_each_unit_counts_its_longest_warmup_and_its_window_and_one_batch_closes_the_loop() -> None:
    spec = parse_spec(
        "name: n\nworkload: {dataset: fake_cifar, model: linear}\nmeasure: {warmup_steps: 1, steps: 4, repeats: 2}\n"
        "rungs: [device_batch, full]\nloader: {num_workers: 2, prefetch_factor: 3}\n"
    )
    (point,) = expand(spec).points
    assert (stock(point, "device_batch"), stock(point, "full")) == (0, 6)
    device_batch = 1 + 4  # the spec's warmup, no stock to use up
    # The stock's steps, the longest drain, the window rounded up to whole periods of a bursty
    # delivery (a period is at most the stock: up to 5 steps more).
    full = 6 + DRAIN_FACTOR * 6 + 4 + 5
    assert batches_per_loop(point) == 2 * (device_batch + full) + 1
    # A resumed point yields only what it has left.
    assert batches_per_loop(point, done={("device_batch", 0), ("full", 0)}) == device_batch + full + 1


def test_the_count_is_known_without_torch() -> None:
    code = "import sys, harness.execution.loop_length; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_before_the_script_runs_the_count_is_known_only_where_the_spec_names_the_stock() -> None:
    def script_point(loader: str, rungs: str) -> Point:
        spec = parse_spec(
            f"name: s\nworkload: {{script: {SCRIPT}}}\nmeasure: {{warmup_steps: 1, steps: 4, repeats: 1}}\n"
            f"rungs: {rungs}\nloader: {loader}\n"
        )
        (point,) = expand(spec).points
        return point

    named = script_point("{num_workers: 2, prefetch_factor: 2}", "[full]")
    assert batches_before_run(named) == batches_per_loop(named) == 4 + 4 * 4 + 4 + 3 + 1
    assert batches_before_run(script_point("{pin_memory: true}", "[full]")) is None  # the script's workers
    assert batches_before_run(script_point("{pin_memory: true}", "[host_batch]")) == 1 + 4 + 1


def test_a_point_without_workers_is_counted_whatever_prefetch_factor_the_script_keeps() -> None:
    # PyTorch's ImageNet example with `flags: {num_workers: --workers}`: the spec names
    # num_workers, the script keeps its prefetch_factor. With no workers there is no stock, so
    # the count is known before the script runs; with workers, the script's prefetch_factor
    # (and only it) decides it.
    def script_point(loader: str) -> Point:
        spec = parse_spec(
            f"name: s\nworkload: {{script: {SCRIPT}}}\nmeasure: {{warmup_steps: 1, steps: 4, repeats: 1}}\n"
            f"rungs: [host_batch, full]\nloader: {loader}\n"
        )
        (point,) = expand(spec).points
        return point

    no_workers, workers = script_point("{num_workers: 0}"), script_point("{num_workers: 2}")
    assert "prefetch_factor" in no_workers.script_keeps
    assert batches_before_run(no_workers) == (1 + 4) + (1 + 4) + 1
    assert batches_before_run(workers) is None
    assert stock_decided_by_script(workers) == ("prefetch_factor",)
    assert stock_decided_by_script(script_point("{pin_memory: true}")) == ("num_workers", "prefetch_factor")
