"""Preemption and scancel on a real Slurm cluster: what Slurm sends to a running point of a
sweep (SIGTERM to every process of the step: the rank and its DataLoader workers at once; then
submitit's preemption signal, USR2, as `submitit.SlurmJob._interrupt` sends them), and the
sweep's results after it: no row blaming the loader for the unit under way, a clear status,
and the unit measured again by `harness resume`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from harness_schema import layout
from harness_schema import rows as results
from tests.fixtures.processes import wait_for
from tests.fixtures.workloads import stuck_pids
from tests.slurm.conftest import harness, sweep_of, wait_until_idle

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

SPEC = """\
name: preempt
workload:
  dataset: tests.fixtures.workloads:stuck_once_dataset
  dataset_args: {{size: 32, stuck: 9, log: {log}}}
  model: linear
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 4}}
rungs: [full]
loader: {{num_workers: 2}}
slurm: {{tasks_per_node: 1, gpus_per_node: 1, cpus_per_task: 1, time: "00:10:00"}}
"""


@pytest.mark.parametrize("signals", [["TERM"], ["TERM", "USR2"]], ids=["scancel-term", "term-then-usr2"])
def test_a_point_preempted_mid_window_leaves_its_unit_to_resume(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, signals: list[str]
) -> None:
    """`scancel --signal=TERM`, or submitit's model of a preemption (TERM, then USR2: its
    SlurmJob._interrupt), while a DataLoader worker of the point reads: the unit under way has
    no row (before session 11: `DataLoader worker (pid N) is killed by signal: Terminated`, a
    failed row blaming the loader that a resume took for done), the status names the
    termination and the resume, and `harness resume` measures the unit."""
    log = tmp_path_factory.mktemp("stuck")  # outside tmp_path: the job's dataset writes there
    (tmp_path / "preempt.yaml").write_text(SPEC.format(log=log))
    out = harness("submit", "preempt.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    sweep = sweep_of(out, tmp_path)
    (entry,) = json.loads((sweep / "jobs.json").read_text())
    job = entry["job_id"]
    wait_for(lambda: stuck_pids(log), "a worker stuck in __getitem__ (mid-window)", 180.0)
    for signal in signals:  # to every process of the job's steps: the rank and its workers
        subprocess.run(["scancel", f"--signal={signal}", job], check=True)
    wait_until_idle(job.split("_")[0])
    rank_file = layout.rank_file(sweep / "points" / entry["point_id"], 0)
    assert not rank_file.exists() or [r for r in results.read_rows(rank_file) if r.get("rung")] == []

    status = harness("status", str(sweep), cwd=tmp_path)
    assert status.returncode == 1, status.stdout + status.stderr
    assert (
        f"point {entry['point_id']}: terminated by SIGTERM; its units not done are measured again on resume"
        in status.stdout
    )
    assert not re.search(r"\d\d:\d\d:\d\d,\d+ W point", status.stdout)  # the line, not the log's time
    assert f"resubmit the 1 point(s) without complete results: harness resume {sweep}" in status.stdout

    resumed = harness("resume", str(sweep), "--wait", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [(r["rung"], r["status"]) for r in results.read_rows(rank_file) if r.get("rung")] == [
        ("full", "ok")
    ]
    after = harness("status", str(sweep), cwd=tmp_path)
    assert after.returncode == 0 and "1 completed" in after.stdout, after.stdout
