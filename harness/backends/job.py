"""What a submitted job runs: one point, on every task (rank) of the job.

Also what `python -m harness.backends.worker` runs on each rank, whoever started it: a
submitit job, srun, or torchrun (`torchrun --nproc-per-node N -m harness.backends.worker SWEEP
--index K`); `rank_environment` reads the ranks from the one that did.

Checkpointable: when Slurm signals the time limit, submitit requeues the job with the same
arguments, and run_point goes on with the rungs not yet finished by every rank.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import submitit

log = logging.getLogger(__name__)


class PointJob(submitit.helpers.Checkpointable):
    def __init__(self, sweep_dir: str) -> None:
        self.sweep_dir = sweep_dir

    def __call__(self, point_json: dict[str, Any]) -> dict[str, Any]:
        from harness.extras import require_run_extra

        # A compute node without torch: the job's error (in its log)
        # names the extra to install, not an ImportError from deep inside the runner.
        require_run_extra("a submitted job")
        from harness.config.plan import Point
        from harness.execution.dist import destroy_process_group, rank_environment
        from harness.execution.runner import run_point

        _job_logging()
        _threads_from_allocation()
        env = rank_environment()
        point = Point.from_json(point_json)
        log.info("point %s on %s, rank %d of %d", point.id, env.hostname, env.rank, env.world_size)
        try:
            outcome = run_point(point, Path(self.sweep_dir), env=env)
        finally:
            destroy_process_group()
        return {"point_id": point.id, "rank": env.rank, "ok": outcome.ok, "failed": outcome.failed}


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
