from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

TINY_WORKLOAD = """\
workload:
  dataset: fake_cifar
  dataset_args: {size: 48, image_size: 8, resize: null}
  model: linear
  batch_size: 8
  device: cpu
measure: {warmup_steps: 1, steps: 3, repeats: 1}
"""


@pytest.fixture
def write_spec(tmp_path: Path):
    """write_spec(text) -> path of a spec file holding the dedented text."""

    def write(text: str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write
