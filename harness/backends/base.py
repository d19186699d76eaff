"""Where points run, as one type: the role submitit's Executor plays.

A `Backend` runs a sweep's points somewhere (this process, local subprocesses, a Slurm job
array). Every policy that runs points (`harness run`, `resume`, `submit`, the adaptive rounds,
`tune`'s rounds; harness/sweeps.py and harness/tune/driver.py) is written once against this
protocol; the CLI's `--backend` choices are the keys of the one registry
(harness/backends/registry.py). Adding a backend is a module with a class of this shape and one
line in the registry.

A backend is made from the spec it runs (`BACKENDS[name](spec)`): the spec's `slurm` section
holds the resources of every backend (ranks per point, GPUs, the time limit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Protocol

from harness.config.plan import Plan, Point
from harness.config.spec import Spec


class BackendRefusal(ValueError):
    """The spec asks a backend for what it cannot give (one line, said before anything is
    written or submitted); the CLI prefixes the spec's path."""


def no_announcement(job_ids: Sequence[str]) -> None:
    """The default of `Backend.run`'s announce: say nothing."""


class Backend(Protocol):
    name: ClassVar[str]
    """The registry's key, written into sweep.json (`status` and `resume` read it back)."""
    here: ClassVar[bool]
    """Runs the points in processes of this machine that this one waits for (inline, local):
    it needs PyTorch here, and its sweep names its process while it runs (owner.json).
    False: a scheduler's jobs run them (slurm), which outlive this process."""

    def __init__(self, spec: Spec) -> None:
        """The backend for this spec's points (its `slurm` section: ranks, GPUs, time)."""

    def check(self, plan: Plan) -> None:
        """The up-front refusals: raise BackendRefusal (one line) before anything is written
        when the plan asks what this backend cannot give."""

    def world_size(self, plan: Plan) -> int:
        """The ranks of each point: a point is complete when every rank has its rows."""

    def run(
        self,
        points: Sequence[Point],
        sweep_dir: Path,
        *,
        announce: Callable[[Sequence[str]], None] = no_announcement,
    ) -> None:
        """Measure the points and return once none is left running (blocking); for a
        scheduler, submit them, `announce` their job ids, and follow the jobs to their end.
        Each point measures only the units (rung, repeat) it lacks."""

    def submit(self, points: Sequence[Point], sweep_dir: Path) -> list[str]:
        """Start the points and return their job ids without waiting for them (a scheduler);
        a backend that runs here runs them (as `run`) and returns no ids."""

    @classmethod
    def states(cls, jobs: Sequence[str]) -> Mapping[str, object]:
        """Job id -> its state (an object with .state and .reason), for the jobs this backend's
        scheduler knows; empty for a backend that runs here (status looks at its processes).
        A class method: `harness status` asks it with no spec at hand."""
