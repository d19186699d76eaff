"""scripts/gpu_suite.sh: the GPU acceptance suite with the Python at hand (a GPU machine's own
PyTorch, no network). Here, without a GPU, what a user sees is its refusals: each names what is
missing and stops before pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def gpu_suite(python: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": python}
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_suite.sh")], env=env, capture_output=True, text=True, timeout=300
    )


def test_a_python_without_the_packages_is_told_which_are_missing(tmp_path: Path) -> None:
    bare = tmp_path / "bare-python"  # this Python without its site-packages: no torch, no pandas
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    out = gpu_suite(str(bare))
    assert out.returncode == 1
    assert out.stderr.strip().startswith("gpu_suite: ")
    assert "lacks torch, torchvision, submitit, pandas, yaml" in out.stderr
    assert out.stderr.strip().endswith(
        "pip install -e '.[run,dev]' into it, or bring their wheels where there is no network"
    )
    assert "pytest" not in out.stdout  # stopped before the suite


def test_without_a_gpu_it_says_so_and_runs_nothing() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the suite would run")
    out = gpu_suite(sys.executable)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"gpu_suite: torch {torch.__version__} of {sys.executable} sees no CUDA device: run it on a GPU machine"
    )
    assert out.stdout == ""
