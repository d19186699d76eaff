"""The two installs: which commands need the `run` extra, and the message when it is missing.

A plain `pip install pipeline-harness` is what a login node needs: plan, submit, status, resume,
sbatch, report and compare read specs and results and never import torch. Measuring (`harness
run`, the tasks of a submitted job, `python -m harness.backends.worker`) needs the `run` extra:
torch, torchvision, NVML and scipy. Where they are missing, the command says which extra to
install instead of failing with an ImportError from deep inside the runner.
"""

from __future__ import annotations

import importlib.util

RUN_EXTRA = "pipeline-harness[run]"
# What a measurement imports at the top of its modules (harness/execution, harness/workloads).
# NVML and scipy are not here: NVML is optional at run time (no GPU figures without it), and
# scipy serves the `starved` workload alone: a cluster's PyTorch module without it runs the rest.
RUN_MODULES = ("torch", "torchvision")


class MissingExtra(Exception):
    """A command needs an extra that is not installed; the message says what to install."""


def missing_modules(modules: tuple[str, ...] = RUN_MODULES) -> list[str]:
    """The modules among `modules` that cannot be imported here, found without importing them
    (importing torch costs seconds)."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
            found = False
        if not found:
            missing.append(name)
    return missing


def require_run_extra(verb: str) -> None:
    """Raise MissingExtra naming the extra to install when `verb` cannot measure here."""
    missing = missing_modules()
    if not missing:
        return
    what = "PyTorch" if "torch" in missing else " and ".join(missing)
    raise MissingExtra(
        f"{verb} needs {what}: pip install '{RUN_EXTRA}' (or load your cluster's PyTorch module first)"
    )
