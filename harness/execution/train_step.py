"""One training step: copy to the device, forward, loss, backward, optimizer step.

The device it runs on is chosen, synchronised and read elsewhere (device.py): the only
GPU-specific calls of the loop, kept thin so that everything else runs (and is tested) on the CPU.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from harness.execution import batches
from harness.execution.device import DeviceError
from harness.naming import type_name
from harness.workloads.contract import Normalization
from harness.workloads.emulated import EmulatedAccelerator

log = logging.getLogger(__name__)

LossFn = Callable[[Any, Any], Any]
"""loss_fn(model output, on-device batch) -> scalar tensor."""
StepFactory = Callable[..., Callable[[Any], None]]
"""factory(model, *, device) -> step_fn(on-device batch), the spec's step_args bound."""


class StepError(ValueError):
    """A step the harness cannot measure as given; the message says what to change."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepParts:
    """A user's loss or whole step and sample count, as built from the spec, with the names the
    spec gave them ({"loss": "pkg.mod:factory", "collate": ...}) for the error messages."""

    loss: LossFn | None = None
    step: StepFactory | None = None
    count: Callable[[Any], int] | None = None
    names: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.loss is not None and self.step is not None:
            raise StepError("give a loss or a step, not both: the step computes its own loss")


def output_loss(output: Any) -> torch.Tensor | None:
    """The loss a model's output carries (settings.OWN_LOSS: `output.loss`, or `output["loss"]`
    of a mapping or a ModelOutput), where it is a scalar tensor; else None
    (a plain tensor of logits, a loss of None when no labels were given)."""
    if isinstance(output, torch.Tensor):
        return None
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    return loss if isinstance(loss, torch.Tensor) and loss.dim() == 0 else None


def own_loss(output: Any, batch: Any) -> torch.Tensor:
    """`workload.loss: model`: the output's own loss, which it must carry."""
    loss = output_loss(output)
    if loss is None:
        raise StepError(
            f"workload.loss: model, but the model's output ({_described(output)}) carries no scalar "
            "loss (output.loss or output['loss']): give the batch its labels, or a loss factory"
        )
    return loss


