"""The profiler's CUDA activity, and HolisticTraceAnalysis reading the traces of one GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from analysis.profiles import time_breakdown, trace_dirs
from harness.execution.profiling import ProfileConfig, TraceCapture
from harness.execution.train_step import TrainStep
from harness.workloads.models import toy_conv

pytestmark = pytest.mark.gpu


def profile_steps(config: ProfileConfig, out_dir: Path, device: torch.device) -> TraceCapture:
    step = TrainStep(toy_conv(num_classes=10, width=8, depth=2), device, non_blocking=True)
    batch = torch.randn(16, 3, 32, 32).pin_memory(), torch.randint(0, 10, (16,)).pin_memory()
    with TraceCapture(config, out_dir, rank=0) as capture:
        for _ in range(config.steps):
            step(batch)
            capture.step()
    torch.cuda.synchronize()
    return capture


LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
"""The runtime and driver calls that start a kernel (as CUPTI names them in the trace)."""


def launches_per_step(events: list[dict[str, Any]]) -> list[list[int]]:
    """For each recorded ProfilerStep#k, in order: the correlation ids of the kernel launches
    made on the CPU inside it."""
    steps = sorted(
        (e for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and "dur" in e),
        key=lambda e: e["ts"],
    )
    launches = [
        e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("name") in LAUNCHES
    ]
    return [
        [int(e["args"]["correlation"]) for e in launches if step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
        for step in steps
    ]


def test_traces_hold_the_kernels_each_step_ran_and_name_their_rank(
    tmp_path: Path, cuda0: torch.device
) -> None:
    """Every kernel launched in an active step is in the trace as a GPU event (CUPTI pairs a
    launch and its kernel by correlation id), and the three identical steps launched the same
    number of kernels: the trace is the steps' work, not a sample of it."""
    config = ProfileConfig(wait=0, warmup=1, active=3, repeat=1)
    (trace,) = profile_steps(config, tmp_path, cuda0).traces
    data = json.loads(trace.read_text())
    assert data["distributedInfo"]["rank"] == 0  # no process group: the harness wrote it
    events = data["traceEvents"]
    kernels = {int(e["args"]["correlation"]) for e in events if e.get("cat") == "kernel"}
    per_step = launches_per_step(events)
    assert len(per_step) == config.active, [len(step) for step in per_step]
    assert per_step[0] and len({len(step) for step in per_step}) == 1, [len(step) for step in per_step]
    missing = [c for step in per_step for c in step if c not in kernels]
    assert not missing, f"{len(missing)} launched kernel(s) absent from the trace"


def test_hta_breaks_down_a_single_gpu_trace_per_cycle(tmp_path: Path, cuda0: torch.device) -> None:
    pytest.importorskip(
        "hta", reason="HolisticTraceAnalysis is not installed (pip install HolisticTraceAnalysis)"
    )
    profile = tmp_path / "points" / "p0" / "profile"
    profile_steps(ProfileConfig(wait=0, warmup=1, active=3, repeat=2), profile, cuda0)
    folders = trace_dirs(tmp_path)
    assert folders == [profile / "cycle0", profile / "cycle1"]
    for folder in folders:
        frame = time_breakdown(folder)
        assert frame is not None, f"HTA could not read {folder}: see the warning above"
        assert list(frame["rank"]) == [0]
        assert 0 <= float(frame["compute_time_pctg"].iloc[0]) <= 100
