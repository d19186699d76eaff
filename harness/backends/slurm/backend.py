"""Sweeps on Slurm through submitit: one job array per submission and size, one point per
array task. An array's tasks share one size (submitit's executor renders one set of sbatch
parameters for a batch: `update_parameters`, then `batch()`), so where sizes are an axis
(`slurm.nodes: [1, 2]`) each size is an array of its own.

The spec's `slurm` section becomes the keyword arguments of submitit's sbatch renderer
(harness/backends/slurm/sbatch.py); the jobs' states come from sacct and squeue
(harness/backends/slurm/queue.py).
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from harness.backends.base import Backend, BackendRefusal
from harness.backends.point_status import PointStatus
from harness.backends.slurm.queue import scheduler_states
from harness.backends.slurm.sbatch import job_folder, job_name, render_sbatch, sbatch_parameters
from harness.config.plan import Plan, Point
from harness.config.spec import Scale, SlurmConfig, Spec

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


@dataclass(frozen=True, slots=True)
class SlurmJobs:
    """The handle on a sweep's Slurm jobs (the Jobs protocol, harness/backends/base.py): they
    outlive this process; waiting follows the sweep (harness/backends/follow.py) until none of
    its jobs is live or every point has its results."""

    sweep_dir: Path
    ids: tuple[str, ...]
    backend: type[Backend]
    """The sweep's recorded backend, whose scheduler is asked (registry.recorded)."""
    detached: bool = True

    def wait(self) -> None:
        from harness.backends.follow import wait_for_sweep

        wait_for_sweep(self.sweep_dir, self.backend)


class SlurmBackend:
    """One job array per submission and size, one task per point, `slurm.nodes x tasks_per_node`
    ranks each (the Backend protocol, harness/backends/base.py). `harness submit` is this backend
    without waiting on its handle; `harness run --backend slurm` and `submit --wait` wait on it."""

    name: ClassVar[str] = "slurm"
    where: ClassVar[str] = "as Slurm jobs"
    again: ClassVar[str] = "resubmit"
    detached: ClassVar[bool] = True

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    @classmethod
    def check_machine(cls, verb: str) -> None:
        """Nothing: the jobs need PyTorch on the compute nodes, not here (a login node)."""

    def check(self, plan: Plan) -> None:
        """A throwaway render before anything is submitted: submitit rejects unknown options."""
        try:
            for scale in plan.spec.scale_axis():
                render_sbatch(
                    plan.spec.slurm.at(scale),
                    job_name(plan.spec.name),
                    Path("/tmp/check/%j"),
                    "true",
                    len(plan.points),
                )
        except ValueError as e:
            raise BackendRefusal(f"slurm: {str(e).splitlines()[0]}") from e

    def world_size(self, plan: Plan) -> int:
        return plan.spec.slurm.world_size

    def ranks(self, point: Point) -> int:
        return point.size(self.spec.slurm).world_size

    def submit(self, points: Sequence[Point], sweep_dir: Path) -> SlurmJobs:
        """One array per size, in the order the sizes first come, each after the one before
        (--dependency=afterany): a scaling sweep measures what a size's ranks get from a shared
        store, which a size running beside it would take its share of. Raises SubmissionError with
        sbatch's own words when it refuses an array (the arrays before it stay submitted, and
        recorded: `harness status` follows them)."""
        by_size: dict[Scale, list[Point]] = {}
        for p in points:
            by_size.setdefault(p.size(self.spec.slurm), []).append(p)
        ids: list[str] = []
        for scale, group in by_size.items():
            cfg = self.spec.slurm.at(scale)
            if ids:  # after the previous size's array: two sizes never share the storage at once
                after = ids[-1].split("_")[0]
                cfg = replace(cfg, extra={**cfg.extra, "dependency": f"afterany:{after}"})
            ids += submit_array(group, sweep_dir, cfg, job_name(self.spec.name))
        return SlurmJobs(sweep_dir, tuple(ids), type(self))

    def settle(
        self, statuses: Sequence[PointStatus], sweep_dir: Path, recorded: type[Backend]
    ) -> list[PointStatus]:
        """As they are: a live job is left alone (resume runs the others beside it)."""
        return list(statuses)

    def follow(self, sweep_dir: Path) -> SlurmJobs:
        return SlurmJobs(sweep_dir, (), type(self))

    @classmethod
    def states(cls, jobs: Sequence[str]) -> Mapping[str, object]:
        return scheduler_states(jobs) if jobs else {}
