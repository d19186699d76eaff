from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from harness.execution.device import (
    DeviceError,
)
from harness.execution.train_step import StepError, StepParts, TrainStep, own_loss
from harness.workloads.contract import Normalization
from harness.workloads.fake_cifar import FakeCIFAR
from harness.workloads.models import linear, toy_conv
from tests.fixtures import pipelines

CPU = torch.device("cpu")


def batch(n: int = 4, side: int = 8, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.randint(0, 256, (n, 3, side, side)).to(dtype)
    return images, torch.randint(0, 10, (n,))


def test_a_step_updates_the_weights() -> None:
    step = TrainStep(linear(num_classes=10), CPU, non_blocking=False)
    before = [p.detach().clone() for p in step.model.parameters()]
    step(batch())
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    assert step.input_shapes == {(3, 8, 8)}  # the batch dimension aside


def test_zero_grad_follows_set_to_none(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    for wanted in (False, True):
        step = TrainStep(linear(num_classes=10), CPU, non_blocking=False, set_to_none=wanted)
        monkeypatch.setattr(step.optimizer, "zero_grad", lambda set_to_none: seen.append(set_to_none))
        step(batch())
    assert seen == [False, True]


def test_gpu_normalize_takes_uint8_and_normalises_after_the_copy() -> None:
    ds = FakeCIFAR(size=4, image_size=8, resize=None)
    reference = ds[0][0]
    normalization = ds.to_uint8()
    raw = ds[0][0]
    assert raw.dtype == torch.uint8  # a quarter of the bytes to copy
    assert torch.allclose(normalization(raw.unsqueeze(0))[0], reference, atol=1e-6)
    step = TrainStep(linear(num_classes=10), CPU, non_blocking=False, normalize=normalization)
    inputs, _ = step.to_device((raw.unsqueeze(0), torch.tensor([1])))
    assert inputs.dtype == torch.float32


def test_gpu_normalize_refuses_float_batches() -> None:
    with pytest.raises(
        TypeError, match=r"gpu_normalize expects uint8 batches from the loader, got torch\.float32"
    ):
        Normalization((0.5,), (0.5,))(torch.zeros(1, 1, 2, 2))


def test_channels_last_applies_to_model_and_inputs() -> None:
    step = TrainStep(toy_conv(num_classes=10, width=4, depth=1), CPU, non_blocking=False, channels_last=True)
    conv = next(m for m in step.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    inputs, _ = step.to_device(batch())
    assert inputs.is_contiguous(memory_format=torch.channels_last)
    step(batch())


def test_bf16_autocast_computes_in_bf16_on_the_cpu_and_fp16_is_refused() -> None:
    step = TrainStep(toy_conv(num_classes=10, width=4, depth=1), CPU, non_blocking=False, amp="bf16")
    conv = next(m for m in step.model.modules() if isinstance(m, torch.nn.Conv2d))
    seen: list[torch.dtype] = []
    conv.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    before = [p.detach().clone() for p in step.model.parameters()]
    step(batch())
    assert seen == [torch.bfloat16]  # the convolution ran under autocast, in bf16
    assert all(p.dtype == torch.float32 for p in step.model.parameters())  # fp32 master weights
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    with pytest.raises(DeviceError, match="amp fp16 needs a CUDA device; on the CPU use amp: bf16"):
        TrainStep(linear(num_classes=10), CPU, non_blocking=False, amp="fp16")


class RecordingCompile:
    """torch.compile's stand-in: records its options and the shapes the compiled model sees."""

    def __init__(self) -> None:
        self.options: dict[str, object] = {}
        self.shapes: list[tuple[int, ...]] = []

    def __call__(self, model: torch.nn.Module, **options: object):
        self.options = options

        def compiled(inputs: torch.Tensor) -> torch.Tensor:
            self.shapes.append(tuple(inputs.shape))
            return model(inputs)

        return compiled


def test_compile_keeps_a_partial_last_batch_out_of_the_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = RecordingCompile()
    monkeypatch.setattr(torch, "compile", fake)
    step = TrainStep(linear(num_classes=10), CPU, non_blocking=False, compile=True)
    for n in (8, 8, 3, 8):  # an epoch's partial last batch (drop_last: false) between full ones
        step(batch(n))
    assert fake.options == {"dynamic": False}  # no switch to a dynamic-shape graph either
    assert fake.shapes == [(8, 3, 8, 8)] * 3  # no recompile for the 3-sample batch
    assert step.uncompiled_steps == 1


def test_without_compile_every_batch_runs_the_model() -> None:
    step = TrainStep(linear(num_classes=10), CPU, non_blocking=False)
    step(batch(3))
    assert step.compiled is None and step.uncompiled_steps == 0


def test_only_fp16_says_its_step_synchronises() -> None:
    for amp in (False, "bf16"):
        assert TrainStep(linear(num_classes=10), CPU, non_blocking=False, amp=amp).syncs_per_step == 0
    # fp16 (GradScaler: 1 sync per step) needs a GPU: tests/gpu/test_precision.py.


# --- batches of any structure, a user's loss and a user's step ---------------------------------


def dict_batch(n: int = 4, length: int = 5) -> dict[str, torch.Tensor]:
    return pipelines.pad_collate()(
        [{"input_ids": torch.arange(length), "label": torch.tensor(i % 2)} for i in range(n)]
    )


def user_step(model: torch.nn.Module | None = None, **parts: object) -> TrainStep:
    return TrainStep(model or pipelines.tiny_lm(), CPU, non_blocking=False, parts=StepParts(**parts))


def test_a_dict_batch_is_copied_whole_and_the_model_called_with_its_keys() -> None:
    step = user_step(loss=pipelines.output_loss())
    before = [p.detach().clone() for p in step.model.parameters()]
    on_device = step.to_device(dict_batch())
    assert set(on_device) == {"input_ids", "attention_mask", "labels"}
    step.compute(on_device)  # TinyLM.forward(input_ids=, attention_mask=, labels=) -> its loss
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    assert step.input_shapes == {((5,), (5,), ())}


def test_the_model_call_follows_the_batchs_shape() -> None:
    seen: list[object] = []

    class Echo(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x: object = None, **keys: object) -> object:
            seen.append(x if x is not None else sorted(keys))
            return x

    step = user_step(Echo())
    images = torch.zeros(2, 3)
    step.call_model(images)
    step.call_model((images, torch.zeros(2)))
    step.call_model([images, torch.zeros(2), "ids"])
    step.call_model({"a": images, "b": images})
    step.call_model("a user's batch type")
    assert seen[0] is images and seen[1] is images and seen[2] is images
    assert seen[3:] == [["a", "b"], "a user's batch type"]


class _LogitsOnly(torch.nn.Module):
    """A language model that returns its logits alone: no loss of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.lm = pipelines.tiny_lm()

    def forward(self, **batch: torch.Tensor) -> torch.Tensor:
        return self.lm(**batch)["logits"]


class _Carrying(torch.nn.Module):
    """Returns what Hugging Face models return: an object whose `.loss` is the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.lm = pipelines.tiny_lm()

    def forward(self, **batch: torch.Tensor) -> object:
        out = self.lm(**batch)
        return type("CausalLMOutput", (), {"loss": out["loss"], "logits": out["logits"]})()


@pytest.mark.parametrize("model", [pipelines.tiny_lm, _Carrying], ids=["mapping", "attribute"])
def test_with_no_loss_given_the_models_own_loss_is_trained_on(model: type) -> None:
    """Issue 30: a model that computes its loss (output["loss"] or output.loss) needs no loss
    factory: the step trains on it."""
    step = user_step(model())
    before = [p.detach().clone() for p in step.model.parameters()]
    step.compute(step.to_device(dict_batch()))
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))


def test_the_default_loss_needs_inputs_and_targets_and_says_what_to_give() -> None:
    step = user_step(_LogitsOnly())
    with pytest.raises(
        StepError,
        match=r"the default loss \(cross-entropy\) needs batches \(inputs, targets\), and the model's "
        r"output \(torch.Tensor\) carries no loss; this batch is a dict of input_ids, attention_mask, "
        r'labels: give workload.loss: "package.module:factory" .*, or a model whose output has .loss',
    ):
        step.compute(dict_batch())


def test_loss_model_insists_on_the_outputs_own_loss() -> None:
    step = user_step(_LogitsOnly(), loss=own_loss, names={"loss": "model"})
    with pytest.raises(
        StepError,
        match=r"workload.loss: model, but the model's output \(torch.Tensor\) carries no scalar loss",
    ):
        step.compute(dict_batch())


def test_a_loss_that_is_not_a_scalar_is_named() -> None:
    step = user_step(loss=pipelines.per_sample_loss(), names={"loss": "pkg.losses:per_sample"})
    with pytest.raises(
        StepError,
        match=r"loss 'pkg.losses:per_sample' returned a tensor of shape \(4,\), not a scalar tensor: "
        r"reduce it in loss_fn\(output, batch\)",
    ):
        step.compute(dict_batch())


def test_a_users_step_trains_the_harness_model_with_its_own_optimizer() -> None:
    factory = functools.partial(pipelines.adamw_step, accumulate=2)
    step = user_step(step=factory)
    assert step.optimizer is None  # the step's own AdamW, not the harness's SGD
    before = [p.detach().clone() for p in step.model.parameters()]
    step(dict_batch())
    assert all(torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    step(dict_batch())  # the second accumulated batch: the optimizer steps
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    assert step.user_step.calls == [2]  # type: ignore[union-attr]


def test_a_users_step_runs_under_autocast_when_amp_is_set() -> None:
    dtypes: list[torch.dtype] = []

    def factory(model: torch.nn.Module, *, device: torch.device):
        def run(batch: dict[str, torch.Tensor]) -> None:
            logits = model.head(model.embed(batch["input_ids"]).mean(1))  # type: ignore[operator]
            dtypes.append(logits.dtype)
            logits.float().sum().backward()

        return run

    TrainStep(pipelines.tiny_lm(), CPU, non_blocking=False, amp="bf16", parts=StepParts(step=factory))(
        dict_batch()
    )
    assert dtypes == [torch.bfloat16]


def test_a_step_without_backward_is_refused_and_one_that_clears_its_gradients_is_not() -> None:
    step = user_step(step=pipelines.forward_only_step, names={"step": "pkg.train:eval_only"})
    with pytest.raises(
        StepError,
        match=r"after step 'pkg.train:eval_only' ran, no parameter of the model had received a "
        r"gradient: the step must call backward\(\) on its loss",
    ):
        step(dict_batch())
    # adamw_step sets its gradients to None after the optimizer's step: still a training step.
    clears = user_step(step=pipelines.adamw_step)
    clears(dict_batch())
    assert all(p.grad is None for p in clears.model.parameters()) and clears.step_checked


def test_a_batch_with_no_tensor_names_the_collate() -> None:
    step = user_step(loss=pipelines.output_loss(), names={"collate": "pkg.data:to_strings"})
    with pytest.raises(
        StepError,
        match=r"the batch holds no tensor \(list\): collate 'pkg.data:to_strings' must return tensors",
    ):
        step.to_device(pipelines.no_tensor_collate()([1, 2]))
    with pytest.raises(StepError, match="PyTorch's default collate of the dataset's samples must return"):
        user_step().to_device(["a", "b"])


def test_samples_are_counted_by_the_users_function_where_given() -> None:
    assert user_step().count(dict_batch(3)) == 3  # the leading dimension its tensors share
    assert user_step(count=pipelines.count_labels).count(dict_batch(3)) == 3
    assert user_step(count=lambda batch: np.int64(5)).count(dict_batch(3)) == 5
    assert user_step(count=lambda batch: torch.tensor(6)).count(dict_batch(3)) == 6
    bad = user_step(count=lambda batch: "three", names={"batch_samples": "pkg.data:count"})
    with pytest.raises(StepError, match=r"batch_samples 'pkg.data:count' returned 'three', not a number"):
        bad.count(dict_batch())


def test_the_inputs_of_an_inputs_and_targets_batch_are_still_normalised_on_the_device() -> None:
    normalization = FakeCIFAR(size=2, image_size=8).to_uint8()
    step = TrainStep(linear(num_classes=10), CPU, non_blocking=False, normalize=normalization)
    inputs, targets, extra = step.to_device(
        (torch.zeros(2, 3, 8, 8, dtype=torch.uint8), torch.tensor([1, 2]), "ids")
    )
    assert inputs.dtype == torch.float32 and targets.tolist() == [1, 2] and extra == "ids"
    with pytest.raises(
        StepError, match=r"gpu_normalize needs batches \(uint8 images, targets\); this batch is a dict"
    ):
        TrainStep(linear(num_classes=10), CPU, non_blocking=False, normalize=normalization).to_device(
            dict_batch()
        )
