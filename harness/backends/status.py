"""Where each point of a sweep stands: its job's state (the scheduler's, or this machine's for a
sweep run here), and its results; and what a user should do about the points not done.

Results decide "done": a point is complete when every rank wrote a row for every (rung,
repeat). The job's state, classified once in `slurm.states.classify`, says why one is not (queued,
held, running, suspended, cancelled, timed out) and whether it may still write results: a
point with a live job is never run again by `harness resume`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.backends.base import Backend
from harness.backends.point_status import PointStatus
from harness.backends.slurm.accounting import log_tail, unseen_state
from harness.backends.slurm.states import ENDED_WORD, job_advice
from harness.config.plan import Point
from harness.storage.sweep import latest_job_entries, live_owner, load_info, load_points, process_alive
from harness_schema import layout
from harness_schema.reading import read_point, set_aside_units, set_aside_unreadable

__all__ = ["PointStatus", "advice", "scheduler_view", "sweep_status", "to_resume"]


def scheduler_view(sweep_dir: Path, backend: type[Backend]) -> dict[str, object]:
    """Job id -> its state (an object with .state and .reason), asked of the scheduler for a
    Slurm sweep; empty for a sweep run here (the backend's `states`: its process is looked at
    by sweep_status). `backend`: the sweep's recorded one (registry.recorded; given, not looked
    up, so that this module, which the Slurm backend's following uses, does not import the
    registry)."""
    jobs = sorted({entry["job_id"] for entry in latest_job_entries(sweep_dir).values()})
    return dict(backend.states(jobs)) if jobs else {}


def sweep_status(sweep_dir: Path, states: Mapping[str, object]) -> list[PointStatus]:
    """`states` maps job id -> an object with .state (and .reason): the scheduler's answer
    (scheduler_view), empty for a sweep run here. A process of this machine that runs the
    sweep now (owner.json: only a sweep run here has one) shows its points as running."""
    info = load_info(sweep_dir)
    entries = latest_job_entries(sweep_dir)
    owner = live_owner(sweep_dir)
    out = []
    for point in load_points(sweep_dir):
        path = layout.point_dir(sweep_dir, point.id)
        found = read_point(path, info.ranks(point.id))
        wanted = {(r, k) for r in point.rungs for k in range(point.measure.repeats)}
        error = found.error or "; ".join(f"{e.path.name}: {e.what}" for e in found.unreadable)
        entry = entries.get(point.id)
        job = entry["job_id"] if entry else ""
        state, reason = "-", ""
        if owner:
            state, reason = "RUNNING", owner  # this machine's process runs the sweep still
        elif entry and (process := process_alive(entry.get("process"))):
            state, reason = "RUNNING", process  # a local job that outlived the run that started it
        elif job and job in states:
            state = str(getattr(states[job], "state", "-"))
            reason = str(getattr(states[job], "reason", ""))
        elif entry and info.backend == "slurm":
            state = unseen_state(job, entry, states)
        if not error and job and state.split(" ")[0] in ENDED_WORD:
            error = log_tail(sweep_dir, job)
        out.append(
            PointStatus(
                point=point,
                job_id=job,
                state=state,
                reason=reason,
                units_done=len(found.units & wanted),
                units_total=len(wanted),
                failed_units=len(found.failed & wanted),
                error=error,
                unreadable=found.unreadable,
            )
        )
    return out


def advice(
    statuses: Sequence[PointStatus], sweep_dir: Path, backend: type[Backend], *, resume: bool = True
) -> list[str]:
    """What to do about the points not done, a line each; what it advises is what the named
    commands do (`harness resume` runs exactly the points counted in its line, which comes
    last, and only with `resume`)."""
    lines = [
        f"{e}: its units count as missing; harness resume moves it aside and measures them again"
        for st in statuses
        for e in st.unreadable
    ]
    lines += job_advice([(st.progress, st.job_id) for st in statuses])
    missing = [st for st in statuses if st.needs_resubmit]
    if missing and resume:
        lines.append(
            f"{backend.again} the {len(missing)} point(s) without complete results: "
            f"harness resume {sweep_dir}"
        )
    return lines


def to_resume(
    statuses: Sequence[PointStatus], sweep_dir: Path, *, failed: bool = False
) -> tuple[list[Point], list[str]]:
    """The points `harness resume` runs: those without complete results and without a live job
    (status's count), and with `failed` (`resume --failed`) the points with failed units too.

    Before they run, what would stand in the way is moved aside, never deleted: a rank file that
    cannot be read (rank<k>.csv.torn-<time>), and with `failed` the rows of the failed units
    (rank<k>.csv.failed-<time>; the ok rows stay). Their units are then missing, and measured
    again once each. Returns the points, and a line for the console on each thing moved."""
    info = load_info(sweep_dir)
    todo: list[Point] = []
    lines: list[str] = []
    for st in statuses:
        retry = failed and st.failed_units > 0 and not st.active
        if not (st.needs_resubmit or retry):
            continue
        path = layout.point_dir(sweep_dir, st.point.id)
        world_size = info.ranks(st.point.id)
        lines += set_aside_unreadable(path, world_size)
        if retry:
            units = read_point(path, world_size).failed
            moved = set_aside_units(path, world_size, units, "failed")
            lines.append(
                f"point {st.point.id}: {moved} failed row(s) moved aside to rank<k>.csv.failed-<time>"
            )
        todo.append(st.point)
    return todo, lines
