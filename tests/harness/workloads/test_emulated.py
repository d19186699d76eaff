"""The emulated accelerator: a step that takes step_ms of wall time and almost no CPU time."""

from __future__ import annotations

import time

import pytest
import torch

from harness.execution.train_step import TrainStep
from harness.workloads import registry
from harness.workloads.emulated import emulated


def test_a_step_takes_step_ms_of_wall_time_and_little_cpu_time() -> None:
    model = registry.resolve("emulated", registry.MODELS, "model")(num_classes=10, step_ms=50)
    batch = torch.rand(8, 3, 16, 16)
    model(batch).sum().backward()  # first-call costs (allocator, autograd set-up) aside
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(6):
        model(batch).sum().backward()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    assert 0.9 * 6 * 0.050 <= wall <= 3 * 6 * 0.050
    # A GPU step leaves the host's core free for the loader: the thread mostly sleeps.
    assert cpu < 0.2 * wall


@pytest.mark.parametrize("shape", [(4, 3, 8, 8), (4, 100), (4, 2, 5), (4, 1)])
def test_any_input_shape_trains(shape: tuple[int, ...]) -> None:
    model = emulated(num_classes=5, step_ms=1)
    before = [p.detach().clone() for p in model.parameters()]
    step = TrainStep(model, torch.device("cpu"), non_blocking=False)
    step((torch.rand(*shape), torch.randint(0, 5, (4,))))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_uint8_inputs_are_accepted() -> None:
    step = TrainStep(emulated(num_classes=3, step_ms=1), torch.device("cpu"), non_blocking=False)
    step((torch.randint(0, 255, (2, 3, 4, 4), dtype=torch.uint8), torch.tensor([0, 2])))


@pytest.mark.parametrize("bad", [0, -5, float("nan"), "fast", True])
def test_a_step_ms_not_above_zero_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="step_ms must be a number of milliseconds > 0"):
        emulated(num_classes=10, step_ms=bad)  # type: ignore[arg-type]
