"""What a submitted job runs: one point, on every task (rank) of the job; or, for the local
backend, the points of one pass one after the other (PassJob: the ranks start once a pass).

Also what `python -m harness.backends.worker` runs on each rank, whoever started it: a
submitit job, srun, or torchrun (`torchrun --nproc-per-node N -m harness.backends.worker SWEEP
--index K`); `rank_environment` reads the ranks from the one that did.

Checkpointable: a job requeued (a preemption) goes on with the rungs not yet finished by
every rank. Not at its time limit: while the point runs, the limit's signal (SIGUSR2, from
Slurm or submitit's local controller) ends the point with failed rows for the units not done
(harness/backends/limit.py), and the job ends; a point that hung would hang again.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, NoReturn

import submitit

from harness.exits import Terminated, leave_objects_to_the_exit

log = logging.getLogger(__name__)


class PointJob(submitit.helpers.Checkpointable):
    def __init__(self, sweep_dir: str) -> None:
        self.sweep_dir = sweep_dir

    def __call__(self, point_json: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._run(point_json)
        finally:
            leave_objects_to_the_exit()

    def _run(self, point_json: dict[str, Any]) -> dict[str, Any]:
        from harness.extras import require_run_extra

        # A compute node without torch: the job's error (in its log)
        # names the extra to install, not an ImportError from deep inside the runner.
        require_run_extra("a submitted job")
        from harness.backends.limit import job_limit, run_limited
        from harness.config.plan import Point
        from harness.execution.dist import destroy_process_group, rank_environment

        _job_logging()
        _threads_from_allocation()
        env = rank_environment()
        point = Point.from_json(point_json)
        log.info("point %s on %s, rank %d of %d", point.id, env.hostname, env.rank, env.world_size)
        try:
            sweep_dir = Path(self.sweep_dir)
            # The job's limit comes from outside (SIGUSR2); a point_minutes below it, from a timer.
            timer = point.limits.point_minutes is not None
            outcome = run_limited(point, sweep_dir, env, job_limit(point, sweep_dir), timer=timer)
        except Terminated:
            end_as_terminated()
        finally:
            destroy_process_group()
        return {"point_id": point.id, "rank": env.rank, "ok": outcome.ok, "failed": outcome.failed}


class PassJob(submitit.helpers.Checkpointable):
    """The points of one pass (harness.sweeps.run_points), one after the other in the same rank
    processes: the local backend starts a job a pass, not a job a point a pass, whose start-up
    (processes, imports, the workload built) doubled a tiny sweep's time once repeats ran in
    passes. Each point runs as PointJob runs it, within its own limit (a timer: the job's
    limit is the sum of theirs), its process group left before the next joins."""

    def __init__(self, sweep_dir: str) -> None:
        self.sweep_dir = sweep_dir

    def __call__(self, points_json: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            return self._run(points_json)
        finally:
            leave_objects_to_the_exit()

    def _run(self, points_json: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from harness.extras import require_run_extra

        require_run_extra("a submitted job")
        from harness.backends.limit import job_limit, run_limited
        from harness.config.plan import Point
        from harness.execution.dist import destroy_process_group, point_port, rank_environment, with_port

        _job_logging()
        _threads_from_allocation()
        job_env = rank_environment()
        sweep_dir = Path(self.sweep_dir)
        ended = []
        for n, data in enumerate(points_json, 1):
            point = Point.from_json(data)
            # A port a point: every rank counts the same points in the same order, so they agree.
            env = job_env
            if job_env.distributed:
                env = with_port(job_env, point_port(job_env.master_port, n - 1))
            log.info(
                "[%d/%d] point %s on %s, rank %d of %d",
                n,
                len(points_json),
                point.id,
                env.hostname,
                env.rank,
                env.world_size,
            )
            try:
                outcome = run_limited(point, sweep_dir, env, job_limit(point, sweep_dir), timer=True)
                broke = _out_of_step(outcome, point.id, env) if env.distributed else ""
            except Terminated:
                end_as_terminated()  # the points after it too are measured again on resume
            finally:
                destroy_process_group()
            ended.append({"point_id": point.id, "rank": env.rank, "ok": outcome.ok, "failed": outcome.failed})
            if broke:
                say_broken(point.id, env.rank, broke, later=len(points_json) - n)
                break
        return ended


def _out_of_step(outcome: Any, point_id: str, env: Any) -> str:
    """Why the job's ranks cannot go on together to its next point, "" where they can: the
    point's process group broke, or a rung failed here while another rank may still wait for
    this one in a collective, which only this rank's connections closing ends
    (harness.execution.peer_failure). Where every rank failed (a data set broken on all), none
    waits: the job goes on. Asked before the group is left: the store is the group's."""
    from harness.execution import peer_failure

    broke: str = outcome.group_broke()
    if broke:
        return broke
    failure: str = outcome.first_failure()
    if not failure:
        return ""
    peer_failure.told(point_id, env.rank, failure)  # marks this rank (again: idempotent)
    return "" if peer_failure.every_rank_failed(point_id, env.world_size) else failure


def say_broken(point_id: str, rank: int, error: str, *, later: int) -> None:
    """The point's process group broke on this rank, which ends here (harness/backends/ranks.py):
    said where, for the controller, which ends the other ranks, and for run_local, which runs
    the `later` points in a fresh job."""
    import submitit

    from harness.backends.ranks import Broke, say_broke
    from harness.execution.point import GROUP_BROKE

    job = submitit.JobEnvironment()
    what = "its process group broke on" if any(w in error for w in GROUP_BROKE) else "failed first on"
    log.warning(
        "point %s: %s rank %d (%s); the job ends here%s",
        point_id,
        what,
        rank,
        error[:200],
        f", and its {later} later point(s) run in a fresh job" if later else "",
    )
    say_broke(job.paths.folder, str(job.job_id), Broke(rank, point_id, error))


def end_as_terminated() -> NoReturn:
    """End the rank as the SIGTERM it took would have (exit -15 to its parent), once the point
    has ended its workers: not a failure of its own, so the local backend writes no failed row
    for what it had not measured (harness/backends/ranks.py) and a resume measures it."""
    import os
    import signal

    from harness.execution.dist import destroy_process_group

    destroy_process_group()
    logging.shutdown()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
    raise SystemExit(128 + signal.SIGTERM)  # not reached: the signal ends the process


def _threads_from_allocation() -> None:
    """As many intra-op threads as cores the task was given (--cpus-per-task), not as many as
    the node has: eight ranks of a node each spawning a thread per core oversubscribe it and
    slow every step (the usual OMP_NUM_THREADS advice, applied for the user)."""
    import os

    import torch

    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if cpus and cpus.isdigit() and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(int(cpus))


def _job_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname).1s %(message)s", stream=sys.stderr
        )
