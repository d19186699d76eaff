"""The emulated accelerator: a step that takes step_ms of wall time and almost no CPU time."""

from __future__ import annotations

import time

import pytest
import torch

from harness.execution.train_step import TrainStep
from harness.workloads import registry
from harness.workloads.emulated import emulated


def timed_steps(step_ms: float, steps: int = 6) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this thread) of `steps` forward and backward passes."""
    model = registry.resolve("emulated", registry.MODELS, "model")(num_classes=10, step_ms=step_ms)
    batch = torch.rand(8, 3, 16, 16)
    model(batch).sum().backward()  # first-call costs (allocator, autograd set-up) aside
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(steps):
        model(batch).sum().backward()
    return time.perf_counter() - wall, time.thread_time() - cpu


def test_a_step_takes_step_ms_of_wall_time_and_no_more_cpu_time_than_its_head() -> None:
    """No timed bound a busy machine can break: a sleep lasts at least its time, and the CPU
    time of the steps is compared with that of the same steps around a sleep 50,000 times
    shorter (the head alone), within a tenth of the sleep. How far above step_ms the wall time
    goes on a loaded machine is what benchmarks/measurement_truth.py measures."""
    wall, cpu = timed_steps(50)
    assert wall >= 6 * 0.050
    _, head_cpu = timed_steps(0.001)
    # A GPU step leaves the host's core free for the loader: the sleep costs no CPU time.
    assert cpu < head_cpu + 0.1 * 6 * 0.050


@pytest.mark.parametrize("shape", [(4, 3, 8, 8), (4, 100), (4, 2, 5), (4, 1)])
def test_any_input_shape_trains(shape: tuple[int, ...]) -> None:
    model = emulated(num_classes=5, step_ms=1)
    before = [p.detach().clone() for p in model.parameters()]
    step = TrainStep(model, torch.device("cpu"), non_blocking=False)
    step((torch.rand(*shape), torch.randint(0, 5, (4,))))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_uint8_inputs_train_the_head() -> None:
    model = emulated(num_classes=3, step_ms=1)
    before = [p.detach().clone() for p in model.parameters()]
    step = TrainStep(model, torch.device("cpu"), non_blocking=False)
    step((torch.randint(0, 255, (2, 3, 4, 4), dtype=torch.uint8), torch.tensor([0, 2])))
    assert model(torch.zeros(2, 3, 4, 4, dtype=torch.uint8)).shape == (2, 3)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize("bad", [0, -5, float("nan"), "fast", True])
def test_a_step_ms_not_above_zero_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="step_ms must be a number of milliseconds > 0"):
        emulated(num_classes=10, step_ms=bad)  # type: ignore[arg-type]
