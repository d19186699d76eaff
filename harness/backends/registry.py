"""The one registry of backends: the CLI's `--backend` choices, and what a sweep's recorded
backend (sweep.json) is resumed and asked about with.

Adding a backend: a module with a class of the Backend protocol (harness/backends/base.py)
and one line here. Torch-free: `harness status` imports it on a login node.
"""

from __future__ import annotations

from pathlib import Path

from harness.backends.base import Backend
from harness.backends.inline import InlineBackend
from harness.backends.local import LocalBackend
from harness.backends.slurm.backend import SlurmBackend
from harness.config.spec import Spec
from harness.storage.sweep import load_info

BACKENDS: dict[str, type[Backend]] = {
    "inline": InlineBackend,
    "local": LocalBackend,
    "slurm": SlurmBackend,
}

RECORDED: dict[str, type[Backend]] = {**BACKENDS, "sbatch": SlurmBackend}
"""A sweep's recorded backend -> the backend that resumes it: a standalone script's sweep
(`harness sbatch`) is resumed on Slurm, as one more array."""


def recorded(sweep_dir: Path) -> type[Backend]:
    """The backend a sweep recorded (sweep.json): what status asks about its jobs."""
    return RECORDED[load_info(sweep_dir).backend]


def backend_of_sweep(recorded: str, spec: Spec) -> Backend:
    """The backend a sweep recorded (sweep.json), made for its spec."""
    return RECORDED[recorded](spec)
