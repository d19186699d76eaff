"""Job mates for real: processes started with the job's identity in their environment are the
job's, others are not, and the busy time of this process's CPUs is read from /proc/stat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.sampling import mates
from harness.sampling.mates import allotted_cpus, busy_seconds

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads /proc (Linux)")

# Runs as a rank of a local job would: with SUBMITIT_LOCAL_JOB_ID in its environment from the
# start. It lists its mates, lets the mate spin, and prints what it found.
PROBE = """
import json, sys, time
from harness.sampling.mates import JobMates
m = JobMates()
m.refresh(own=set())
before = m.cpu_seconds()
time.sleep(1.0)
print(json.dumps({"in_a_job": m.in_a_job, "mates": sorted(m._mates), "cpu": m.cpu_seconds() - before}))
"""
SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"


def outside_any_job() -> dict[str, str]:
    """This environment without any job's identity (mates.JOB_VARIABLES)."""
    named = {name for keys in mates.JOB_VARIABLES for name in keys}
    return {k: v for k, v in os.environ.items() if k not in named}


def start(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SPIN], env=env, stdout=subprocess.DEVNULL)


def test_the_other_ranks_of_the_job_are_mates_and_another_process_is_not() -> None:
    """Under the local backend every rank may run on every CPU: without this, each rank would
    count the other as a shared machine."""
    job = {**outside_any_job(), "SUBMITIT_LOCAL_JOB_ID": f"test-{uuid.uuid4().hex}"}
    mate, stranger = start(job), start(outside_any_job())
    try:
        time.sleep(0.3)  # both exist before the probe lists the machine
        out = subprocess.run(
            [sys.executable, "-c", PROBE], env=job, capture_output=True, text=True, check=True
        )
    finally:
        for proc in (mate, stranger):
            proc.kill()
            proc.wait()
    found = json.loads(out.stdout)
    assert found["in_a_job"]
    assert mate.pid in found["mates"] and stranger.pid not in found["mates"]
    assert found["cpu"] > 0.05  # the mate spun for the second the probe slept


def test_a_process_outside_any_job_has_no_mates() -> None:
    env = outside_any_job()
    code = "from harness.sampling.mates import JobMates\nm = JobMates()\nm.refresh(set())\nprint(m.in_a_job, len(m._mates))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "0"]


def test_busy_seconds_of_the_allotted_cpus_grow_while_this_process_spins() -> None:
    cpus = allotted_cpus()
    before, start_s = busy_seconds(cpus), time.thread_time()
    while time.thread_time() - start_s < 0.3:
        pass
    after = busy_seconds(cpus)
    assert before is not None and after is not None and after - before >= 0.25
    assert busy_seconds(cpus, Path("/nonexistent/stat")) is None
