"""The copy to the GPU: pinned host batches, non_blocking copies, and the device_batch bound."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.config.plan import Point, expand
from harness.config.spec import load_spec
from harness.execution import dataloader, ladder
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point
from harness.execution.workload import build_workload

pytestmark = pytest.mark.gpu


def point_of(spec: Path) -> Point:
    (point,) = expand(load_spec(spec)).points
    return point


def profiled_names(call: Callable[[], Any]) -> set[str]:
    """Names of the CPU and CUDA events (runtime calls, copies, kernels) of `call`."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        call()
        torch.cuda.synchronize()
    return {e.name for e in prof.events()}


def test_host_batch_is_pinned_and_its_copy_does_not_block(
    gpu_spec: Callable[..., Path], cuda0: torch.device
) -> None:
    point = point_of(gpu_spec())
    dataset, step = build_workload(point, cuda0)
    where = dataloader.Placement(device=cuda0)
    stream = ladder.build_stream("host_batch", dataset, point.loader, point.workload.batch_size, where)
    try:
        batch = stream.next()
        assert batch[0].is_pinned() and batch[1].is_pinned()  # the loader's pin_memory thread
        step.to_device(batch)  # first copy outside the profile: CUDA's own start-up
        names = profiled_names(lambda: step.to_device(batch))
    finally:
        stream.close()
    # A pinned source: CUPTI names the DMA by its kind; non_blocking: cudaMemcpyAsync and an
    # event, never the cudaStreamSynchronize of a blocking copy (ATen's copy_kernel_cuda).
    assert "Memcpy HtoD (Pinned -> Device)" in names
    assert "cudaStreamSynchronize" not in names


def test_a_blocking_copy_synchronises(cuda0: torch.device) -> None:
    """The other side of the test above: what non_blocking saves is this synchronisation."""
    pinned = torch.zeros(1024, 1024).pin_memory()
    pinned.to(cuda0)
    names = profiled_names(lambda: pinned.to(cuda0, non_blocking=False))
    assert "cudaStreamSynchronize" in names


def test_device_batch_is_on_the_gpu_and_bounds_the_ladder(
    gpu_spec: Callable[..., Path], tmp_path: Path, cuda0: torch.device
) -> None:
    point = point_of(gpu_spec("rungs: [device_batch, host_batch, full]\n"))
    dataset, _ = build_workload(point, cuda0)
    where = dataloader.Placement(device=cuda0)
    stream = ladder.build_stream("device_batch", dataset, point.loader, point.workload.batch_size, where)
    assert all(t.device == cuda0 for t in stream.next() if isinstance(t, torch.Tensor))
    stream.close()

    outcome = run_point(point, tmp_path, env=DistEnv(hostname="gpu"))
    rows = {r.rung: r for r in outcome.rows}
    assert [r.status for r in outcome.rows] == ["ok"] * 3, [r.error for r in outcome.rows]
    assert {r.device for r in outcome.rows} == {"cuda:0"}
    # The bound: nothing is loaded or copied per step, so its wait for data is the smallest.
    assert rows["device_batch"].loading_time <= rows["full"].loading_time
