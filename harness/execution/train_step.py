"""One training step: copy to the device, forward, loss, backward, optimizer step.

Device choice and synchronisation live here too: they are the only GPU-specific calls of the
loop, kept thin so that everything else runs (and is tested) on the CPU.
"""

from __future__ import annotations

import logging
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


def choose_device(requested: str, local_rank: int = 0) -> torch.device:
    """`auto` takes a GPU when one is visible. A rank picks its GPU by local rank among the
    GPUs it can see: Slurm may hand out global indices (TaskPlugin=task/none), so never
    trust an index from the environment."""
    cuda = torch.cuda.is_available()
    if requested == "cpu" or (requested == "auto" and not cuda):
        global _said_cpu_fallback
        if requested == "auto" and not _said_cpu_fallback:
            _said_cpu_fallback = True
            log.info("device auto: no CUDA device visible, running on the CPU")
        return torch.device("cpu")
    if not cuda:
        raise DeviceError("device cuda requested, but torch.cuda.is_available() is False here")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def device_sync(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


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
        self.forward: Callable[..., Any] = torch.compile(self.model) if compile else self.model
        self.autocast, self.scaler = _precision(amp, device)
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
