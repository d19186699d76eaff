"""An emulated accelerator: a train step that holds the training thread for `step_ms` while
using no CPU core, as a step whose kernels run on a GPU does.

With it the input pipeline can be measured on a machine without a GPU (or with a GPU busy
elsewhere) against a realistic demand: the loader must deliver one batch every `step_ms`. The
step is a sleep, the way DLIO (the engine of MLPerf Storage) emulates compute; a sleep leaves
the cores to the loader's workers, as a GPU step does, where a CPU-burning model would compete
with them and understate what the loader can do. `step_ms` can be taken from a sweep that
measured `device_batch` on the real GPU node (see harness/config/step_source.py).

A tiny pooled linear head after the sleep gives the loss, backward, optimizer and DDP's
gradient all-reduce something real to work on, whatever the input's shape or structure: one
tensor, a dict of tensors passed as keywords (a tokenizer's `BatchEncoding`), or a list of
per-sample tensors (torchvision detection's images). So the stand-in serves every pipeline,
and its loss (`EmulatedAccelerator.loss`) needs no targets it could not use.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from harness.naming import type_name
from harness.workloads import registry

DEFAULT_STEP_MS = registry.EMULATED_STEP_MS
POOLED = 8
"""Features the head sees: every input is averaged down to this many values per sample."""
SAMPLED = 1024
"""At most this many of a sample's values are read: the head must stay nearly free on the CPU."""


class EmulatedAccelerator(nn.Module):
    """forward() sleeps `step_ms` once (one forward per train step), then a pooled linear head."""

    def __init__(self, *, num_classes: int, step_ms: float) -> None:
        super().__init__()
        self.step_s = step_ms / 1000
        self.head = nn.Linear(POOLED, num_classes)

    def forward(self, *inputs: Any, **named: Any) -> torch.Tensor:
        """Called as the harness calls any model (model(x), model(batch[0]), model(**batch)) or
        as a user's step calls it: the sleep comes first, whatever the inputs hold."""
        time.sleep(self.step_s)
        return self.head(features((*inputs, *named.values())))

    def loss(self, output: torch.Tensor, batch: Any) -> torch.Tensor:
        """The step's loss when the spec gives none: cross-entropy against the batch's targets
        where it has class indices (batch[1], one per sample), else the head's mean square, a
        loss only there to give backward, the optimizer and the all-reduce their work (a
        detection batch's target dicts or a text batch's labels mean nothing to this head)."""
        targets = batch[1] if isinstance(batch, (tuple, list)) and len(batch) >= 2 else None
        if (
            isinstance(targets, torch.Tensor)
            and targets.dim() == 1
            and len(targets) == len(output)
            and not targets.is_floating_point()
        ):
            # remainder, not a check against num_classes: no host-device sync in the step
            return F.cross_entropy(output, targets.long().remainder(output.shape[1]))
        return output.float().square().mean()


def features(inputs: Any) -> torch.Tensor:
    """(samples, POOLED) features of a model call's inputs: each batched tensor pooled per
    sample, each list of per-sample tensors pooled sample by sample, then averaged over the
    inputs that agree with the first on the number of samples (a mask, a token type)."""
    found = [f for x in inputs for f in _pooled_inputs(x)]
    if not found:
        given = ", ".join(type_name(x) for x in inputs)
        raise TypeError(
            f"the emulated model found no tensor in its inputs ({given}): "
            "give it a tensor, a dict of tensors or a list of per-sample tensors"
        )
    samples = found[0].shape[0]
    return torch.stack([f for f in found if f.shape[0] == samples]).mean(0)


def _pooled_inputs(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [pooled(x)] if x.dim() >= 1 else []
    if isinstance(x, Mapping):
        return [f for v in x.values() for f in _pooled_inputs(v)]
    if isinstance(x, (tuple, list)) and x and all(isinstance(t, torch.Tensor) for t in x):
        # Per-sample inputs (torchvision detection models take a list of images of any size).
        return [torch.cat([pooled(t.unsqueeze(0)) for t in x])]
    if isinstance(x, (tuple, list)):
        return [f for v in x for f in _pooled_inputs(v)]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [f for field in dataclasses.fields(x) for f in _pooled_inputs(getattr(x, field.name))]
    return []


def pooled(x: torch.Tensor) -> torch.Tensor:
    """(batch, POOLED) features from an input of any shape and dtype (images, spectra, tokens).

    Plain strided slicing and a mean, not adaptive_avg_pool1d: on a CPU whose cores are busy
    that op enters the intra-op thread pool even for a few hundred values and costs ~5 ms of
    CPU per call (measured on a loaded 2-core machine), which is the loader's CPU, not the GPU's.
    """
    flat = x.reshape(x.shape[0], -1)
    flat = flat[:, :: max(1, flat.shape[1] // SAMPLED)][:, :SAMPLED].float()
    if flat.shape[1] % POOLED:
        flat = F.pad(flat, (0, POOLED - flat.shape[1] % POOLED))
    return flat.reshape(x.shape[0], POOLED, -1).mean(2)


def emulated(*, num_classes: int, step_ms: float = DEFAULT_STEP_MS) -> nn.Module:
    """The `emulated` model: model_args {step_ms: 60} (milliseconds per train step)."""
    if isinstance(step_ms, bool) or not isinstance(step_ms, (int, float)):
        raise ValueError(f"step_ms must be a number of milliseconds > 0 (got {step_ms!r})")
    if not math.isfinite(step_ms) or step_ms <= 0:
        raise ValueError(f"step_ms must be a number of milliseconds > 0 (got {step_ms})")
    return EmulatedAccelerator(num_classes=num_classes, step_ms=float(step_ms))


@contextmanager
def one_host_thread(model: str) -> Iterator[None]:
    """For a point whose model is `emulated`: one intra-op thread in the training process
    while it measures, as a GPU step's host side is one thread launching kernels. With
    PyTorch's default (a thread per core) the head's tiny matmuls, backward and optimizer spin
    up the thread pool at every step and take the cores the workers need: measured on a
    loaded 2-core VM, 13.8 ms of the step with 2 threads against 0.74 ms with 1 (47 against
    1.4 at load 5), so a 40 ms emulated step measured 60 ms. Other models keep the threads
    the job gave them (backends/job.py)."""
    if model != "emulated":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
