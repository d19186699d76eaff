"""Run every point in this process, one after the other: the embedded default, and the tests.

Each point starts with a progress line: its place, its settings, how many points are done
and, from the pace so far, the time left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from harness.backends.follow import time_left
from harness.config.plan import Point
from harness.config.settings import LOADER_COLUMNS
from harness.execution.dist import DistEnv
from harness.execution.runner import PointOutcome, run_point

log = logging.getLogger(__name__)


def run_inline(points: Sequence[Point], sweep_dir: Path) -> list[PointOutcome]:
    """Run the points; a point's units (rung, repeat) already measured are kept (skip_done)."""
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
        outcomes.append(run_point(point, sweep_dir, env=env))
    return outcomes


_SHOWN = ("batch_size", *LOADER_COLUMNS)
"""The settings named in each progress line: the batch and every DataLoader knob."""


def _said(point: Point) -> str:
    """The point's settings; a script's own (those its spec does not name) are named only:
    the script's probe says their values when it runs (and its rows record them)."""
    own = set(point.script_keeps)
    if point.workload.script is not None and point.workload.batch_size is None:
        own.add("batch_size")
    said = ", ".join(f"{k}={v}" for k, v in point.settings().items() if k in _SHOWN and k not in own)
    if own:
        said += f"{', ' if said else ''}the script's own {', '.join(k for k in _SHOWN if k in own)}"
    return said