class TrainStep:
    """Callable on a batch of any structure; owns the model, and the loss and optimizer unless a
    user's step does.

    The harness keeps what it must own to measure truly: the copy (`to_device`, timed with
    next() by the window), the DDP wrap, autocast and compile. With a user's step (`StepParts`)
    the model it gets is already on the device, wrapped in DDP under DDP and compiled where
    asked; the step does forward, loss, backward and optimizer, inside `torch.autocast` when
    amp is set (bf16; fp16's GradScaler would be the step's own, so fp16 is refused with one).
    """

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
        parts: StepParts = StepParts(),  # frozen, so one shared default is safe
    ) -> None:
        self.device, self.parts = device, parts
        self.stand_in = model if isinstance(model, EmulatedAccelerator) else None
        """The emulated accelerator, whose own loss serves any batch when the spec gives none."""
        self.non_blocking = non_blocking
        self.set_to_none = set_to_none
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.normalize = normalize.on(device) if normalize is not None else None
        self.model = _placed(model, device, self.memory_format, distributed)
        self.autocast, self.scaler = _precision(amp, device)
        if parts.step is not None and self.scaler is not None:
            raise StepError(
                f"amp fp16 with step {parts.names.get('step', '')!r}: loss scaling is the step's own; "
                "use amp: bf16, or autocast and a GradScaler in your step with amp: false"
            )
        self.syncs_per_step = 1 if self.scaler is not None else 0
        """Host-device synchronisations the step itself makes: fp16's GradScaler reads its
        found-inf flag with .item() in every step(); bf16 and fp32 make none. A step that
        syncs cannot overlap the next copy and next() with its kernels, so fp16 rows are not
        comparable with bf16 or fp32 rows on loading against compute."""
        self.compile = compile
        # dynamic=False: torch's default (automatic dynamic shapes) recompiles at the first input
        # of another shape, inside the measured window, and then runs every batch, full ones
        # included, on the slower dynamic-shape graph. See `forward` for the other shapes.
        self.compiled: Callable[..., Any] | None = (
            torch.compile(self.model, dynamic=False) if compile and parts.step is None else None
        )
        self.compiled_any: Callable[..., Any] | None = None
        """The model compiled for batches that are not one input tensor (made at first use)."""
        self.compiled_shape: tuple[int, ...] | None = None
        """The input shape the compiled graph was made for (the first batch's)."""
        self.uncompiled_steps = 0
        """Steps run eagerly because their input had another shape (a partial last batch)."""
        self.input_shapes: set[Any] = set()
        """Shapes seen since the last reset: inputs of varying size make cached rungs unrepresentative."""
        self.count = _counter(parts)
        """Samples in a batch: the user's batch_samples, else batches.count_samples."""
        self.user_step = self._user_step(parts)
        self.step_checked = self.batch_checked = False
        self.criterion = nn.CrossEntropyLoss()  # the default loss (Rand's articles)
        # The optimiser of the articles' scripts; a user's step has its own.
        self.optimizer = (
            torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9) if self.user_step is None else None
        )

    def _user_step(self, parts: StepParts) -> Callable[[Any], None] | None:
        if parts.step is None:
            return None
        name = parts.names.get("step", "")
        # The DDP-wrapped model compiled as a whole, the order PyTorch's DDP notes recommend.
        model = torch.compile(self.model) if self.compile else self.model
        try:
            made = parts.step(model, device=self.device)
        except Exception as e:
            raise StepError(f"step {name!r} failed to build: {type(e).__name__}: {e}") from e
        if not callable(made):
            raise StepError(f"step {name!r} returned {type_name(made)}, not a callable step_fn(batch)")
        return made

    def to_device(self, batch: Any) -> Any:
        """The copy call the course's chronometer times with next() (IDRIS-CNRS/DLO-JZ,
        Jour2/tp_dlojz_jour2/dlojz2_3.py): every tensor of
        the batch (batches.to_device). Where the batch is (inputs, targets, ...), the inputs
        are normalised on the device (gpu_normalize) and made channels-last (channels_last)."""
        if not self.batch_checked:
            self._check_batch(batch)
            self.batch_checked = True
        moved = batches.to_device(batch, self.device, non_blocking=self.non_blocking)
        if (self.normalize is not None or self.memory_format is torch.channels_last) and _pair(moved):
            inputs = moved[0]
            if self.normalize is not None:
                inputs = self.normalize(inputs)  # uint8 in, float out: 4× less to copy (Rand's step 4)
            if inputs.dim() == 4 and self.memory_format is torch.channels_last:
                inputs = inputs.contiguous(memory_format=torch.channels_last)
            rest = moved[1:]
            moved = (inputs, *rest) if isinstance(moved, tuple) else [inputs, *rest]
        return moved

    def _check_batch(self, batch: Any) -> None:
        """What the first batch must be for the step to measure anything, said once."""
        if not batches.leaves(batch) and not callable(getattr(batch, "to", None)):
            collate = self.parts.names.get("collate")
            maker = (
                f"collate {collate!r}" if collate else "PyTorch's default collate of the dataset's samples"
            )
            raise StepError(
                f"the batch holds no tensor ({type_name(batch)}): {maker} must return tensors "
                "(in a tensor, tuple, list, dict or dataclass, or a type with .to(device)) for the "
                "step to compute on"
            )
        if self.normalize is not None and not _pair(batch):
            raise StepError(
                f"gpu_normalize needs batches (uint8 images, targets); this batch is a "
                f"{type_name(batch)}: set gpu_normalize: false"
            )

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

    def call_model(self, batch: Any) -> Any:
        """The model on a batch, by the convention of docs/guides/own-workload.md: a tensor ->
        model(batch); a tuple or list -> model(batch[0]); a mapping -> model(**batch); anything
        else -> model(batch). Batches that are not one input tensor run on a graph compiled
        with automatic dynamic shapes (padded lengths vary from batch to batch)."""
        if isinstance(batch, torch.Tensor):
            return self.forward(batch)
        if isinstance(batch, (tuple, list)) and isinstance(batch[0], torch.Tensor):
            return self.forward(batch[0])
        model = self.model
        if self.compile:
            if self.compiled_any is None:
                self.compiled_any = torch.compile(self.model)
            model = self.compiled_any  # type: ignore[assignment]
        if isinstance(batch, (tuple, list)):
            return model(batch[0])
        if isinstance(batch, Mapping):
            return model(**batch)
        return model(batch)

    def compute(self, on_device: Any) -> None:
        """The step on a batch already on the device: forward, loss, backward, optimizer."""
        self.input_shapes.add(_shapes(on_device))
        if self.user_step is not None:
            self._run_user_step(on_device)
            return
        with self.autocast():
            output = self.call_model(on_device)
            loss = self._loss(output, on_device)
        assert self.optimizer is not None
        self.optimizer.zero_grad(set_to_none=self.set_to_none)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()

    def _loss(self, output: Any, batch: Any) -> torch.Tensor:
        if self.parts.loss is None:
            if self.stand_in is not None:
                return self.stand_in.loss(output, batch)
            return self._default_loss(output, batch)
        loss = self.parts.loss(output, batch)
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            shown = (
                f"a tensor of shape {tuple(loss.shape)}"
                if isinstance(loss, torch.Tensor)
                else type_name(loss)
            )
            raise StepError(
                f"loss {self.parts.names.get('loss', '')!r} returned {shown}, not a scalar tensor: "
                "reduce it in loss_fn(output, batch) (e.g. .mean())"
            )
        return loss

    def _default_loss(self, output: Any, batch: Any) -> torch.Tensor:
        """No loss given: the model's own where its output carries one (settings.OWN_LOSS),
        else cross-entropy on (inputs, targets)."""
        carried = output_loss(output)
        if carried is not None:
            return carried
        if not _pair(batch):
            raise StepError(
                f"the default loss (cross-entropy) needs batches (inputs, targets), and the model's "
                f"output ({_described(output)}) carries no loss; this batch is a {_described(batch)}: "
                'give workload.loss: "package.module:factory" (loss_fn(output, batch) -> scalar), or '
                "a model whose output has .loss (workload.loss: model)"
            )
        return self.criterion(output, batch[1])

    def _run_user_step(self, batch: Any) -> None:
        """The user's step under autocast (when amp is set). Its first run is watched: a step
        after which no parameter received a gradient trains nothing, and is said so."""
        assert self.user_step is not None
        if self.step_checked:
            with self.autocast():
                self.user_step(batch)
            return
        with _GradientWatch(self.model) as watch, self.autocast():
            self.user_step(batch)
        if watch.parameters and not watch.reached:
            raise StepError(
                f"after step {self.parts.names.get('step', '')!r} ran, no parameter of the model had "
                "received a gradient: the step must call backward() on its loss (and step its "
                "optimizer); without it the harness measures no training"
            )
        self.step_checked = True


