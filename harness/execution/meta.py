"""What a result was measured on: host, CPUs, device, versions, Slurm ids, git commit."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

import harness
from harness.execution.dist import DistEnv
from harness.execution.train_step import device_name

SLURM_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_CPUS_PER_TASK",
    "SLURM_NTASKS",
    "SLURM_JOB_PARTITION",
)


def git_commit() -> str:
    """The harness's own commit (not the user's cwd), or "" outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(harness.__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def collect_meta(device: torch.device, env: DistEnv) -> dict[str, Any]:
    return {
        "hostname": env.hostname,
        "rank": env.rank,
        "world_size": env.world_size,
        "local_rank": env.local_rank,
        "jobid": env.jobid,
        "cpu_count": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "device": str(device),
        "device_name": device_name(device),
        "gpu_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "harness_version": harness.__version__,
        "git_commit": git_commit(),
        "slurm": {k: os.environ[k] for k in SLURM_VARIABLES if k in os.environ},
    }
