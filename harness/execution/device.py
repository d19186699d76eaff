"""The device a rank trains on and its few GPU-specific calls: the choice (`choose_device`: auto,
cpu, cuda; the rank's GPU among those it sees, `gpu_index`), the synchronisation at a window's
edges, the peak memory, the device's name.

A concept apart from the train step (train_step.py), which runs on whatever device it is given:
these are the only calls of the loop that need a GPU, kept thin so that everything else runs
(and is tested) on the CPU.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)
_said_cpu_fallback = False  # "auto -> cpu" is said once per process, not once per point


class DeviceError(RuntimeError):
    """The requested device or precision cannot be used on this machine."""


def choose_device(requested: str, local_rank: int = 0, local_world_size: int | None = None) -> torch.device:
    """`auto` takes a GPU when one is visible. A rank picks its GPU by local rank among the
    GPUs it can see (`gpu_index`): Slurm may hand out global indices (TaskPlugin=task/none),
    so never trust an index from the environment."""
    cuda = torch.cuda.is_available()
    if requested == "cpu" or (requested == "auto" and not cuda):
        global _said_cpu_fallback
        if requested == "auto" and not _said_cpu_fallback:
            _said_cpu_fallback = True
            log.info("device auto: no CUDA device visible, running on the CPU")
        return torch.device("cpu")
    if not cuda:
        raise DeviceError("device cuda requested, but torch.cuda.is_available() is False here")
    return torch.device("cuda", gpu_index(local_rank, local_world_size, torch.cuda.device_count()))


_said_idle_gpus = False  # said once per process, by local rank 0


def gpu_index(local_rank: int, local_world_size: int | None, visible: int) -> int:
    """The GPU of local rank `local_rank` among the `visible` GPUs this process sees, when the
    node runs `local_world_size` ranks (None: not known).

    One rank per GPU: NCCL refuses two ranks on one GPU at DDP set-up, so more ranks than
    GPUs is a DeviceError here, on every rank, before any set-up; fewer ranks than GPUs is a
    warning naming the idle ones. A process that sees exactly one GPU while its node runs
    several ranks has been given its own (Slurm's --gpus-per-task or --gpu-bind, submitit's
    export): it takes that one. Unless CUDA_VISIBLE_DEVICES is unset, in which case the
    machine has one GPU for all its ranks.
    """
    ranks = max(local_world_size or 0, local_rank + 1)
    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible == 1 and (ranks == 1 or shown is not None):
        return 0
    if ranks > visible:
        raise DeviceError(
            f"{ranks} ranks on this node but {visible} GPU(s) visible to each "
            f"(CUDA_VISIBLE_DEVICES={'unset' if shown is None else repr(shown)}): NCCL needs a GPU "
            f"of its own for every rank; run at most {visible} rank(s) per node "
            "(slurm.tasks_per_node, or torchrun's --nproc-per-node) or give it more GPUs "
            "(slurm.gpus_per_node)"
        )
    global _said_idle_gpus
    if local_world_size is not None and ranks < visible and local_rank == 0 and not _said_idle_gpus:
        _said_idle_gpus = True
        idle = [f"cuda:{k}" for k in range(ranks, visible)]
        names = shown.split(",") if shown else []
        physical = f" (CUDA_VISIBLE_DEVICES entries {', '.join(names[ranks:visible])})" if names else ""
        log.warning(
            "%d of %d visible GPUs stay idle: %s%s; this node runs %d rank(s): set "
            "slurm.tasks_per_node (or torchrun's --nproc-per-node) to %d for one rank per GPU",
            len(idle),
            visible,
            ", ".join(idle),
            physical,
            ranks,
            visible,
        )
    return local_rank


def device_sync(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def reset_peak_memory(device: torch.device) -> None:
    """Start the caching allocator's peaks afresh (before a rung's window)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_gb(device: torch.device) -> tuple[float | None, float | None]:
    """(most allocated, most reserved) by this process on its GPU since the last reset, in
    decimal GB: what its tensors held, and what PyTorch's caching allocator took from the
    driver for them. NVML's memory `used` counts every context on the GPU besides (other
    ranks' stray contexts included), so these are the figures to compare between settings."""
    if device.type != "cuda":
        return None, None
    return (
        torch.cuda.max_memory_allocated(device) / 1e9,
        torch.cuda.max_memory_reserved(device) / 1e9,
    )


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return "cpu"
