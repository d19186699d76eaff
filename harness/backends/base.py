"""Where points run, as one type: the role submitit's Executor plays.

A `Backend` runs a sweep's points somewhere (this process, local subprocesses, a Slurm job
array). Every policy that runs points (`harness run`, `resume`, `submit`, the adaptive rounds,
`tune`'s rounds; harness/sweeps.py and harness/tune/driver.py) is written once against this
protocol, and waits on the handle (`Jobs`) that `submit` returns, as submitit's executors return
a Job; the CLI's `--backend` choices are the keys of the one registry
(harness/backends/registry.py). Adding a backend is a module with a class of this shape and one
line in the registry.

A backend is made from the spec it runs (`BACKENDS[name](spec)`): the spec's `slurm` section
holds the resources of every backend (ranks per point, GPUs, the time limit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Protocol

from harness.backends.point_status import PointStatus
from harness.config.plan import Plan, Point
from harness.config.spec import Spec


class BackendRefusal(ValueError):
    """The spec asks a backend for what it cannot give (one line, said before anything is
    written or submitted); the CLI prefixes the spec's path."""


class Jobs(Protocol):
    """What `Backend.submit` returns: a handle on the points it started, as submitit's Job is on
    its function. The sweep waits on it, or returns without waiting where its jobs go on alone."""

    @property
    def ids(self) -> Sequence[str]:
        """The job ids a scheduler gave, in the points' order: what the sweep announces. Empty
        where nothing was queued (the points run here)."""

    @property
    def detached(self) -> bool:
        """Its jobs go on without this process (a scheduler's): the sweep may return without
        waiting for them, and an interrupt (Ctrl-C) of the wait leaves them running. False: they
        run while this process waits (inline, local), and an interrupt ends them, what was
        measured kept."""

    def wait(self) -> None:
        """Return once none of its jobs is live: follow a scheduler's to their end; run the points
        here (submitit's DebugJob likewise runs its function when its result is asked)."""


class Backend(Protocol):
    name: ClassVar[str]
    """The registry's key, written into sweep.json (`status` and `resume` read it back)."""
    where: ClassVar[str]
    """Where its points run, as a line says it ("here", "as Slurm jobs"). Two backends with the
    same `where` and the same ranks run a point alike: a sweep of one may be resumed on the other."""
    again: ClassVar[str]
    """What `harness resume` does with a point without complete results, as `status` advises it
    ("run here", "resubmit")."""
    detached: ClassVar[bool]
    """Its jobs outlive this process (Jobs.detached, known before any is submitted): `harness run`
    checks a script's flags before queueing its points, where the script's own run would say it
    at once."""

    def __init__(self, spec: Spec) -> None:
        """The backend for this spec's points (its `slurm` section: ranks, GPUs, time)."""

    @classmethod
    def check_machine(cls, verb: str) -> None:
        """What this machine needs to run the backend's points, said before anything is written:
        raises harness.extras.MissingExtra for a backend that runs them here without PyTorch (a
        login node); a scheduler's jobs need it on the compute nodes only."""

    def check(self, plan: Plan) -> None:
        """The up-front refusals: raise BackendRefusal (one line) before anything is written
        when the plan asks what this backend cannot give."""

    def world_size(self, plan: Plan) -> int:
        """The ranks of each point at the spec's first size: a point is complete when every
        rank has its rows."""

    def ranks(self, point: Point) -> int:
        """The ranks of this point (its size's, where sizes are an axis: slurm.nodes: [1, 2])."""

    def submit(self, points: Sequence[Point], sweep_dir: Path) -> Jobs:
        """Start the points (each measures only the units, rung and repeat, it lacks) and return
        the handle the sweep waits on. Raises harness.backends.slurm.backend.SubmissionError
        with the scheduler's own words when it refuses them."""

    def settle(
        self, statuses: Sequence[PointStatus], sweep_dir: Path, recorded: type[Backend]
    ) -> list[PointStatus]:
        """Before a resume decides what to run: the statuses it acts on. A backend that runs points
        here first waits for the sweep's jobs of this machine that outlived their run (they
        would share its cores); a scheduler's live jobs are left alone, as they are."""

    def follow(self, sweep_dir: Path) -> Jobs | None:
        """A handle on the sweep's live jobs, for `resume --wait` with nothing to resume; None
        where there are none to follow (a sweep run here waits for its jobs in `settle`)."""

    @classmethod
    def states(cls, jobs: Sequence[str]) -> Mapping[str, object]:
        """Job id -> its state (an object with .state and .reason), for the jobs this backend's
        scheduler knows; empty for a backend that runs here (status looks at its processes).
        A class method: `harness status` asks it with no spec at hand."""
