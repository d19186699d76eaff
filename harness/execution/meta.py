"""What a result was measured on: host, CPUs, device, versions, Slurm ids, git commit.

For a GPU rank also which GPU exactly (UUID and PCI bus id, as NVML spells them: the same GPU
under every numbering) and where the rank's CPUs sit against it: the NUMA node of the GPU
(from sysfs) and those of the rank's allowed CPUs. A rank pinned to the far socket copies
through the inter-socket link, so pinned-copy speed and stragglers depend on it.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

import harness
from harness.execution.device import device_name
from harness.execution.dist import DistEnv
from harness.sampling.nvml import cuda_device_identity

SYSFS = Path("/sys")

SLURM_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_CPUS_PER_TASK",
    "SLURM_NTASKS",
    "SLURM_JOB_PARTITION",
)


def git_commit(where: Path | None = None) -> str:
    """The commit of the checkout holding `where` (a folder; by default the harness's own, not
    the user's cwd), or "" outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=where or Path(harness.__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def collect_meta(device: torch.device, env: DistEnv) -> dict[str, Any]:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return {
        "hostname": env.hostname,
        "rank": env.rank,
        "world_size": env.world_size,
        "local_rank": env.local_rank,
        "local_world_size": env.local_world_size,
        "jobid": env.jobid,
        "cpu_count": os.cpu_count(),
        "cpus_available": len(cpus) if cpus else None,
        "cpu_affinity": cpu_list_text(cpus),
        "cpu_numa_nodes": numa_nodes_of(cpus),
        "device": str(device),
        "device_name": device_name(device),
        **gpu_placement(device),
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


def gpu_placement(device: torch.device, sysfs: Path = SYSFS) -> dict[str, Any]:
    """The rank's GPU: its UUID, PCI bus id and NUMA node, and the current CUDA device (which
    must be the rank's own: see dist.py). Empty values on the CPU."""
    if device.type != "cuda":
        return {"gpu_uuid": "", "gpu_pci_bus_id": "", "gpu_numa_node": None, "cuda_current_device": None}
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid, pci = cuda_device_identity(index)
    return {
        "gpu_uuid": uuid or "",
        "gpu_pci_bus_id": pci or "",
        "gpu_numa_node": pci_numa_node(pci, sysfs) if pci else None,
        "cuda_current_device": torch.cuda.current_device(),
    }


def pci_numa_node(bus_id: str, sysfs: Path = SYSFS) -> int | None:
    """The NUMA node of a PCI device from sysfs, given NVML's bus id ("00000000:3B:00.0"; sysfs
    spells it "0000:3b:00.0"). None where the kernel does not know (-1) or there is no sysfs."""
    domain, _, rest = bus_id.partition(":")
    try:
        name = f"{int(domain, 16):04x}:{rest.lower()}"
        node = int((sysfs / "bus/pci/devices" / name / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def numa_nodes_of(cpus: list[int], sysfs: Path = SYSFS) -> list[int]:
    """The NUMA nodes holding any of `cpus` (from each node's cpulist in sysfs)."""
    nodes = []
    wanted = set(cpus)
    for path in sorted((sysfs / "devices/system/node").glob("node[0-9]*/cpulist")):
        try:
            members = parse_cpu_list(path.read_text())
        except (OSError, ValueError):
            continue
        if wanted & members:
            nodes.append(int(path.parent.name.removeprefix("node")))
    return sorted(nodes)


def parse_cpu_list(text: str) -> set[int]:
    """The kernel's CPU list ("0-3,8,10-11") as a set."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def cpu_list_text(cpus: list[int]) -> str:
    """Sorted CPUs in the kernel's compact form: [0, 1, 2, 3, 8] -> "0-3,8"."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)
