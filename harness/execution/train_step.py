"""One training step: copy to the device, forward, loss, backward, optimizer step.

Device choice and synchronisation live here too: they are the only GPU-specific calls of the
loop, kept thin so that everything else runs (and is tested) on the CPU.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch import nn

from harness.workloads.contract import Normalization

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


class TrainStep:
    """Callable on a batch `(inputs, targets)`; owns the model, loss and optimizer."""

    def __init__(
        self,
        model: nn.Module,
        device: torch.device,
        *,
        non_blocking: bool,
        amp: str | bool = False,
        compile: bool = False,
        distributed: bool = False,
        channels_last: bool = False,
        set_to_none: bool = True,
        normalize: Normalization | None = None,
        lr: float = 0.001,
    ) -> None:
        self.device = device
        self.non_blocking = non_blocking
        self.set_to_none = set_to_none
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.normalize = normalize.on(device) if normalize is not None else None
        self.model = model.to(device).to(memory_format=self.memory_format)
        self.model.train()
        if distributed:
            # DDP across the ranks of the point: the gradient all-reduce is part of every step,
            # as in the training the benchmark stands for.
            from torch.nn.parallel import DistributedDataParallel

            self.model = DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None
            )
        self.criterion = nn.CrossEntropyLoss()
        # The optimiser of the reference scripts (001_*, 002_*).
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        # dynamic=False: torch's default (automatic dynamic shapes) recompiles at the first input
        # of another shape, inside the measured window, and then runs every batch, full ones
        # included, on the slower dynamic-shape graph. See `compute` for the other shapes.
        self.compiled: Callable[..., Any] | None = (
            torch.compile(self.model, dynamic=False) if compile else None
        )
        self.compiled_shape: tuple[int, ...] | None = None
        """The input shape the compiled graph was made for (the first batch's)."""
        self.uncompiled_steps = 0
        """Steps run eagerly because their input had another shape (a partial last batch)."""
        self.autocast, self.scaler = _precision(amp, device)
        self.syncs_per_step = 1 if self.scaler is not None else 0
        """Host-device synchronisations the step itself makes: fp16's GradScaler reads its
        found-inf flag with .item() in every step(); bf16 and fp32 make none. A step that
        syncs cannot overlap the next copy and next() with its kernels, so fp16 rows are not
        comparable with bf16 or fp32 rows on loading against compute."""
        self.input_shapes: set[tuple[int, ...]] = set()
        """Shapes seen since the last reset: inputs of varying size make cached rungs unrepresentative."""

    def to_device(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The copy call the course's chronometer times with next() (004_*)."""
        inputs, targets = batch[0], batch[1]
        inputs = inputs.to(self.device, non_blocking=self.non_blocking)
        targets = targets.to(self.device, non_blocking=self.non_blocking)
        if self.normalize is not None:
            inputs = self.normalize(inputs)  # uint8 in, float out: 4× less to copy (002_*, #4)
        if inputs.dim() == 4 and self.memory_format is torch.channels_last:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        return inputs, targets

    def __call__(self, batch: Any) -> None:
        self.compute(self.to_device(batch))

    def forward(self, inputs: torch.Tensor) -> Any:
        """The model on `inputs`: compiled for the shape of the first batch, eager for any other.

        With `drop_last: false` an epoch's last batch is smaller. Compiling its shape costs
        seconds once per process, and it lands inside a measured window as soon as the window
        crosses an epoch end; a user comparing drop_last true and false wants the steady
        state of each, not that one-off compile. So a batch of another shape runs uncompiled
        (counted in `uncompiled_steps`): every sample is still seen, and the full batches keep
        their static graph."""
        if self.compiled is None:
            return self.model(inputs)
        shape = tuple(inputs.shape)
        if self.compiled_shape is None:
            self.compiled_shape = shape
        if shape != self.compiled_shape:
            if self.uncompiled_steps == 0:
                log.info(
                    "compile: inputs of shape %s run uncompiled (the graph is for %s; no recompile "
                    "inside the window)",
                    shape,
                    self.compiled_shape,
                )
            self.uncompiled_steps += 1
            return self.model(inputs)
        return self.compiled(inputs)

    def compute(self, on_device: tuple[torch.Tensor, torch.Tensor]) -> None:
        """The step on a batch already on the device: forward, loss, backward, optimizer."""
        inputs, targets = on_device
        # The batch dimension aside: a partial last batch is not an input of another size.
        self.input_shapes.add(tuple(inputs.shape[1:]))
        with self.autocast():
            loss = self.criterion(self.forward(inputs), targets)
        self.optimizer.zero_grad(set_to_none=self.set_to_none)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()


def _precision(
    amp: str | bool, device: torch.device
) -> tuple[Callable[[], AbstractContextManager[Any]], Any]:
    if not amp:
        return nullcontext, None
    if amp == "fp16" and device.type != "cuda":
        raise DeviceError("amp fp16 needs a CUDA device; on the CPU use amp: bf16")
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    # fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none.
    scaler = torch.amp.GradScaler("cuda") if amp == "fp16" else None
    return (lambda: torch.autocast(device_type=device.type, dtype=dtype)), scaler
