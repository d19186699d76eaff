"""harness/execution/workload.py: the point's workload assembled from its factories."""

from __future__ import annotations

import pytest
import torch

from harness.config.plan import WorkloadSettings, expand
from harness.config.spec import parse_spec
from harness.execution.dataloader import Placement
from harness.execution.train_step import own_loss
from harness.execution.workload import build_workload, loader_parts
from harness.workloads.registry import WorkloadError

P = "tests.fixtures.pipelines"


def test_loss_model_trains_on_the_outputs_own_loss() -> None:
    spec = parse_spec(
        f"name: w\nworkload: {{dataset: '{P}:tokens', model: '{P}:tiny_lm', loss: model, device: cpu}}\n"
        "measure: {warmup_steps: 1, steps: 1}\nrungs: [full]\n"
    )
    (point,) = expand(spec).points
    _, step = build_workload(point, torch.device("cpu"))
    assert step.parts.loss is own_loss


def test_a_sampler_that_fails_is_named_in_its_error() -> None:
    w = WorkloadSettings(dataset=f"{P}:tokens", model=f"{P}:tiny_lm", sampler=f"{P}:not_a_dataset")  # type: ignore[call-arg]
    parts = loader_parts(w)
    assert parts.sampler is not None
    with pytest.raises(WorkloadError, match=rf"sampler '{P}:not_a_dataset' failed: TypeError: "):
        parts.sampler([], Placement(device=torch.device("cpu")))
