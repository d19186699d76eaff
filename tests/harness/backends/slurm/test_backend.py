"""The Slurm backend without a cluster: its up-front refusal and what it says of sbatch's. The
real-cluster tests (submitting, following, resubmitting) are in tests/slurm/."""

from __future__ import annotations

import subprocess

import pytest

from harness.backends.base import BackendRefusal
from harness.backends.slurm.backend import SlurmBackend, _last_line
from harness.config.plan import expand
from harness.config.spec import parse_spec
from tests.conftest import TINY_WORKLOAD


def test_an_option_sbatch_does_not_know_is_refused_before_anything_is_submitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from harness.backends.slurm import backend

    plan = expand(parse_spec("name: t\n" + TINY_WORKLOAD))
    SlurmBackend(plan.spec).check(plan)  # a throwaway render: nothing to refuse

    def render(*args: object, **kwargs: object) -> str:
        raise ValueError("Unavailable parameter(s): ['nodez']\nValid parameters are:\n  nodes (default: 1)")

    monkeypatch.setattr(backend, "render_sbatch", render)
    with pytest.raises(BackendRefusal, match=r"^slurm: Unavailable parameter\(s\): \['nodez'\]$"):
        SlurmBackend(plan.spec).check(plan)


def test_sbatchs_refusal_is_said_in_its_own_last_line() -> None:
    refused = subprocess.CalledProcessError(
        1, "sbatch", stderr="sbatch: error: first\nsbatch: error: Invalid qos\n"
    )
    assert _last_line(refused) == "sbatch: error: Invalid qos"
    assert _last_line(RuntimeError("")) == "RuntimeError"
