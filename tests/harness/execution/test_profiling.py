"""Profiler capture on the CPU: one trace per rank, named with the rank; the HTA breakdown is
optional and says why it is absent."""

from __future__ import annotations

import json
import logging
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
import torch

from analysis.profiles import time_breakdown, trace_dirs
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


def test_time_breakdown_without_hta_says_it_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with TraceCapture({"wait": 0, "warmup": 1, "active": 1}, tmp_path, rank=0) as capture:
        train_steps(capture, 2)
    monkeypatch.setitem(sys.modules, "hta", None)  # import hta raises ImportError, installed or not
    monkeypatch.setitem(sys.modules, "hta.trace_analysis", None)
    with caplog.at_level(logging.INFO, logger="analysis.profiles"):
        assert time_breakdown(tmp_path) is None
    assert caplog.messages == ["time breakdown skipped: HolisticTraceAnalysis (hta) is not installed"]


def test_time_breakdown_of_an_empty_folder_is_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="analysis.profiles"):
        assert time_breakdown(tmp_path / "nothing") is None
    assert caplog.messages == [f"time breakdown skipped: no trace in {tmp_path / 'nothing'}"]


def test_each_profiler_cycle_gets_its_own_folder(tmp_path: Path) -> None:
    # HTA keeps one trace per rank and folder: two cycles in one folder would lose one.
    profile = tmp_path / "points" / "p1" / "profile"
    config = ProfileConfig(rung="full", wait=0, warmup=1, active=1, repeat=2)
    with TraceCapture(config, profile, rank=0) as capture:
        train_steps(capture, config.steps)
    assert [t.parent for t in capture.traces] == [profile / "cycle0", profile / "cycle1"]
    assert trace_dirs(tmp_path) == [profile / "cycle0", profile / "cycle1"]


def test_a_rank_without_process_group_names_its_rank_for_hta(tmp_path: Path) -> None:
    with TraceCapture({"wait": 0, "warmup": 1, "active": 1}, tmp_path, rank=0) as capture:
        train_steps(capture, 2)
    (trace,) = capture.traces
    assert json.loads(trace.read_text())["distributedInfo"]["rank"] == 0


class FakeTraceAnalysis:
    """hta.trace_analysis.TraceAnalysis as HTA 0.2 behaves: one trace per rank and folder,
    keyed by distributedInfo.rank, which it requires."""

    def __init__(self, trace_dir: str) -> None:
        self.ranks: dict[int, str] = {}
        for path in Path(trace_dir).glob("*.json"):
            data = json.loads(path.read_text())
            if "distributedInfo" not in data:
                raise ValueError(
                    "The distributedInfo key does not exist in the trace. Trace cannot be processed."
                )
            self.ranks[data["distributedInfo"]["rank"]] = path.name

    def get_temporal_breakdown(self, visualize: bool = False) -> pd.DataFrame:
        return pd.DataFrame({"rank": sorted(self.ranks), "idle_time_pctg": [10.0] * len(self.ranks)})


@pytest.fixture
def fake_hta(monkeypatch: pytest.MonkeyPatch) -> None:
    package, module = types.ModuleType("hta"), types.ModuleType("hta.trace_analysis")
    module.TraceAnalysis = FakeTraceAnalysis  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hta", package)
    monkeypatch.setitem(sys.modules, "hta.trace_analysis", module)


def test_hta_reads_a_single_rank_trace(tmp_path: Path, fake_hta: None) -> None:
    with TraceCapture({"wait": 0, "warmup": 1, "active": 1}, tmp_path, rank=0) as capture:
        train_steps(capture, 2)
    frame = time_breakdown(tmp_path)
    assert frame is not None and list(frame["rank"]) == [0]


def test_a_trace_without_distributed_info_says_why_hta_skips_it(
    tmp_path: Path, fake_hta: None, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "rank0.1.pt.trace.json").write_text(json.dumps({"traceEvents": []}))
    assert time_breakdown(tmp_path) is None
    assert caplog.messages == [
        f"time breakdown skipped: the traces in {tmp_path} carry no distributedInfo (a single rank "
        'profiled without a process group); HTA needs {"distributedInfo": {"rank": k}} in each: '
        "profile again with this harness, which writes it"
    ]


class CpuOnlyTraceAnalysis(FakeTraceAnalysis):
    """HTA on a trace without GPU kernels (a CPU run): it reads the trace, then cannot break
    down GPU time."""

    def get_temporal_breakdown(self, visualize: bool = False) -> pd.DataFrame:
        raise ValueError("no GPU kernels in the trace of rank 0")


def test_time_breakdown_of_a_cpu_trace_says_why_hta_cannot(
    tmp_path: Path, fake_hta: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sys.modules["hta.trace_analysis"], "TraceAnalysis", CpuOnlyTraceAnalysis)
    with TraceCapture({"wait": 0, "warmup": 1, "active": 1}, tmp_path, rank=0) as capture:
        train_steps(capture, 2)
    assert time_breakdown(tmp_path) is None
    assert caplog.messages == [
        f"time breakdown skipped: HolisticTraceAnalysis cannot analyse {tmp_path} "
        "(ValueError: no GPU kernels in the trace of rank 0)"
    ]
