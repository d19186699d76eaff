"""Profiler capture on the CPU: one trace per rank, named with the rank; the HTA breakdown is
optional and says why it is absent."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from analysis.profiles import time_breakdown
from harness.execution.profiling import ProfileConfig, TraceCapture


def train_steps(capture: TraceCapture, steps: int) -> None:
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = model(torch.randn(4, 8)).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        capture.step()


def test_cpu_trace_per_rank_with_the_rank_in_its_name(tmp_path: Path) -> None:
    config = ProfileConfig(rung="full", wait=1, warmup=1, active=2, repeat=1)
    with TraceCapture(config, tmp_path / "profile", rank=3) as capture:
        train_steps(capture, config.steps + 1)

    (trace,) = capture.traces
    assert trace.parent == tmp_path / "profile"
    assert trace.name.startswith("rank3.") and trace.name.endswith(".pt.trace.json")
    assert [p.name for p in (tmp_path / "profile").iterdir()] == [trace.name]  # no temporary left
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "ProfilerStep#2" for e in events)  # an active step was recorded


def test_config_from_a_mapping_and_its_errors() -> None:
    assert ProfileConfig.from_mapping({"rung": "raw_sample", "active": 5}).steps == 7
    with pytest.raises(
        ValueError, match=r"profile\.steps: unknown key; valid keys: rung, wait, warmup, active, repeat"
    ):
        ProfileConfig.from_mapping({"steps": 3})
    with pytest.raises(ValueError, match=r"profile\.active must be an integer >= 1 \(got 0\)"):
        ProfileConfig(active=0)
    with pytest.raises(
        ValueError, match=r"profile\.rung must be one of device_batch, .*transform:<k> \(got 'fast'\)"
    ):
        ProfileConfig(rung="fast")


def test_time_breakdown_is_none_without_hta_or_gpu(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with TraceCapture({"wait": 0, "warmup": 1, "active": 1}, tmp_path, rank=0) as capture:
        train_steps(capture, 2)
    with caplog.at_level(logging.INFO, logger="analysis.profiles"):
        assert time_breakdown(tmp_path) is None
    # Either HTA is not installed, or it is and refuses a trace without GPU kernels.
    assert any(r.getMessage().startswith("time breakdown skipped: ") for r in caplog.records)


def test_time_breakdown_of_an_empty_folder_is_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="analysis.profiles"):
        assert time_breakdown(tmp_path / "nothing") is None
    assert caplog.messages == [f"time breakdown skipped: no trace in {tmp_path / 'nothing'}"]
