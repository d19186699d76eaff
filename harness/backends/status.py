"""Where each point of a sweep stands: its job's state in Slurm accounting, and its results.

Results decide "done": a point is complete when every rank wrote a row for every (rung,
repeat). The scheduler's state says why one is not (pending, running, cancelled, timed out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.config.plan import Point
from harness.storage import layout
from harness.storage import rows as results
from harness.storage.sweep import latest_job_entries, load_info, load_points

# A job neither queued nor in accounting this long after its submission was cancelled before
# it started (Slurm does not account never-started array tasks); before that, accounting lags.
ACCOUNTING_LAG_S = 60


@dataclass(frozen=True, kw_only=True, slots=True)
class PointStatus:
    point: Point
    job_id: str
    state: str
    """Scheduler state (PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED...) or "-"."""
    units_done: int
    units_total: int
    failed_units: int
    error: str

    @property
    def complete(self) -> bool:
        return self.units_done == self.units_total

    @property
    def progress(self) -> str:
        """One word for the table: where the point stands, so what a user needs to do about it
        (completed, failed, pending, running, timed-out, cancelled, not run, partial)."""
        if self.complete:
            return "failed" if self.failed_units else "completed"
        if self.state in ("PENDING", "REQUEUED", "SUBMITTED"):
            return "pending"
        if self.state in ("RUNNING", "COMPLETING", "CONFIGURING"):
            return "running"
        if self.state == "TIMEOUT":
            return "timed-out"
        if self.state in ("FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"):
            return "failed"
        if self.state.startswith("CANCELLED") or self.state == "NEVER_STARTED":
            return "cancelled"
        return "not run" if self.units_done == 0 else "partial"

    @property
    def active(self) -> bool:
        """Its job may still write results: resume leaves it alone, --wait waits for it."""
        return self.progress in ("pending", "running")

    @property
    def needs_resubmit(self) -> bool:
        """Results missing and no job left to write them: what `harness resume` resubmits."""
        return not self.complete and not self.active


def sweep_status(sweep_dir: Path, states: Mapping[str, object] | None = None) -> list[PointStatus]:
    """`states` maps job id -> an object with .state (sacct's); queried when not given."""
    info = load_info(sweep_dir)
    points = load_points(sweep_dir)
    entries = latest_job_entries(sweep_dir)
    jobs = {point: entry["job_id"] for point, entry in entries.items()}
    if states is None:
        states = {}
        if info.backend in ("slurm", "sbatch") and jobs:
            from harness.backends.slurm import scheduler_states

            states = scheduler_states(sorted(set(jobs.values())))
    out = []
    for point in points:
        path = layout.point_dir(sweep_dir, point.id)
        units = results.completed_units(path, info.world_size)
        wanted = {(r, k) for r in point.rungs for k in range(point.measure.repeats)}
        failed, error = _failures(path)
        job = jobs.get(point.id, "")
        state = "-"
        if job and job in states:
            state = str(getattr(states[job], "state", "-"))
        elif job and info.backend == "slurm":
            # Not queued and not accounted: cancelled before it started if Slurm knows other
            # tasks of its array (accounting has caught up), else a submission not yet seen.
            array = job.split("_")[0] + "_"
            known = "_" in job and any(other.startswith(array) for other in states)
            age = (datetime.now() - datetime.fromisoformat(entries[point.id]["submitted"])).total_seconds()
            state = "NEVER_STARTED" if known or age > ACCOUNTING_LAG_S else "SUBMITTED"
        if not error and state in ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL") and job:
            error = _log_tail(sweep_dir, job)
        out.append(
            PointStatus(
                point=point,
                job_id=job,
                state=str(state),
                units_done=len(units & wanted),
                units_total=len(wanted),
                failed_units=failed,
                error=error,
            )
        )
    return out


def _failures(point_path: Path) -> tuple[int, str]:
    count, error = 0, ""
    for path in sorted(point_path.glob("rank*.csv")):
        try:
            rows = results.read_rows(path)
        except OSError:
            continue
        for row in rows:
            if row.get("status") == "failed":
                count += 1
                error = error or row.get("error", "")
    return count, error


def _log_tail(sweep_dir: Path, job_id: str) -> str:
    """The last line of the job's stderr that says something, for a job that left no row."""
    # submitit's layout, <sweep>/slurm/<job id>/<job id>_<task>_log.err, or flat for a
    # standalone script: <sweep>/slurm/<job id>_<task>_log.err
    for log_file in sorted((sweep_dir / "slurm").glob(f"**/{job_id}_*_log.err")):
        lines = [line.strip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
        meaningful = [line for line in lines if not line.startswith(("submitit ", "srun: "))]
        if meaningful:
            return f"{meaningful[-1][:300]} (see {log_file})"
    return ""