class _GradientWatch:
    """Notes whether a backward pass accumulated a gradient into any parameter of `model`
    (a hook per parameter, removed on exit): robust to a step that sets its gradients to None
    after the optimizer's step."""

    def __init__(self, model: nn.Module) -> None:
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        self.reached = False
        self.handles: list[Any] = []

    def __enter__(self) -> _GradientWatch:
        self.handles = [p.register_post_accumulate_grad_hook(self._seen) for p in self.parameters]
        return self

    def _seen(self, _parameter: torch.Tensor) -> None:
        self.reached = True

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles:
            handle.remove()


def _placed(
    model: nn.Module, device: torch.device, memory_format: torch.memory_format, distributed: bool
) -> nn.Module:
    model = model.to(device).to(memory_format=memory_format)
    model.train()
    if not distributed:
        return model
    # DDP across the ranks of the point: the gradient all-reduce is part of every step, as in
    # the training the benchmark stands for.
    from torch.nn.parallel import DistributedDataParallel

    from harness.execution.waiting import watched

    # DDP's set-up broadcasts rank 0's weights: the first collective of a point, where a rank
    # still building its data set is waited for.
    wrap = watched("DDP's set-up (its weights' broadcast)", DistributedDataParallel)
    return wrap(model, device_ids=[device.index] if device.type == "cuda" else None)


def _pair(batch: Any) -> bool:
    """A batch shaped (inputs, targets, ...): a tuple or list whose first item is a tensor."""
    return isinstance(batch, (tuple, list)) and len(batch) >= 2 and isinstance(batch[0], torch.Tensor)


def _described(batch: Any) -> str:
    if isinstance(batch, Mapping):
        return f"{type_name(batch)} of {', '.join(map(str, list(batch)[:6]))}"
    return type_name(batch)


def _shapes(batch: Any) -> Any:
    """What tells two batches' inputs apart, the batch dimension aside (a partial last batch is
    not an input of another size): the first tensor's shape for (inputs, targets), else every
    tensor's."""
    if isinstance(batch, torch.Tensor):
        return tuple(batch.shape[1:])
    if _pair(batch):
        return tuple(batch[0].shape[1:])
    return tuple(tuple(t.shape[1:]) for _, t in batches.leaves(batch))


def _counter(parts: StepParts) -> Callable[[Any], int]:
    function = parts.count
    if function is None:
        return batches.count_samples
    name = parts.names.get("batch_samples", "")

    def count(batch: Any) -> int:
        n = function(batch)
        try:  # an int, a NumPy integer, a 0-d integer tensor
            samples = operator.index(n.item() if isinstance(n, torch.Tensor) and n.dim() == 0 else n)
        except TypeError:
            samples = -1
        if isinstance(n, bool) or samples < 0:
            raise StepError(f"batch_samples {name!r} returned {n!r}, not a number of samples (an int >= 0)")
        return samples

    return count


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
