"""Run every point in this process, one after the other: the embedded default, and the tests.

Each point starts with a progress line: its place, its settings, how many points are done
and, from the pace so far, the time left.

Torch is imported only when a point runs: the registry of backends imports this module, and
`harness status` runs on a login node.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from harness.backends.base import BackendRefusal
from harness.backends.here import HereBackend
from harness.config.plan import Plan, Point
from harness.config.spec import Spec
from harness_schema.settings import LOADER_COLUMNS

if TYPE_CHECKING:
    from harness.execution.point import PointOutcome

log = logging.getLogger(__name__)


def run_inline(points: Sequence[Point], sweep_dir: Path) -> list[PointOutcome]:
    """Run the points; a point's units (rung, repeat) already measured are kept (skip_done)."""
    from harness.backends.follow import time_left
    from harness.backends.limit import point_limit, run_limited
    from harness.execution.dist import DistEnv

    env = DistEnv.from_environ({})  # one rank, whatever the surrounding environment says
    outcomes = []
    started = time.monotonic()
    for n, point in enumerate(points, 1):
        varying = _said(point)
        left = time_left(n - 1, len(points), time.monotonic() - started)
        log.info(
            "[%d/%d] point %s %s%s (%d/%d done%s)",
            n,
            len(points),
            point.id,
            point.sequence_step + " " if point.sequence_step else "",
            varying,
            n - 1,
            len(points),
            f", {left}" if left else "",
        )
        # Within its limit (limits.point_minutes, an hour by default): a hung point ends.
        outcomes.append(run_limited(point, sweep_dir, env, point_limit(point, None), timer=True))
    return outcomes


_SHOWN = ("batch_size", *LOADER_COLUMNS)
"""The settings named in each progress line: the batch and every DataLoader knob."""


def _said(point: Point) -> str:
    """The point's settings; a script's own (those its spec does not name) are named only:
    the script's probe says their values when it runs (and its rows record them)."""
    own = set(point.script_keeps)
    if point.workload.script is not None and point.workload.batch_size is None:
        own.add("batch_size")
    loaders = _untaken(point)
    said = ", ".join(
        f"{k}={v}" for k, v in point.settings().items() if k in _SHOWN and k not in own and k not in loaders
    )
    if own:
        said += f"{', ' if said else ''}the script's own {', '.join(k for k in _SHOWN if k in own)}"
    if loaders:
        said += f"{', ' if said else ''}the loader's own {', '.join(loaders)}"
    return said


def _untaken(point: Point) -> tuple[str, ...]:
    """The settings a loader factory does not take: the loader sets them (the plan says so, the
    rows record the loader's own value or nothing), so the line gives them no value either."""
    from harness.workloads import loader_factory, registry

    if point.workload.loader is None:
        return ()
    try:
        return loader_factory.untaken(registry.resolve(point.workload.loader, {}, "loader"))
    except registry.FactoryError:
        return ()  # the spec's check said why; the point's rows will too


class InlineBackend(HereBackend):
    """The points in this process, one rank each (the Backend protocol, harness/backends/base.py)."""

    name: ClassVar[str] = "inline"

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def check(self, plan: Plan) -> None:
        """One rank, whatever device the point asks for, runs here: sizes as an axis would
        measure the same rank at every size, and are refused."""
        if plan.spec.scale_varies:
            sizes = ", ".join(s.label() for s in plan.spec.scale_axis())
            raise BackendRefusal(
                f"inline runs every point as one rank in this process, so it cannot run the spec's "
                f"sizes ({sizes}); use --backend local (nodes emulated on this machine) or slurm"
            )

    def world_size(self, plan: Plan) -> int:
        return 1

    def ranks(self, point: Point) -> int:
        return 1

    def run(self, points: Sequence[Point], sweep_dir: Path) -> None:
        """One pass of the points (the handle's passes: harness/backends/here.py)."""
        run_inline(points, sweep_dir)

    @classmethod
    def states(cls, jobs: Sequence[str]) -> Mapping[str, object]:
        return {}
