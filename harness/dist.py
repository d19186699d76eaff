"""Who am I among the ranks: from torchrun's or Slurm's environment (submitit sets Slurm's)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    hostname: str = ""
    jobid: str = ""
    """Slurm's job id, `<array job>_<task>` inside an array; empty outside Slurm."""

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @staticmethod
    def from_environ(env: Mapping[str, str] | None = None) -> DistEnv:
        e = os.environ if env is None else env
        hostname = socket.gethostname()
        if "RANK" in e and "WORLD_SIZE" in e:  # torchrun, or set by a backend
            rank, world, local = int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", "0"))
        elif "SLURM_PROCID" in e and "SLURM_NTASKS" in e:
            rank, world = int(e["SLURM_PROCID"]), int(e["SLURM_NTASKS"])
            local = int(e.get("SLURM_LOCALID", "0"))
            hostname = e.get("SLURMD_NODENAME", hostname)
        else:
            rank, world, local = 0, 1, 0
        if "SLURM_ARRAY_JOB_ID" in e and "SLURM_ARRAY_TASK_ID" in e:
            jobid = f"{e['SLURM_ARRAY_JOB_ID']}_{e['SLURM_ARRAY_TASK_ID']}"
        else:
            jobid = e.get("SLURM_JOB_ID", "")
        return DistEnv(rank=rank, world_size=world, local_rank=local, hostname=hostname, jobid=jobid)
