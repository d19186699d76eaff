"""The GPU acceptance suite: every GPU path of the harness, for real, on a machine with CUDA.

    bash scripts/test.sh -m gpu        # just these (lint, types, then pytest -m gpu)

Every test here is marked `gpu` (registered in pyproject.toml). Without a visible CUDA device
they are collected and skipped, all with one reason, before any of them runs: the default run
pays nothing for them. Tests that need more than this machine has (two GPUs for NCCL across
ranks, HolisticTraceAnalysis installed) skip themselves, saying what is missing; on one GPU
every other test proves its GPU path (scripts/gpu_suite.sh, docs/guides/slurm.md, "On a GPU machine without Slurm").
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

NO_GPU = "no CUDA device visible (torch.cuda.is_available() is False): the gpu suite runs on a GPU machine"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=NO_GPU)
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


GPU_WORKLOAD = """\
workload:
  dataset: fake_cifar
  dataset_args: {size: 256, image_size: 32, resize: null}
  model: toy_conv
  model_args: {width: 8, depth: 2}
  batch_size: 32
  device: cuda
measure: {warmup_steps: 2, steps: 6, repeats: 1}
loader: {num_workers: 1, pin_memory: true, non_blocking: true}
"""
"""A point small enough for seconds on any GPU; every rung still crosses the PCIe bus."""


@pytest.fixture
def cuda0() -> torch.device:
    return torch.device("cuda", 0)


@pytest.fixture
def gpu_spec(tmp_path: Path) -> Callable[[str], Path]:
    """gpu_spec(extra) -> a spec file: GPU_WORKLOAD plus `extra` (dedented YAML)."""

    def write(extra: str = "", name: str = "gpu") -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"name: {name}\n" + GPU_WORKLOAD + textwrap.dedent(extra))
        return path

    return write
