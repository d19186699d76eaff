"""Sweeps on Slurm through submitit: one job array per submission, one point per array task.

The spec's `slurm` section becomes the keyword arguments of submitit's sbatch renderer
(harness/backends/slurm/sbatch.py); the jobs' states come from sacct and squeue
(harness/backends/slurm/queue.py).
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from harness.backends.base import BackendRefusal, no_announcement
from harness.backends.slurm.queue import scheduler_states
from harness.backends.slurm.sbatch import job_folder, job_name, render_sbatch, sbatch_parameters
from harness.config.plan import Plan, Point
from harness.config.spec import SlurmConfig, Spec

log = logging.getLogger(__name__)


class SubmissionError(RuntimeError):
    """sbatch refused the array; the message carries Slurm's own words."""


def submit_array(points: Sequence[Point], sweep_dir: Path, cfg: SlurmConfig, job_name: str) -> list[str]:
    """Submit one array (one task per point), record its jobs in the sweep's jobs.json (as the
    local backend records its own), and return the job ids, in the points' order."""
    import submitit
    from submitit.core.utils import FailedJobError, FailedSubmissionError

    from harness.backends.job import PointJob
    from harness.execution.dist import TORCHRUN_VARIABLES
    from harness.storage.sweep import record_jobs

    executor = submitit.SlurmExecutor(folder=job_folder(sweep_dir), max_num_timeout=3)
    executor.update_parameters(**sbatch_parameters(cfg, job_name))
    try:
        # A job submitted from a salloc or torchrun shell must not inherit that shell's ranks:
        # submitit's export would then raise (submitit.helpers.clean_env exists for this).
        with submitit.helpers.clean_env(extra_names=TORCHRUN_VARIABLES), executor.batch():
            jobs = [executor.submit(PointJob(str(sweep_dir)), p.to_json()) for p in points]
    except (FailedSubmissionError, FailedJobError, subprocess.CalledProcessError) as e:
        raise SubmissionError(f"sbatch refused the array: {_last_line(e)}") from e
    job_ids = [str(j.job_id) for j in jobs]
    record_jobs(sweep_dir, list(points), job_ids, "slurm")
    return job_ids


def _last_line(e: BaseException) -> str:
    text = str(getattr(e, "stderr", "") or e)
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(e).__name__


class SlurmBackend:
    """One job array per submission, one task per point, `slurm.nodes x tasks_per_node` ranks
    each (the Backend protocol, harness/backends/base.py). `harness submit` is this backend
    without waiting; `harness run --backend slurm` and `submit --wait` follow the jobs."""

    name: ClassVar[str] = "slurm"
    here: ClassVar[bool] = False

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def check(self, plan: Plan) -> None:
        """A throwaway render before anything is submitted: submitit rejects unknown options."""
        try:
            render_sbatch(
                plan.spec.slurm, job_name(plan.spec.name), Path("/tmp/check/%j"), "true", len(plan.points)
            )
        except ValueError as e:
            raise BackendRefusal(f"slurm: {str(e).splitlines()[0]}") from e

    def world_size(self, plan: Plan) -> int:
        return plan.spec.slurm.world_size

    def run(
        self,
        points: Sequence[Point],
        sweep_dir: Path,
        *,
        announce: Callable[[Sequence[str]], None] = no_announcement,
    ) -> None:
        from harness.backends.follow import wait_for_sweep

        announce(self.submit(points, sweep_dir))
        wait_for_sweep(sweep_dir, type(self))

    def submit(self, points: Sequence[Point], sweep_dir: Path) -> list[str]:
        """Raises SubmissionError with sbatch's own words when it refuses the array."""
        return submit_array(list(points), sweep_dir, self.spec.slurm, job_name(self.spec.name))

    @classmethod
    def states(cls, jobs: Sequence[str]) -> Mapping[str, object]:
        return scheduler_states(jobs) if jobs else {}
