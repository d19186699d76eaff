"""Asking Slurm where a sweep's jobs stand: sacct (accounting) for the jobs that ran, squeue
for those still queued or running, squeue's view first (`scheduler_states`)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from harness.backends.slurm.states import JobState


def sacct_states(job_ids: Sequence[str]) -> dict[str, JobState]:
    """State of each job (array tasks as `<array>_<task>`), from accounting."""
    if not job_ids:
        return {}
    out = _ask(["sacct", "-X", "-P", "-n", "--format=JobID,State,ExitCode,NodeList"], job_ids)
    if out.returncode != 0:
        raise RuntimeError(f"sacct failed: {out.stderr.strip() or out.returncode}")
    return parse_sacct(out.stdout)


def parse_sacct(text: str) -> dict[str, JobState]:
    """sacct's `JobID|State|ExitCode|NodeList` lines -> job id -> state.

    Pending array tasks are listed as ranges (`123_[4-7%2]`); each task gets its own entry.
    """
    states: dict[str, JobState] = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 4:
            continue
        job, state, code, nodes = fields[:4]
        state = state.split()[0] if state else "UNKNOWN"  # "CANCELLED by 0" -> CANCELLED
        for task in _task_ids(job):
            states[task] = JobState(state, code, nodes)
    return states


def _task_ids(job: str) -> list[str]:
    """The job ids one sacct JobID stands for, by submitit's own reader of array ids."""
    from submitit.slurm.slurm import read_job_id

    try:
        parts = read_job_id(job)
    except ValueError:  # not an array id submitit knows (a heterogeneous job's 12+0): as is
        return [job]
    ids: list[str] = []
    for main, *tasks in parts:
        if len(tasks) == 2:  # a range: (main, first, last)
            ids.extend(f"{main}_{k}" for k in range(int(tasks[0]), int(tasks[1]) + 1))
        else:
            ids.append("_".join((main, *tasks)))
    return ids


def squeue_states(job_ids: Sequence[str]) -> dict[str, JobState]:
    """Live jobs (array tasks expanded with -r): authoritative while a job is queued or runs.

    sacct alone is not enough: an array task cancelled while pending never reaches
    accounting, and a fresh submission reaches it a second or two late.
    """
    if not job_ids:
        return {}
    return parse_squeue(_ask(["squeue", "-r", "-h", "-o", "%i|%T|%N|%r"], job_ids).stdout)


def _ask(command: list[str], job_ids: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """`command -j` the arrays these jobs (or array tasks, `<array>_<task>`) belong to."""
    bases = sorted({j.split("_")[0] for j in job_ids})
    return subprocess.run(
        [*command, "-j", ",".join(bases)], capture_output=True, text=True, timeout=60, check=False
    )


def parse_squeue(text: str) -> dict[str, JobState]:
    """squeue's `%i|%T|%N|%r` lines (job id, state, nodes, reason) -> job id -> state."""
    states: dict[str, JobState] = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) == 4:
            states[fields[0]] = JobState(fields[1], "", fields[2], fields[3])
    return states


def scheduler_states(job_ids: Sequence[str]) -> dict[str, JobState]:
    """sacct's view, overridden by squeue's for the jobs still in the queue."""
    return {**sacct_states(job_ids), **squeue_states(job_ids)}
