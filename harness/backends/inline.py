"""Run every point in this process, one after the other: the embedded default, and the tests."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from harness.config.plan import Point
from harness.config.settings import LOADER_COLUMNS
from harness.execution.dist import DistEnv
from harness.execution.runner import PointOutcome, run_point

log = logging.getLogger(__name__)


def run_inline(points: Sequence[Point], sweep_dir: Path) -> list[PointOutcome]:
    env = DistEnv.from_environ({})  # one rank, whatever the surrounding environment says
    outcomes = []
    for n, point in enumerate(points, 1):
        varying = ", ".join(f"{k}={v}" for k, v in point.settings().items() if k in _SHOWN)
        log.info(
            "[%d/%d] point %s %s%s",
            n,
            len(points),
            point.id,
            point.sequence_step + " " if point.sequence_step else "",
            varying,
        )
        outcomes.append(run_point(point, sweep_dir, env=env))
    return outcomes


_SHOWN = ("batch_size", *LOADER_COLUMNS)
"""The settings named in each progress line: the batch and every DataLoader knob."""
