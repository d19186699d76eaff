"""Points as local subprocesses through submitit's LocalExecutor, for machines without Slurm.

`tasks_per_node` processes per point are the ranks of one node: DDP over NCCL across the GPUs
of a multi-GPU workstation or cloud instance, or over gloo on the CPU. Points run one after
the other: concurrent points would share the cores and spoil each other's timings. The points
of a call (a pass of the sweep: harness.sweeps.run_points) run in one job, one after the other
in the same rank processes (harness.backends.job.PassJob): the ranks start once a pass, not
once a point a pass.

The GPUs: submitit's LocalExecutor sets the tasks' CUDA_VISIBLE_DEVICES to the GPUs it is
given (`visible_gpus`, the first `gpus_per_node` of them) and to "" when given none, which
hides every GPU. So the tasks get the first `slurm.gpus_per_node` of the GPUs this process
sees, every task all of them, and each rank takes the one of its local rank (dist.py), as on a
Slurm node. Points that cannot use a GPU (device: cpu) get none.

A point of N nodes (`slurm.nodes: [1, 2]`, sizes as an axis) runs its N × tasks_per_node ranks
here, as one job of emulated nodes: every rank reads at once, as on a cluster, but they share
this machine's cores, memory and filesystem (a node-local copy is one copy). The points of a
pass run one job per size, in the pass's order.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness.backends.base import BackendRefusal
from harness.backends.here import HereBackend
from harness.config.plan import Plan, Point
from harness.config.spec import Scale, SlurmConfig, Spec
from harness_schema import layout
from harness_schema.atomic import CannotWrite, named
from harness_schema.rows import point_complete

if TYPE_CHECKING:
    from harness.backends.ranks import Broke

log = logging.getLogger(__name__)


class LocalBackendError(BackendRefusal):
    """The spec asks the local backend for what this machine cannot give; nothing ran."""


def run_local(points: Sequence[Point], sweep_dir: Path, cfg: SlurmConfig) -> list[str]:
    """Run the points, each with its size's ranks (`emulated`), one job per run of points of
    one size (a pass of the sweep: PassJob, the ranks started once a job); return the points
    whose job crashed."""
    crashed: list[str] = []
    for scale, group in _by_size(points, cfg):
        crashed += _run_size(group, sweep_dir, emulated(cfg.at(scale)))
    return crashed


def emulated(cfg: SlurmConfig) -> SlurmConfig:
    """The nodes of a point as one local job: nodes × tasks_per_node tasks, nodes × gpus_per_node
    GPUs, on this one machine."""
    return replace(cfg, nodes=1, tasks_per_node=cfg.world_size, gpus_per_node=cfg.nodes * cfg.gpus_per_node)


def _by_size(points: Sequence[Point], cfg: SlurmConfig) -> list[tuple[Scale, list[Point]]]:
    """The points cut into runs of one size, in their order (a pass keeps its ABC order)."""
    runs: list[tuple[Scale, list[Point]]] = []
    for p in points:
        size = p.size(cfg)
        if runs and runs[-1][0] == size:
            runs[-1][1].append(p)
        else:
            runs.append((size, [p]))
    return runs


def _run_size(points: Sequence[Point], sweep_dir: Path, cfg: SlurmConfig) -> list[str]:
    """Run points of one size with `cfg.tasks_per_node` ranks, all in one job; return the
    points whose job crashed. A job that ends badly (a rank killed) is named on the point it
    was measuring, and the points after it run in a job of their own."""
    gpus = local_gpus(points, cfg)
    crashed: list[str] = []
    todo = list(points)
    while todo:
        job = _submit(todo, sweep_dir, cfg, gpus)
        failure = _wait(job)  # interrupted: the job is ended (_wait), then the interrupt goes on
        # The points the job left without a final row for each of their units, in its order.
        left = [
            p
            for p in todo
            if not point_complete(
                layout.point_dir(sweep_dir, p.id), p.rungs, p.measure.repeats, cfg.tasks_per_node
            )
        ]
        if not failure and not left:
            break
        broke = _broke_first(job, todo)
        point = next(p for p in todo if p.id == broke.point_id) if broke else left[0] if left else todo[-1]
        if not _ended_well(job, failure, point, sweep_dir, cfg.tasks_per_node, broke):
            crashed.append(point.id)
        # A broken process group: the points the job left after it, in a fresh job (new ranks).
        todo = [p for p in left if p.id != point.id] if broke else left[1:]
        if broke and todo:
            log.info("%d point(s) left run in a fresh job (new ranks, a new process group)", len(todo))
    return crashed


def _broke_first(job: Any, todo: Sequence[Point]) -> Broke | None:
    """Where the job's process group broke first (its ranks' broke files, ranks.py), if it did."""
    from harness.backends.ranks import broken

    order = {p.id: n for n, p in enumerate(todo)}
    found = [b for b in broken(job.paths.folder, str(job.job_id)) if b.point_id in order]
    return min(found, key=lambda b: (order[b.point_id], b.rank), default=None)


def _submit(points: Sequence[Point], sweep_dir: Path, cfg: SlurmConfig, gpus: tuple[int, ...]) -> Any:
    """One job that runs the points one after the other on every rank (PassJob)."""
    import submitit

    from harness.backends.job import PassJob
    from harness.backends.limit import GRACE_S, point_limit
    from harness.backends.ranks import RankExecutor
    from harness.execution.dist import TORCHRUN_VARIABLES
    from harness.storage.sweep import record_jobs

    # Each point within its own limit (its timer); the job's limit is the sum of theirs, and
    # at it the signal (SIGUSR2), the kill GRACE_S later. A point that timed out is never
    # requeued (max_num_timeout=0): it would hang again.
    seconds = sum(point_limit(p, cfg.time).seconds for p in points)
    executor = RankExecutor(folder=sweep_dir / "local" / "%j", max_num_timeout=0)
    executor.update_parameters(
        tasks_per_node=cfg.tasks_per_node,
        nodes=1,
        timeout_min=(seconds + GRACE_S) / 60,
        signal_delay_s=GRACE_S,
        gpus_per_node=len(gpus),
        visible_gpus=gpus,
    )
    ids = ", ".join(p.id for p in points)
    log.info("%d point(s) (%s) in one job: %d local task(s)", len(points), ids, cfg.tasks_per_node)
    # A shell started by torchrun or srun has RANK, MASTER_ADDR, SLURM_*...: the tasks
    # would inherit them, and they are not the tasks' (submitit's clean_env, for this case).
    try:
        with submitit.helpers.clean_env(extra_names=TORCHRUN_VARIABLES):
            job = executor.submit(PassJob(str(sweep_dir)), [p.to_json() for p in points])
    except OSError as e:  # submitit's own files (the job's pickle) on a full or read-only disk
        raise named(sweep_dir / "local", e) from None
    record_jobs(sweep_dir, list(points), [str(job.job_id)] * len(points), "local", process=True)
    return job


def _wait(job: Any) -> str:
    """Wait for the job: "" when it ended well, else its failure in one line. Interrupted
    (Ctrl-C, SIGTERM: harness.exits.Terminated), the job is ended first: a submitit local job
    outlives the process that submitted it, and would go on measuring, its stuck workers
    included, beside the `harness resume` the interrupt's line tells the user to run."""
    try:
        job.results()
    except KeyboardInterrupt:
        ended = end_job(int(job.job_id))
        log.info("job %s ended on interrupt: %d process(es)", job.job_id, ended)
        raise
    except Exception as e:
        # A rank that could not write (a full disk): the sweep stops with its one line, as
        # inline (cli.py), not a failure of the point and the next job on the same disk.
        fault = _cannot_write(job)
        if fault is not None:
            raise fault from None
        return str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__
    return ""


