"""The emulated accelerator: a step that takes step_ms of wall time and almost no CPU time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.runner import run_point
from harness.execution.train_step import TrainStep
from harness.workloads import registry
from harness.workloads.emulated import emulated
from harness_schema import rows as results


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


P = "tests.fixtures.pipelines"


@pytest.mark.parametrize(
    "pipeline",
    [
        # A dict batch (a Hugging Face BatchEncoding's shape): the model is called model(**batch).
        f"dataset: {P}:tokens\n  collate: {P}:pad_collate",
        # A detection batch: a tuple of per-sample images of varying size, a tuple of target dicts.
        f"dataset: {P}:detection\n  collate: {P}:detection_collate",
    ],
    ids=["dict", "detection"],
)
def test_any_batch_structure_is_measured_with_no_loss_given(pipeline: str, tmp_path: Path) -> None:
    """The stand-in for a GPU step serves every pipeline: no TypeError, no loss to write."""
    spec = parse_spec(
        f"""\
name: emulated_any
workload:
  {pipeline}
  model: emulated
  model_args: {{step_ms: 5}}
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 3}}
rungs: [device_batch, full]
"""
    )
    (point,) = expand(spec).points
    outcome = run_point(point, tmp_path)
    rows = results.read_rows(tmp_path / "points" / point.id / "rank0.csv")
    assert outcome.failed == 0, [r["error"] for r in rows]
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert {int(r["samples"]) for r in rows} == {3 * 4}


def test_a_user_step_may_call_it_with_keywords_or_per_sample_lists() -> None:
    model = emulated(num_classes=2, step_ms=1)
    tokens = {"input_ids": torch.randint(0, 9, (4, 7)), "attention_mask": torch.ones(4, 7, dtype=torch.bool)}
    assert model(**tokens).shape == (4, 2)
    assert model([torch.rand(3, 5, 6), torch.rand(3, 8, 4)]).shape == (2, 2)
    with pytest.raises(TypeError, match="the emulated model found no tensor in its inputs"):
        model("text")
