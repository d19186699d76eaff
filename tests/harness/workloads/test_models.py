from __future__ import annotations

import pytest
import torch

from harness.workloads import models


@pytest.mark.parametrize("name", ["resnet18", "toy_conv", "linear"])
def test_models_classify_a_batch(name: str) -> None:
    model = getattr(models, name)(num_classes=7)
    out = model(torch.zeros(2, 3, 32, 32))
    assert out.shape == (2, 7)


def test_toy_conv_checks_its_options() -> None:
    with pytest.raises(ValueError, match=r"width and depth must be >= 1 \(got 0, 4\)"):
        models.toy_conv(num_classes=2, width=0)
