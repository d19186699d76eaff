"""What a Slurm job's state means for its point, classified once (`classify`: `status`,
`--wait` and `resume` share it), and the jobs as scontrol and scancel name them (`job_list`).

A module of its own, beside queue.py (which asks sacct and squeue for the states), so that
status.py reads the classification without importing the Slurm backend, whose handle follows
the sweep through status.py. Every backend's job states are said in Slurm's words (a local
job whose process lives is RUNNING): the words of the status table, one vocabulary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class StateClass(StrEnum):
    """What a job's state means for its point: the one classification `status`, `--wait` and
    `resume` share. Live classes (`LIVE`) may still write results: resume never resubmits them."""

    QUEUED = "queued"
    """Waiting for resources, or requeued and waiting again."""
    HELD = "held"
    """Waiting for a person: `scontrol release` lets it go on."""
    RUNNING = "running"
    """Holds its nodes (starting, running, ending, resizing)."""
    SUSPENDED = "suspended"
    """Stopped on its nodes: `scontrol resume` lets it go on."""
    FINISHED = "finished"
    """Ended well (its results say whether the point is complete)."""
    ENDED_BAD = "ended-bad"
    """Ended without finishing: cancelled, failed, timed out, preempted, its node lost."""
    UNKNOWN = "unknown"
    """A state this version does not know: taken as live, so that nothing is run twice."""


LIVE: frozenset[StateClass] = frozenset(
    {StateClass.QUEUED, StateClass.HELD, StateClass.RUNNING, StateClass.SUSPENDED, StateClass.UNKNOWN}
)

# Every job state of Slurm's squeue(1) and sacct(1) manuals ("JOB STATE CODES"), and the two
# this module makes up: SUBMITTED (sent, not yet seen by the scheduler) and NEVER_STARTED
# (cancelled while pending: Slurm does not account never-started array tasks).
STATE_CLASSES: dict[str, StateClass] = {
    "PENDING": StateClass.QUEUED,
    "REQUEUED": StateClass.QUEUED,  # requeued, pending again
    "REQUEUE_FED": StateClass.QUEUED,  # requeued by a federation, pending again
    "SUBMITTED": StateClass.QUEUED,
    "REQUEUE_HOLD": StateClass.HELD,  # requeued and held: scontrol release
    "RESV_DEL_HOLD": StateClass.HELD,  # its reservation was deleted; held
    "SPECIAL_EXIT": StateClass.HELD,  # requeued in a special state after an exit value; held
    "CONFIGURING": StateClass.RUNNING,  # allocated, its nodes booting
    "RUNNING": StateClass.RUNNING,
    "COMPLETING": StateClass.RUNNING,  # ending: some processes still alive
    "SIGNALING": StateClass.RUNNING,  # being signalled
    "STAGE_OUT": StateClass.RUNNING,  # staging out data (burst buffer)
    "RESIZING": StateClass.RUNNING,  # changing size
    "SUSPENDED": StateClass.SUSPENDED,  # scontrol suspend, or suspended by preemption
    "STOPPED": StateClass.SUSPENDED,  # SIGSTOP'ed, its CPUs kept
    "COMPLETED": StateClass.FINISHED,
    "FAILED": StateClass.ENDED_BAD,
    "TIMEOUT": StateClass.ENDED_BAD,
    "CANCELLED": StateClass.ENDED_BAD,
    "NODE_FAIL": StateClass.ENDED_BAD,
    "OUT_OF_MEMORY": StateClass.ENDED_BAD,
    "BOOT_FAIL": StateClass.ENDED_BAD,
    "DEADLINE": StateClass.ENDED_BAD,  # past its --deadline
    "PREEMPTED": StateClass.ENDED_BAD,  # a requeued one shows PENDING again in squeue
    "REVOKED": StateClass.ENDED_BAD,  # a federation ran it on another cluster
    "LAUNCH_FAILED": StateClass.ENDED_BAD,
    "NEVER_STARTED": StateClass.ENDED_BAD,
}

ENDED_WORD = {
    "TIMEOUT": "timed-out",
    "DEADLINE": "timed-out",
    "FAILED": "failed",
    "NODE_FAIL": "failed",
    "OUT_OF_MEMORY": "failed",
    "BOOT_FAIL": "failed",
    "LAUNCH_FAILED": "failed",
    "PREEMPTED": "preempted",
}
"""The progress word of a job that ended badly; any other (CANCELLED...) is "cancelled"."""

HOLD_REASONS: frozenset[str] = frozenset({"JobHeldUser", "JobHeldAdmin"})
"""squeue's reasons of a PENDING job that `scontrol hold` (or an admin) holds."""


def classify(state: str, reason: str = "") -> StateClass:
    """The class of a scheduler state ("CANCELLED by 0" is CANCELLED); `reason` is squeue's."""
    base = state.split()[0] if state.strip() else ""
    if base == "PENDING" and reason in HOLD_REASONS:
        return StateClass.HELD
    return STATE_CLASSES.get(base, StateClass.UNKNOWN)


@dataclass(frozen=True, slots=True)
class JobState:
    state: str
    exit_code: str
    nodes: str
    reason: str = ""
    """squeue's reason for a queued job (JobHeldUser, Resources, ...); "" from sacct."""

    @property
    def kind(self) -> StateClass:
        return classify(self.state, self.reason)


def job_list(job_ids: Sequence[str]) -> str:
    """The jobs as scontrol and scancel take them, array tasks in ranges: "12_[0-3,7],13"."""
    tasks: dict[str, list[int]] = {}
    plain: list[str] = []
    for job in job_ids:
        base, _, task = job.partition("_")
        if task.isdigit():
            tasks.setdefault(base, []).append(int(task))
        else:
            plain.append(job)
    parts = []
    for base, numbers in tasks.items():
        ranges: list[list[int]] = []
        for n in sorted(set(numbers)):
            if ranges and n == ranges[-1][1] + 1:
                ranges[-1][1] = n
            else:
                ranges.append([n, n])
        text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
        parts.append(
            f"{base}_{text}" if len(ranges) == 1 and ranges[0][0] == ranges[0][1] else f"{base}_[{text}]"
        )
    return ",".join([*parts, *plain])


_ADVICE = {
    "held": "held: release them with: scontrol release {ids} (harness resume leaves them alone)",
    "suspended": "suspended: let them go on with: scontrol resume {ids} (harness resume leaves them alone)",
    "unknown": "in a state this harness does not know: left alone; see: scontrol show job {ids}",
}


def job_advice(jobs: Sequence[tuple[str, str]]) -> list[str]:
    """What to do about the jobs that wait for a person, a line per progress word: `jobs` holds
    (progress word, job id) of each point not done (status.PointStatus.progress)."""
    lines = []
    for word, what in _ADVICE.items():
        ids = [job for progress, job in jobs if progress == word and job]
        if ids:
            lines.append(f"{len(ids)} point(s) {what.format(ids=job_list(ids))}")
    return lines