def _cannot_write(job: Any) -> CannotWrite | None:
    """The storage fault a rank of the job died of, where one did: any rank's (the job's own
    error is its first failed task's, which may be a peer's lost connection instead)."""
    for k in range(job.num_tasks):
        try:
            error = job.task(k).exception()
        except Exception:  # a task with no result (killed): nothing it said
            continue
        fault = CannotWrite.in_text(str(error)) if error is not None else None
        if fault is not None:
            return fault
    return None


def end_job(controller: int) -> int:
    """Kill a local job's controller and every process under it (its ranks, their DataLoader
    workers); how many. Its rows are whole (atomic writes); the units it had not written stay
    missing, for `harness resume`."""
    import psutil

    try:
        root = psutil.Process(controller)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for process in tree:
        try:
            process.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(tree, timeout=10)
    return len(tree)


def _ended_well(
    job: Any, failure: str, point: Point, sweep_dir: Path, world_size: int, broke: Broke | None = None
) -> bool:
    """False when a rank died outside run_point (killed: the OOM killer, kill -9) while the
    job measured `point`, after naming it on the console and in its rows
    (harness/backends/ranks.py), or when the job failed otherwise. `broke`: the job ended as
    `point`'s process group broke, which its rows say, with the ranks the job ended for it."""
    from harness.backends.ranks import ended_ranks, fail_dead_ranks

    ends = ended_ranks(job.paths.folder, str(job.job_id))
    lines = fail_dead_ranks(point, sweep_dir, ends, world_size, broke)
    for line in lines:
        log.error("point %s: %s", point.id, line)
    if failure and not lines and broke is None:  # its rows say nothing of it
        log.error("point %s: its job failed: %s", point.id, failure)
    return not (failure or lines)


