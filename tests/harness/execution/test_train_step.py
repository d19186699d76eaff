from __future__ import annotations

import pytest
import torch

from harness.execution.train_step import (
    DeviceError,
    TrainStep,
    choose_device,
    device_sync,
    peak_memory_gb,
    reset_peak_memory,
)
from harness.workloads.contract import Normalization
from harness.workloads.fake_cifar import FakeCIFAR
from harness.workloads.models import linear, toy_conv

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


def test_bf16_autocast_runs_on_the_cpu_and_fp16_is_refused() -> None:
    step = TrainStep(toy_conv(num_classes=10, width=4, depth=1), CPU, non_blocking=False, amp="bf16")
    step(batch())
    with pytest.raises(DeviceError, match="amp fp16 needs a CUDA device; on the CPU use amp: bf16"):
        TrainStep(linear(num_classes=10), CPU, non_blocking=False, amp="fp16")


def test_devices_without_a_gpu() -> None:
    assert choose_device("auto") == CPU
    assert choose_device("cpu", local_rank=3) == CPU
    if not torch.cuda.is_available():
        with pytest.raises(
            DeviceError, match=r"device cuda requested, but torch.cuda.is_available\(\) is False here"
        ):
            choose_device("cuda")
    device_sync(CPU)()  # a no-op on the CPU, and it must not fail


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


def test_peak_memory_reads_the_caching_allocator_of_the_rank_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda1 = torch.device("cuda", 1)
    reset: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset.append)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d: 2_500_000_000 if d == cuda1 else 0)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d: 4_000_000_000 if d == cuda1 else 0)
    reset_peak_memory(cuda1)
    assert reset == [cuda1]
    assert peak_memory_gb(cuda1) == (2.5, 4.0)
    reset_peak_memory(CPU)
    assert reset == [cuda1] and peak_memory_gb(CPU) == (None, None)
