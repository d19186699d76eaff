"""Who am I among the ranks, the GPU that is mine, and the process group that joins us.

The environment is read from submitit (its JobEnvironment, under `harness submit`, the local
backend and a standalone sbatch script), from torchrun's variables (`torchrun -m
harness.backends.worker`), or from Slurm's (srun starting one task per rank). The hostname is
Slurm's node name where there is one: on a cluster that is what users know the nodes by.

Before the process group is joined, every rank makes its own GPU the current device
(`torch.cuda.set_device`) and names it to `init_process_group(device_id=...)`: otherwise every
rank's current device stays 0, and the DataLoader's pin-memory thread, object collectives and
NCCL's barrier all put a context on GPU 0 from every rank (pytorch#58626).
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import socket
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from harness.execution import waiting
from harness_schema.settings import DEFAULT_DIST_TIMEOUT_S

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

TIMEOUT_VARIABLE = "HARNESS_DIST_TIMEOUT_S"
"""Overrides the spec's limits.dist_timeout_s where set (test suites shorten every wait)."""

# What torchrun (torch.distributed.elastic's local agent) sets in every worker's environment,
# besides MASTER_ADDR/MASTER_PORT. A job submitted from a torchrun shell must not inherit them:
# the backends hand them to submitit's clean_env() around submission.
TORCHRUN_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE",
)


JOB_PORTS = range(20000, 32768)
"""Where a job's rendezvous port (MASTER_PORT) is drawn from its job id, so that every rank
agrees on it without talking: below Linux's ephemeral range (32768-60999 by default), where
any outgoing connection of the node may hold a port at that moment. submitit's own draw,
20000-60000, mostly falls inside it, and the master's TCPStore then fails with EADDRINUSE (a
resubmitted point of this project's Slurm tests did)."""


def job_port(job_id: str) -> int:
    """The rendezvous port of the job `job_id` (its array task's id: 294_0)."""
    return JOB_PORTS[zlib.crc32(job_id.encode()) % len(JOB_PORTS)]


def point_port(port: int, n: int) -> int:
    """The rendezvous port of the n-th point (from 0) of a job that runs several points in the
    same rank processes (the local backend's PassJob): the job's port moved n places within
    JOB_PORTS. Each point's group gets a port and a TCPStore of its own: a group destroyed and
    made again on the same port in the same process did not meet (gloo's connectFullMesh timed
    out after 200 s on every point but the first: the ranks' stores were not the one server)."""
    return JOB_PORTS.start + (port - JOB_PORTS.start + n) % len(JOB_PORTS)


def with_port(env: DistEnv, port: int) -> DistEnv:
    """`env` with its rendezvous on `port`, exported as MASTER_PORT (what env:// reads, and what
    a script point's ranks are given)."""
    os.environ["MASTER_PORT"] = str(port)
    return replace(env, master_port=port)