def local_gpus(points: Sequence[Point], cfg: SlurmConfig) -> tuple[int, ...]:
    """The CUDA indices (as this process numbers them) to hand the tasks: the first
    `slurm.gpus_per_node` of those visible here, or none for points that cannot use one.
    `cfg`: a size as it runs here (`emulated`: N nodes' GPUs and ranks on this machine).

    Raises LocalBackendError, before anything runs, when the spec asks for more than the
    machine has, or for more ranks than GPUs (NCCL refuses two ranks on one GPU)."""
    devices = {p.workload.device for p in points}
    needs_gpu = "cuda" in devices
    if devices == {"cpu"}:
        return ()
    wanted = cfg.gpus_per_node
    if wanted == 0:
        if needs_gpu:
            raise LocalBackendError(
                "device cuda, but slurm.gpus_per_node is 0: the local backend gives its tasks the "
                "GPUs slurm.gpus_per_node asks for (all others are hidden from them)"
            )
        return ()
    visible = visible_gpu_indices()
    if not visible:
        if needs_gpu:
            raise LocalBackendError(f"device cuda, but no GPU is visible here ({_shown()})")
        return ()  # device auto on a machine without GPUs: the CPU, as inline
    if wanted > len(visible):
        raise LocalBackendError(
            f"slurm.gpus_per_node is {wanted}, but {len(visible)} GPU(s) are visible here "
            f"({_shown()}); set slurm.gpus_per_node to {len(visible)} or fewer"
        )
    if cfg.tasks_per_node > wanted:
        raise LocalBackendError(
            f"slurm.tasks_per_node is {cfg.tasks_per_node}, but slurm.gpus_per_node is {wanted}: "
            "NCCL needs a GPU of its own for every rank; set slurm.tasks_per_node to "
            f"{wanted} or fewer"
        )
    return tuple(visible[:wanted])


def visible_gpu_indices() -> list[int]:
    """The GPUs this process sees, by the index submitit writes into the tasks'
    CUDA_VISIBLE_DEVICES: this process's own CUDA_VISIBLE_DEVICES entries when it has one
    (so `CUDA_VISIBLE_DEVICES=2,3 harness run` runs on GPUs 2 and 3), else 0..count-1."""
    import torch

    count = torch.cuda.device_count()
    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    if shown is None:
        return list(range(count))
    entries = [e.strip() for e in shown.split(",") if e.strip()][:count]
    if not all(e.isdigit() for e in entries):
        # submitit takes integers only (its visible_gpus), so UUIDs cannot be passed on.
        raise LocalBackendError(
            f"CUDA_VISIBLE_DEVICES={shown!r} names GPUs by UUID; the local backend can pass GPUs "
            "to its tasks by index only (submitit's visible_gpus): use indices, or unset it"
        )
    return [int(e) for e in entries]


def _shown() -> str:
    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "CUDA_VISIBLE_DEVICES unset" if shown is None else f"CUDA_VISIBLE_DEVICES={shown!r}"


class LocalBackend(HereBackend):
    """`slurm.tasks_per_node` local subprocesses per node of a point (its nodes emulated here),
    one point at a time (the Backend protocol, harness/backends/base.py)."""

    name: ClassVar[str] = "local"

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def check(self, plan: Plan) -> None:
        """No GPU asked for that is not there, at any size (local_gpus)."""
        for scale, group in _by_size(plan.points, plan.spec.slurm):
            local_gpus(group, emulated(plan.spec.slurm.at(scale)))

    def world_size(self, plan: Plan) -> int:
        return plan.spec.slurm.world_size

    def ranks(self, point: Point) -> int:
        """Every rank of every node of the point, here (emulated nodes)."""
        return point.size(self.spec.slurm).world_size

    def run(self, points: Sequence[Point], sweep_dir: Path) -> None:
        """One pass of the points (the handle's passes: harness/backends/here.py)."""
        run_local(points, sweep_dir, self.spec.slurm)

    @classmethod
    def states(cls, jobs: Sequence[str]) -> Mapping[str, object]:
        return {}  # status looks at each job's own process (jobs.json's stamps)
