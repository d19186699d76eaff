"""Who am I among the ranks, and the process group that joins us.

The environment is read from submitit (its JobEnvironment, under `harness submit` and the
local backend), from torchrun's variables, or from Slurm's (a standalone sbatch script whose
srun starts one task per rank). The hostname is Slurm's node name where there is one: on a
cluster that is what users know the nodes by.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

# How long a rank waits for the others in a collective before giving up. A rank whose rung
# failed stops the point; the others then fail after this timeout instead of hanging for
# torch's default 30 minutes.
DEFAULT_TIMEOUT_S = 300


@dataclass(frozen=True, kw_only=True, slots=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    hostname: str = ""
    jobid: str = ""
    """Slurm's job id, `<array job>_<task>` inside an array; empty outside Slurm."""
    master_addr: str = ""
    master_port: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @staticmethod
    def from_environ(env: Mapping[str, str] | None = None) -> DistEnv:
        e = os.environ if env is None else env
        hostname = e.get("SLURMD_NODENAME") or socket.gethostname()
        if "RANK" in e and "WORLD_SIZE" in e:  # torchrun, or exported by submitit below
            rank, world, local = int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", "0"))
        elif "SLURM_PROCID" in e and "SLURM_NTASKS" in e:
            rank, world = int(e["SLURM_PROCID"]), int(e["SLURM_NTASKS"])
            local = int(e.get("SLURM_LOCALID", "0"))
        else:
            rank, world, local = 0, 1, 0
        if "SLURM_ARRAY_JOB_ID" in e and "SLURM_ARRAY_TASK_ID" in e:
            jobid = f"{e['SLURM_ARRAY_JOB_ID']}_{e['SLURM_ARRAY_TASK_ID']}"
        else:
            jobid = e.get("SLURM_JOB_ID", "")
        return DistEnv(
            rank=rank,
            world_size=world,
            local_rank=local,
            hostname=hostname,
            jobid=jobid,
            master_addr=e.get("MASTER_ADDR", ""),
            master_port=int(e.get("MASTER_PORT", "0") or 0),
        )


def environment_in_job() -> DistEnv:
    """The rank's environment inside a submitit job (Slurm or local), exported for env://.

    Also right for a standalone sbatch script rendered by `harness sbatch`: it exports
    SUBMITIT_EXECUTOR=slurm, so submitit reads the ranks from Slurm's variables. The master is
    the job's first node; the port is derived from the job id, so every task agrees on it.
    """
    import submitit

    submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
    job = submitit.JobEnvironment()
    base = DistEnv.from_environ()
    hostname = os.environ.get("SLURMD_NODENAME") or job.hostname
    return DistEnv(
        rank=job.global_rank,
        world_size=job.num_tasks,
        local_rank=job.local_rank,
        hostname=hostname,
        jobid=base.jobid,
        master_addr=os.environ["MASTER_ADDR"],
        master_port=int(os.environ["MASTER_PORT"]),
    )


def init_process_group(env: DistEnv, device_type: str) -> None:
    """gloo on the CPU, NCCL on CUDA; env:// from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE."""
    if not env.distributed:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        return
    timeout = datetime.timedelta(seconds=int(os.environ.get("HARNESS_DIST_TIMEOUT_S", DEFAULT_TIMEOUT_S)))
    backend = "nccl" if device_type == "cuda" else "gloo"
    log.info(
        "rank %d/%d joining %s process group at %s:%d",
        env.rank,
        env.world_size,
        backend,
        env.master_addr,
        env.master_port,
    )
    dist.init_process_group(
        backend=backend, init_method="env://", rank=env.rank, world_size=env.world_size, timeout=timeout
    )


def destroy_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def agreement(env: DistEnv, device_type: str) -> Callable[[bool], bool]:
    """A function that turns this rank's yes/no into the ranks' common answer: yes when every
    rank says yes. Each rank must call it the same number of times (it is a collective)."""
    if not env.distributed:
        return lambda flag: flag
    import torch
    import torch.distributed as dist

    def agree(flag: bool) -> bool:
        vote = torch.tensor([1 if flag else 0], device="cuda" if device_type == "cuda" else "cpu")
        dist.all_reduce(vote, op=dist.ReduceOp.MIN)
        return bool(vote.item())

    return agree


def barrier(env: DistEnv) -> Callable[[], None]:
    """Every rank waits here for the others (so that their measured windows coincide)."""
    if not env.distributed:
        return lambda: None
    import torch.distributed as dist

    def wait() -> None:
        dist.barrier()

    return wait
