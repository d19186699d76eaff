"""The wall-clock limit of one point, on every backend: past it, the point's units not done are
failed rows (`point <id> exceeded its limit of N s (limits.point_minutes)`), the processes it
started (DataLoader workers) are ended, and the point is never requeued.

Where the limit comes from (`point_limit`): `limits.point_minutes` when the spec gives it;
else `slurm.time` for a job (local or Slurm: the time a point's job is given), and
INLINE_MINUTES in this process.

Who ends the point: a signal, caught by `run_limited` around `run_point` on each rank, raises
PointTimeout in the rank's main thread (where a DataLoader waits for its workers; PyTorch's own
waits are interruptible), which is a BaseException so that no rung takes it for its own
failure.

- From outside the rank: SIGUSR2, sent by submitit's local controller at the limit (the local
  backend gives it `GRACE_S` more, then kills the ranks), or by Slurm `signal_delay_s` before
  `slurm.time` (`#SBATCH --signal`). Taken here, it is never the requeue submitit's own handler
  would make of it: a point that hangs would hang again, `max_num_timeout` times over.
- In the rank, a timer (SIGALRM): inline, and where `limits.point_minutes` is set (on Slurm
  the job's own limit stays `slurm.time`).

SIGTERM from outside (Slurm's preemption or scancel, to the rank and its workers at once) is
not the limit: the point's workers are ended and Terminated goes on up, the unit under way left
with no row for a requeue or resume to measure (harness/execution/termination.py).

A rank stuck in C code that never returns to Python (a collective with no timeout) is beyond a
signal's reach: the local controller's kill at the limit plus GRACE_S, or Slurm's at
`slurm.time`, ends it; its rows then say nothing (`status` says timed out or failed).
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from harness.config.plan import Point
from harness.execution import termination
from harness.execution.termination import terminable
from harness.exits import Terminated

if TYPE_CHECKING:
    from harness.execution.dist import DistEnv
    from harness.execution.point import PointOutcome

log = logging.getLogger(__name__)

INLINE_MINUTES = 60.0
"""A point's limit in this process when the spec sets none: an hour, far beyond a point of the
built-in grids (minutes), and a bound on a hung one on a laptop left alone."""
GRACE_S = 30
"""Seconds a local job's ranks have, after the limit's signal, to write their failed rows and
end their workers before submitit's controller kills them."""


@dataclass(frozen=True, slots=True)
class Limit:
    seconds: float
    setting: str
    """Where it comes from, for the line: limits.point_minutes, slurm.time."""


class PointTimeout(BaseException):
    """The point ran past its limit (a BaseException: a rung's `except Exception` lets it by)."""

    def __init__(self, point_id: str, limit: Limit) -> None:
        super().__init__(f"point {point_id} exceeded its limit of {limit.seconds:g} s ({limit.setting})")


def point_limit(point: Point, slurm_time: str | int | None) -> Limit:
    """The point's limit; `slurm_time`: the spec's slurm.time for a job, None in this process."""
    from harness_schema.slurm_time import time_seconds

    if point.limits.point_minutes is not None:
        return Limit(point.limits.point_minutes * 60, "limits.point_minutes")
    if slurm_time is None:
        return Limit(INLINE_MINUTES * 60, f"limits.point_minutes, {INLINE_MINUTES:g} min inline by default")
    return Limit(float(time_seconds(slurm_time)), "slurm.time")


def run_limited(point: Point, sweep_dir: Path, env: DistEnv, limit: Limit, *, timer: bool) -> PointOutcome:
    """run_point within the limit (see the module): SIGUSR2 always ends it, and with `timer`
    a SIGALRM at the limit too. Signals reach the main thread only: elsewhere, no limit."""
    from harness.execution.runner import run_point

    if threading.current_thread() is not threading.main_thread():
        return run_point(point, sweep_dir, env=env)
    started = time.time()
    try:
        with terminable(), _armed(point, limit, timer=timer):
            return run_point(point, sweep_dir, env=env)
    except PointTimeout:
        pass
    except Exception:
        # Terminated unwinding, a worker dead of the same SIGTERM (a DataLoader closed in a
        # `finally`): PyTorch's SIGCHLD handler raised its death in Terminated's place.
        if termination.signal_taken() is None:
            raise
    except Terminated:
        if termination.signal_taken() is None:
            raise  # the CLI's, SIGHUP: its own way up (harness/exits.py)
    # Out of the except block, the traceback and the DataLoader iterators its frames held are
    # gone: their __del__ shuts their workers down and unregisters them from PyTorch's SIGCHLD
    # handler, which would take the kill of a worker still registered for a failure of its own.
    signum = termination.signal_taken()
    _end_workers(point, started, terminated=signum is not None)
    if signum is not None:
        # SIGTERM from outside (preemption, scancel): the unit under way keeps no row, so a
        # requeue or `harness resume` measures it again (harness/execution/termination.py).
        log.warning(
            "point %s: terminated by SIGTERM; its units not done are measured again on resume", point.id
        )
        raise Terminated(signum)
    return fail_rest(point, sweep_dir, env, PointTimeout(point.id, limit))


def _end_workers(point: Point, started: float, *, terminated: bool) -> None:
    """The point's workers collected and ended; terminated, a worker's death the SIGTERM caused
    that PyTorch's SIGCHLD handler raises meanwhile is no error."""
    try:
        gc.collect()
        ended = end_children(started)
    except Exception:
        if not terminated:
            raise
        ended = end_children(started)
    if ended:
        log.info("point %s: ended %d process(es) it had started", point.id, ended)


@contextmanager
def _armed(point: Point, limit: Limit, *, timer: bool) -> Iterator[None]:
    def expired(signum: int, frame: FrameType | None) -> None:
        raise PointTimeout(point.id, limit)

    signals = (signal.SIGUSR2, signal.SIGALRM) if timer else (signal.SIGUSR2,)
    previous = {s: signal.signal(s, expired) for s in signals}
    if timer:
        signal.setitimer(signal.ITIMER_REAL, limit.seconds)
    try:
        yield
    finally:
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in previous.items():
            signal.signal(s, handler)


def end_children(since: float) -> int:
    """Kill the processes this one started since `since` (a DataLoader's workers, one stuck in
    `__getitem__` included: it would outlive the point, reparented to init); how many."""
    import psutil

    children = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.create_time() >= since - 1:
                child.kill()
                children.append(child)
        except psutil.Error:
            continue
    psutil.wait_procs(children, timeout=10)
    return len(children)


def fail_rest(point: Point, sweep_dir: Path, env: DistEnv, e: BaseException) -> PointOutcome:
    """A failed row with the error for every unit this rank has no row for (the ranks of a
    point need not have stopped at the same unit)."""
    from harness.execution.point import open_point

    opened = open_point(point, sweep_dir, env)
    return opened.fail_all(e, opened.written())


def job_limit(point: Point, sweep_dir: Path) -> Limit:
    """The limit of a point run as a job (local or Slurm): slurm.time from the sweep's spec."""
    from harness.config.spec import SpecError, parse_spec
    from harness_schema.settings import SlurmConfig

    spec_file = sweep_dir / "spec.yaml"
    try:
        slurm_time = parse_spec(spec_file.read_text(), file=str(spec_file)).slurm.time
    except (OSError, SpecError):
        slurm_time = SlurmConfig().time  # the default a job was given
    return point_limit(point, slurm_time)
