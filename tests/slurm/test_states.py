"""Scheduler states on a real Slurm cluster (see conftest): a suspended and a held point are
named as such by `harness status`, with what to do, and `harness resume` leaves them alone."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.slurm.conftest import harness, sweep_of, wait_until_idle

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

SLOW = """\
name: {name}
workload: {{dataset: fake_cifar, dataset_args: {{size: 64}}, model: "tests.fixtures.workloads:slow_model",
           model_args: {{delay: 0.2}}, batch_size: 4, device: cpu}}
measure: {{warmup_steps: 0, steps: 300}}
slurm: {{tasks_per_node: 1, gpus_per_node: 0, cpus_per_task: 1, time: "00:10:00"{extra}}}
"""


def submit(tmp_path: Path, name: str, extra: str = "") -> tuple[Path, str]:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(SLOW.format(name=name, extra=extra))
    out = harness("submit", str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    sweep = sweep_of(out, tmp_path)
    (entry,) = json.loads((sweep / "jobs.json").read_text())
    return sweep, entry["job_id"]


def squeue_state(job: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True)
    return out.stdout.strip()


def wait_for_state(job: str, state: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while squeue_state(job) != state:
        assert time.time() < deadline, f"job {job} is {squeue_state(job)!r}, not {state}"
        time.sleep(0.5)


def left_alone(sweep: Path, tmp_path: Path, word: str) -> None:
    """resume resubmits nothing: the point's job is alive."""
    resumed = harness("resume", str(sweep), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"1 point(s) with a live job (1 {word}): left alone" in resumed.stdout
    assert "nothing to resume" in resumed.stdout
    assert len(json.loads((sweep / "jobs.json").read_text())) == 1  # no second job


def test_a_suspended_point_is_named_suspended_and_not_resubmitted(tmp_path: Path) -> None:
    sweep, job = submit(tmp_path, "suspend")
    try:
        wait_for_state(job, "RUNNING")
        subprocess.run(["scontrol", "suspend", job], check=True)
        wait_for_state(job, "SUSPENDED")
        status = harness("status", str(sweep), cwd=tmp_path)
        assert status.returncode == 1
        row = status.stdout.splitlines()[2].split()
        assert row[2:5] == [job, "SUSPENDED", "suspended"]
        assert f"1 point(s) suspended: let them go on with: scontrol resume {job}" in status.stdout
        assert "harness resume" not in status.stdout.replace("(harness resume leaves them alone)", "")
        left_alone(sweep, tmp_path, "suspended")
    finally:
        subprocess.run(["scancel", job], check=False)
        wait_until_idle(job)


def test_a_held_point_is_named_held_and_not_resubmitted(tmp_path: Path) -> None:
    # Not before an hour from now: it stays pending until `scontrol hold` holds it.
    sweep, job = submit(tmp_path, "hold", extra=', extra: {begin: "now+1hour"}')
    try:
        wait_for_state(job, "PENDING")
        subprocess.run(["scontrol", "hold", job], check=True)
        status = harness("status", str(sweep), cwd=tmp_path)
        assert status.returncode == 1
        row = status.stdout.splitlines()[2]
        # JobHeldUser, or JobHeldAdmin when the one who holds it is root (as on the test cluster)
        assert "PENDING (JobHeld" in row and " held " in row
        assert f"1 point(s) held: release them with: scontrol release {job}" in status.stdout
        left_alone(sweep, tmp_path, "held")
    finally:
        subprocess.run(["scancel", job], check=False)
        wait_until_idle(job)
