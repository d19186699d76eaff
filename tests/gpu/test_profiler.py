"""The profiler's CUDA activity, and HolisticTraceAnalysis reading the traces of one GPU."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_traces_hold_gpu_kernels_and_name_their_rank(tmp_path: Path, cuda0: torch.device) -> None:
    config = ProfileConfig(wait=0, warmup=1, active=3, repeat=1)
    (trace,) = profile_steps(config, tmp_path, cuda0).traces
    data = json.loads(trace.read_text())
    assert data["distributedInfo"]["rank"] == 0  # no process group: the harness wrote it
    assert any(e.get("cat") == "kernel" for e in data["traceEvents"])


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