@dataclass(frozen=True, kw_only=True, slots=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int | None = None
    """Ranks on this node; None where nobody said (then only `local_rank` is checked)."""
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
        local_world: int | None
        if "RANK" in e and "WORLD_SIZE" in e:  # torchrun, or exported by submitit below
            rank, world, local = int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", "0"))
            local_world = int(e["LOCAL_WORLD_SIZE"]) if "LOCAL_WORLD_SIZE" in e else None
        elif "SLURM_PROCID" in e and "SLURM_NTASKS" in e:
            rank, world = int(e["SLURM_PROCID"]), int(e["SLURM_NTASKS"])
            local = int(e.get("SLURM_LOCALID", "0"))
            local_world = slurm_tasks_on_node(e)
        else:
            rank, world, local, local_world = 0, 1, 0, 1
        if "SLURM_ARRAY_JOB_ID" in e and "SLURM_ARRAY_TASK_ID" in e:
            jobid = f"{e['SLURM_ARRAY_JOB_ID']}_{e['SLURM_ARRAY_TASK_ID']}"
        else:
            jobid = e.get("SLURM_JOB_ID", "")
        return DistEnv(
            rank=rank,
            world_size=world,
            local_rank=local,
            local_world_size=local_world,
            hostname=hostname,
            jobid=jobid,
            master_addr=e.get("MASTER_ADDR", ""),
            master_port=int(e.get("MASTER_PORT", "0") or 0),
        )


def slurm_tasks_on_node(e: Mapping[str, str]) -> int | None:
    """Tasks of the step on this node: SLURM_TASKS_PER_NODE ("2(x3),1": three nodes of two,
    then one of one) at index SLURM_NODEID; None when Slurm does not say."""
    per_node: list[int] = []
    for part in e.get("SLURM_TASKS_PER_NODE", "").split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if match is None:
            return None
        per_node += [int(match[1])] * int(match[2] or 1)
    node = int(e.get("SLURM_NODEID", "0") or 0)
    return per_node[node] if node < len(per_node) else None


def rank_environment() -> DistEnv:
    """This rank's environment, whoever started it.

    A submitit job (SUBMITIT_EXECUTOR is set: `harness submit`, the local backend, a script of
    `harness sbatch`) takes submitit's ranks: a RANK in its environment was inherited from the
    shell that submitted it. Else an env:// launcher's ranks (torchrun: RANK, WORLD_SIZE,
    LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Else an srun task takes Slurm's
    ranks through submitit, as a `harness sbatch` script does. Else one rank.
    """
    e = os.environ
    if e.get("SUBMITIT_EXECUTOR"):
        return environment_in_job()
    if "RANK" in e and "WORLD_SIZE" in e:
        return DistEnv.from_environ()
    if "SLURM_PROCID" in e and "SLURM_NTASKS" in e and "SLURM_JOB_ID" in e:
        e["SUBMITIT_EXECUTOR"] = "slurm"  # what the scripts of `harness sbatch` export
        return environment_in_job()
    return DistEnv.from_environ()


def environment_in_job() -> DistEnv:
    """The rank's environment inside a submitit job (Slurm or local), exported for env://.

    Also right for a standalone sbatch script rendered by `harness sbatch`: it exports
    SUBMITIT_EXECUTOR=slurm, so submitit reads the ranks from Slurm's variables. The master is
    the job's first node; the port is derived from the job id (job_port), so every task agrees
    on it and the array's tasks that share a node do not collide.
    """
    import submitit

    job = submitit.JobEnvironment()
    port = str(job_port(str(job.job_id)))
    stale = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE") if k in os.environ]
    if os.environ.get("MASTER_PORT", port) != port:
        stale.append("MASTER_PORT")
    if stale:
        # A job submitted with sbatch from a torchrun or srun shell inherits that shell's ranks
        # and port (sbatch exports the submitting environment). submitit's export refuses to
        # overwrite the ranks unless told, and they are wrong here. An inherited port is wrong
        # too: every task of an array would get it, and two that share a node would collide.
        log.warning(
            "ignoring %s inherited from the shell that submitted this job: "
            "submitit's ranks and the job's own port are used",
            ", ".join(f"{k}={os.environ[k]}" for k in stale),
        )
    os.environ["MASTER_PORT"] = port
    submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    base = DistEnv.from_environ()
    hostname = os.environ.get("SLURMD_NODENAME") or job.hostname
    return DistEnv(
        rank=job.global_rank,
        world_size=job.num_tasks,
        local_rank=job.local_rank,
        local_world_size=job.num_tasks // max(1, job.num_nodes),
        hostname=hostname,
        jobid=base.jobid,
        master_addr=os.environ["MASTER_ADDR"],
        master_port=int(os.environ["MASTER_PORT"]),
    )


def process_group_arguments(
    env: DistEnv, device: torch.device | str, timeout_s: float = DEFAULT_DIST_TIMEOUT_S
) -> dict[str, Any]:
    """The keyword arguments of torch.distributed.init_process_group for this rank: gloo on
    the CPU, NCCL on CUDA with the rank's GPU as `device_id` (eager communicator set-up: a
    GPU problem shows here, not in the first all-reduce). `timeout_s`: how long a rank waits
    for the others in a collective (limits.dist_timeout_s; HARNESS_DIST_TIMEOUT_S wins)."""
    import inspect

    import torch
    import torch.distributed as dist

    device = torch.device(device)
    timeout = datetime.timedelta(seconds=dist_timeout_s(timeout_s))
    arguments: dict[str, Any] = {
        "backend": "nccl" if device.type == "cuda" else "gloo",
        "init_method": "env://",
        "rank": env.rank,
        "world_size": env.world_size,
        "timeout": timeout,
    }
    # device_id came with torch 2.3; read the signature rather than the version string.
    if device.type == "cuda" and "device_id" in inspect.signature(dist.init_process_group).parameters:
        arguments["device_id"] = torch.device("cuda", device.index if device.index is not None else 0)
    return arguments


def dist_timeout_s(spec_s: float) -> float:
    """The collective timeout in force: the spec's, or HARNESS_DIST_TIMEOUT_S where set."""
    return float(os.environ.get(TIMEOUT_VARIABLE, spec_s))


def init_process_group(
    env: DistEnv, device: torch.device | str, timeout_s: float = DEFAULT_DIST_TIMEOUT_S
) -> None:
    """Bind this rank to its GPU, then join the point's process group (when there are ranks
    to join). `device` is the rank's device, or its type ("cuda": the GPU of the local rank).

    Raises DeviceError on every rank, before any DDP set-up, when a node has more ranks than
    GPUs (NCCL refuses two ranks on one GPU); warns when it leaves GPUs idle."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        from harness.execution.device import gpu_index

        index = gpu_index(env.local_rank, env.local_world_size, torch.cuda.device_count())
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
    if not env.distributed:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        return
    arguments = process_group_arguments(env, device, timeout_s)
    if arguments["backend"] == "nccl":
        # When a rank fails, NCCL's watchdog times the others out. Its default (3, SkipCleanUp)
        # then kills them, so they write no row for the rungs after it; 2 (CleanUpOnly) aborts
        # the communicators and lets the collective raise, so each rank records its failed
        # rungs and its timeline (ProcessGroupNCCL.hpp, ErrorHandlingMode). A user's own
        # setting is kept.
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2")
    log.info(
        "rank %d/%d joining %s process group at %s:%d",
        env.rank,
        env.world_size,
        arguments["backend"],
        env.master_addr,
        env.master_port,
    )
    dist.init_process_group(**arguments)
    waiting.watch(env.rank, env.world_size, arguments["timeout"].total_seconds())


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
        # "cuda" is the current device: this rank's own GPU since init_process_group.
        vote = torch.tensor([1 if flag else 0], device="cuda" if device_type == "cuda" else "cpu")
        dist.all_reduce(vote, op=dist.ReduceOp.MIN)
        return bool(vote.item())

    return waiting.watched("the warmup's all-reduce", agree)


def largest(env: DistEnv, device_type: str) -> Callable[[int], int]:
    """A function that turns this rank's count into the ranks' largest (the delivery period the
    window is rounded to: every rank measures as many steps). A collective, as `agreement`."""
    if not env.distributed:
        return lambda count: count
    import torch
    import torch.distributed as dist

    def most(count: int) -> int:
        vote = torch.tensor([count], device="cuda" if device_type == "cuda" else "cpu")
        dist.all_reduce(vote, op=dist.ReduceOp.MAX)
        return int(vote.item())

    return waiting.watched("the warmup's all-reduce", most)


def barrier(env: DistEnv) -> Callable[[], None]:
    """Every rank waits here for the others (so that their measured windows coincide)."""
    if not env.distributed:
        return lambda: None
    import torch.distributed as dist

    def wait() -> None:
        dist.barrier()

    return waiting.watched("the barrier before a window", wait)
