"""A real Slurm cluster for these tests: the one that answers, or one brought up here.

When `sinfo` does not answer and we are root on Debian (as CI is), tests/slurm/cluster.sh
brings up a throwaway cluster (two nodes, n1 and n2, with two fake GPUs each). Elsewhere the
tests are skipped, saying why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.backends.slurm.states import LIVE, classify

REPO = Path(__file__).resolve().parents[2]


def _answers() -> bool:
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "n1" in out.stdout and "n2" in out.stdout


# apt's words when it cannot reach a package source (a GPU machine without a network): then the
# packages cannot be had, and the tests cannot tell anything. Any other failure of cluster.sh
# (a package apt does not know, a daemon that does not start) fails them.
APT_OFFLINE = (
    "Temporary failure resolving",
    "Could not resolve",
    "Network is unreachable",
    "Could not connect to",
    "Connection timed out",
)


def _apt_unreachable(stderr: str) -> str:
    """The first line of apt-get's log (as cluster.sh shows it) saying no source answered."""
    if "apt-get failed" not in stderr:
        return ""
    return next((line.strip() for line in stderr.splitlines() if any(o in line for o in APT_OFFLINE)), "")


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    if _answers():
        return
    if os.geteuid() != 0 or not Path("/etc/debian_version").exists():
        pytest.skip("no Slurm cluster answers, and cluster.sh needs root on Debian to bring one up")
    out = subprocess.run(
        ["bash", str(REPO / "tests/slurm/cluster.sh"), "up"], capture_output=True, text=True, timeout=900
    )
    offline = _apt_unreachable(out.stderr)
    if out.returncode != 0 and offline:
        pytest.skip(f"Slurm is not installed here and apt-get cannot reach its sources: {offline}")
    if out.returncode != 0 or not _answers():
        pytest.fail(
            f"tests/slurm/cluster.sh up failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )


def harness(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it; PYTHONPATH lets the jobs import tests.fixtures."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_DIST_TIMEOUT_S": "60"}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sweep_of(out: subprocess.CompletedProcess[str], cwd: Path) -> Path:
    line = next(line for line in out.stdout.splitlines() if line.startswith("sweep: "))
    return cwd / line.removeprefix("sweep: ").strip()


def wait_until_idle(job_prefix: str, timeout: float = 300) -> None:
    """Until no job of the array is pending or running, in the queue *and* in the accounting.

    squeue and sacct are two views that do not change together: slurmdbd records a job's end a
    moment after slurmctld forgets it, and a requeued job passes through states in between. A
    test that reads sacct right after squeue empties can see the last run still RUNNING (CI did).
    A failing squeue counts as empty only when it says the job id is unknown (purged), not when
    the controller is merely slow to answer."""
    deadline = time.time() + timeout
    while True:
        out = subprocess.run(
            ["squeue", "-h", "-j", job_prefix, "-o", "%i %T"], capture_output=True, text=True
        )
        gone = "Invalid job id" in out.stderr if out.returncode != 0 else not out.stdout.strip()
        if gone and not _accounted_live(job_prefix):
            return
        if time.time() > deadline:
            raise TimeoutError(
                f"array {job_prefix} still pending or running after {timeout} s:\n{out.stdout}{out.stderr}"
                f"sacct: {_accounted_live(job_prefix)}"
            )
        time.sleep(2)


def _accounted_live(job_prefix: str) -> list[str]:
    """The latest run of each job whose accounting still says it may run (RUNNING, PENDING…)."""
    out = subprocess.run(
        ["sacct", "-X", "-P", "-n", "-o", "JobID,State", "-j", job_prefix], capture_output=True, text=True
    )
    live = []
    for line in out.stdout.splitlines():
        job, _, state = line.partition("|")
        if classify(state) in LIVE:
            live.append(f"{job} {state}")
    return live
