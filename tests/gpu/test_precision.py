"""bf16, fp16 and torch.compile in the train step, on the GPU."""

from __future__ import annotations

import pytest
import torch

from harness.execution.train_step import TrainStep
from harness.workloads.models import toy_conv

pytestmark = pytest.mark.gpu


def batch(n: int = 16, side: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, 3, side, side).pin_memory(), torch.randint(0, 10, (n,)).pin_memory()


def trained(step: TrainStep, steps: int = 4) -> None:
    before = [p.detach().clone() for p in step.model.parameters()]
    for _ in range(steps):
        step(batch())
    torch.cuda.synchronize()
    assert all(torch.isfinite(p).all() for p in step.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_mixed_precision_runs_its_dtype_and_says_whether_it_syncs(amp: str, cuda0: torch.device) -> None:
    if amp == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16 (before Ampere)")
    step = TrainStep(toy_conv(num_classes=10, width=8, depth=2), cuda0, non_blocking=True, amp=amp)
    trained(step)
    inputs, _ = step.to_device(batch())
    with step.autocast():
        out = step.model(inputs)
    assert out.dtype == (torch.bfloat16 if amp == "bf16" else torch.float16)
    if amp == "fp16":
        assert step.scaler is not None and step.scaler.get_scale() > 0
        assert step.syncs_per_step == 1  # GradScaler's found-inf .item() in every step()
    else:
        assert step.scaler is None and step.syncs_per_step == 0


def test_compile_does_not_recompile_for_a_partial_last_batch(cuda0: torch.device) -> None:
    torch._dynamo.reset()
    step = TrainStep(toy_conv(num_classes=10, width=8, depth=2), cuda0, non_blocking=True, compile=True)
    step(batch(16))  # the compile: part of any warmup
    with torch._dynamo.config.patch(error_on_recompile=True):  # a recompile would raise here
        for n in (16, 5, 16):  # an epoch's partial last batch (drop_last: false) among full ones
            step(batch(n))
    torch.cuda.synchronize()
    assert step.uncompiled_steps == 1
    assert step.compiled_shape == (16, 3, 32, 32)
