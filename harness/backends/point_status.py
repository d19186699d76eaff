"""Where one point of a sweep stands (`PointStatus`): its job's state, said in Slurm's words for
every backend (harness/backends/slurm/states.py), and its results; the one progress word a user
reads from them. A module of its own so that the Backend protocol (harness/backends/base.py)
names it without importing status.py, which asks the backends.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.backends.slurm.states import ENDED_WORD, LIVE, StateClass, classify
from harness.config.plan import Point
from harness_schema.reading import UnreadableFile

_LIVE_WORD = {
    StateClass.QUEUED: "pending",
    StateClass.HELD: "held",
    StateClass.RUNNING: "running",
    StateClass.SUSPENDED: "suspended",
    StateClass.UNKNOWN: "unknown",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class PointStatus:
    point: Point
    job_id: str
    state: str
    """Scheduler state (PENDING, RUNNING, SUSPENDED, COMPLETED, TIMEOUT, CANCELLED...) or "-"."""
    units_done: int
    units_total: int
    failed_units: int
    error: str
    reason: str = ""
    """Why a queued job waits (squeue's JobHeldUser, Resources...), or which process runs it."""
    unreadable: tuple[UnreadableFile, ...] = ()
    """Its rank files that exist and cannot be read (torn): their units count as missing."""

    @property
    def complete(self) -> bool:
        return self.units_done == self.units_total

    @property
    def kind(self) -> StateClass | None:
        """The class of its job's state; None without a job state."""
        return None if self.state == "-" else classify(self.state, self.reason)

    @property
    def progress(self) -> str:
        """One word for the table: where the point stands, so what a user needs to do about it
        (completed, failed, pending, held, running, suspended, timed-out, preempted, cancelled,
        unknown, not run, partial)."""
        if self.complete:
            return "failed" if self.failed_units else "completed"
        kind = self.kind
        if kind in _LIVE_WORD:
            return _LIVE_WORD[kind]
        if kind is StateClass.ENDED_BAD:
            return ENDED_WORD.get(self.state.split()[0], "cancelled")
        if self.unreadable:
            return "torn"
        return "not run" if self.units_done == 0 else "partial"

    @property
    def active(self) -> bool:
        """Its job may still write results: resume leaves it alone, --wait waits for it."""
        return not self.complete and self.kind in LIVE

    @property
    def needs_resubmit(self) -> bool:
        """Results missing and no job left to write them: what `harness resume` runs again."""
        return not self.complete and not self.active

    @property
    def state_text(self) -> str:
        """The state as the table shows it, with squeue's reason when it says something."""
        return f"{self.state} ({self.reason})" if self.reason and self.reason != "None" else self.state
