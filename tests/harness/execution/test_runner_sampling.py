"""The samplers wired into a real run: host figures for real, a faked GPU through to the tables."""

from __future__ import annotations

import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.aggregate import summarize
from analysis.load import load_results
from analysis.render.report import build_report
from analysis.render.tables import loader_tables
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point
from harness.sampling import nvml, timeline
from harness_schema import layout
from harness_schema import rows as results
from tests.conftest import TINY_WORKLOAD
from tests.harness.sampling.test_nvml import GPU_A, FakeGpu, FakePynvml

SPEC = "name: t\n" + TINY_WORKLOAD.replace("steps: 3,", "steps: 12,") + "loader: {num_workers: 1}\n"


def test_rows_carry_host_figures_and_the_timeline_its_phases(tmp_path: Path) -> None:
    (point,) = expand(parse_spec(SPEC + "rungs: [processed_sample, full]\n")).points
    run_point(point, tmp_path, env=DistEnv(hostname="n1"))
    path = layout.point_dir(tmp_path, point.id)
    rows = results.read_rows(path / "rank0.csv")
    for row in rows:
        assert float(row["main_cores"]) > 0
        assert float(row["loader_cores"]) >= 0
        assert int(row["cpus_allotted"]) >= 1
        assert float(row["peak_host_memory_gb"]) > 0.05
        assert row["gpu_util"] == ""  # no GPU here: empty, not zero
    with (path / "samples-rank0.csv").open() as f:
        samples = list(csv.DictReader(f))
    assert list(samples[0]) == list(timeline.SAMPLE_COLUMNS)
    phases = {s["phase"] for s in samples}
    assert {"processed_sample/0/warmup", "processed_sample/0", "full/0/warmup", "full/0"} <= phases


def test_sampling_off_writes_no_timeline_and_no_figures(tmp_path: Path) -> None:
    (point,) = expand(parse_spec(SPEC + "sampler: {host: false, gpu: false}\n")).points
    run_point(point, tmp_path)
    path = layout.point_dir(tmp_path, point.id)
    assert not (path / "samples-rank0.csv").exists()
    (row,) = results.read_rows(path / "rank0.csv")
    assert row["main_cores"] == "" and row["status"] == "ok"


def test_a_faked_gpu_reaches_the_rows_and_the_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(uuid=GPU_A, pci="00000000:3B:00.0", util=80.0, power_mw=250_000, energy_mj=1_000_000)
    monkeypatch.setattr(nvml, "_process_nvml", nvml._ProcessNvml())
    monkeypatch.setitem(__import__("sys").modules, "pynvml", FakePynvml([gpu]))
    monkeypatch.setattr(nvml, "cuda_device_identity", lambda index: (GPU_A, None))
    # The run is on the CPU; the sampler is handed the fake GPU as if CUDA device 0 were in use.
    monkeypatch.setattr(timeline, "_gpu_sampler", lambda device: (nvml.GpuSampler(device_index=0), ""))
    (point,) = expand(parse_spec(SPEC)).points
    run_point(point, tmp_path, env=DistEnv(hostname="gpu-node"))
    (row,) = results.read_rows(layout.point_dir(tmp_path, point.id) / "rank0.csv")
    assert float(row["gpu_util"]) == pytest.approx(80.0)
    assert float(row["gpu_power_w"]) == pytest.approx(250.0)
    table = loader_tables(summarize(load_results([tmp_path]).rows))["gpu-node"]
    assert "gpu_util" in table.columns and table["gpu_util"].iloc[0] == pytest.approx(80.0)


def test_a_profiled_rung_leaves_a_trace_per_rank_and_the_report_names_it(tmp_path: Path) -> None:
    from analysis.render.report import build_report
    from harness.storage.sweep import create_sweep

    plan = expand(parse_spec(SPEC + "profile: {rung: full, wait: 0, warmup: 1, active: 2}\n"))
    sweep = create_sweep(plan, tmp_path)
    (point,) = plan.points
    run_point(point, sweep)
    traces = list((layout.point_dir(sweep, point.id) / "profile").glob("rank0.*.pt.trace.json"))
    assert len(traces) == 1
    # the measured row is untouched by the profiler: it ran in a pass of its own
    (row,) = results.read_rows(layout.point_dir(sweep, point.id) / "rank0.csv")
    assert row["status"] == "ok" and int(row["steps"]) == 12
    assert f"profiler traces (1): {traces[0].parent}" in build_report([sweep]).text


# Started by a short-lived launcher in a session of their own: orphans, outside the rank's
# process tree and its job, as another user's work is. Each spins for at most a minute, so a
# test that dies leaves nothing behind for long.
DETACH = """
import subprocess, sys
spin = "import time\\nend = time.time() + 60\\nwhile time.time() < end: pass"
for _ in range(int(sys.argv[1])):
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(subprocess.Popen([sys.executable, "-c", spin], start_new_session=True, **quiet).pid, flush=True)
"""


def detached_burners(count: int) -> list[int]:
    launcher = subprocess.run(
        [sys.executable, "-c", DETACH, str(count)], capture_output=True, text=True, check=True
    )
    return [int(pid) for pid in launcher.stdout.split()]


@pytest.mark.serial
@pytest.mark.alone  # its burners hold every CPU: nothing else may measure beside them
def test_a_machine_shared_with_a_cpu_burner_is_named_in_the_row_and_the_report(tmp_path: Path) -> None:
    """Issue 30: the samplers recorded the foreign load, but no line said the figures were taken
    on a busy machine. Two spinning processes per CPU the rank may use, outside its tree and
    its job, run through the whole point. Why > 0.3 holds on a machine shared with anything
    else too: the burners alone keep every CPU busy, and the rank (one main thread, no
    workers) gets at most its fair share of them, one CPU of two here (with the kernel's
    autogroups, half the CPUs against the burners' session; without, 3 of its threads
    against 4 burners: 0.57 foreign); other people's work only adds to the foreign share."""
    spec = SPEC.replace("steps: 12,", "steps: 60,").replace("num_workers: 1", "num_workers: 0")
    (point,) = expand(parse_spec(spec + "rungs: [full]\n")).points
    burners = detached_burners(2 * len(os.sched_getaffinity(0)))
    try:
        time.sleep(0.5)  # the burners are spinning before the warmup starts
        run_point(point, tmp_path, env=DistEnv(hostname="n1"))
    finally:
        for pid in burners:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    (row,) = results.read_rows(layout.point_dir(tmp_path, point.id) / "rank0.csv")
    assert float(row["foreign_cpu_share"]) > 0.3, row
    text = build_report([tmp_path]).text
    assert "the machine was shared: other processes used " in text
    assert "of its CPU during the windows; figures may read slow and the ranking move" in text
