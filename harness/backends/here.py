"""Points run in processes of this machine that this one waits for (inline, local): what the
two backends share, as one base class (`HereBackend`) and one handle (`HereJobs`).

The handle runs the points when waited on, in passes of one repeat of each point (ABC ABC, not
AAA BBB): a slow spell of the machine then lands on every configuration compared, not on all
repeats of one, and the rows' `started_at` and `run_pass` record the order. A pass is one call
of the backend's own `run` (inline: the points in this process; local: one job whose ranks run
them). owner.json names this process for `status` across every pass, not pass by pass.

Torch-free: the registry of backends imports it, and `harness status` runs on a login node.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from harness.backends.base import Backend
from harness.backends.point_status import PointStatus
from harness.config.plan import Point

log = logging.getLogger(__name__)


class Passes(Protocol):
    def run(self, points: Sequence[Point], sweep_dir: Path) -> None:
        """Measure the points, one pass, and return once none is left running."""


@dataclass(frozen=True, slots=True)
class HereJobs:
    """The handle of points run here: nothing queued, nothing to announce; they run, in passes,
    when waited on (the Jobs protocol, harness/backends/base.py)."""

    backend: Passes
    points: tuple[Point, ...]
    sweep_dir: Path
    ids: tuple[str, ...] = ()
    detached: bool = False

    def wait(self) -> None:
        from harness.storage.sweep import owned

        with owned(self.sweep_dir):
            run_passes(self.backend, self.points, self.sweep_dir)


class HereBackend:
    """What inline and local share (the Backend protocol's answers for points run here); each
    gives its `run`, one pass."""

    where: ClassVar[str] = "here"
    again: ClassVar[str] = "run here"
    detached: ClassVar[bool] = False

    @classmethod
    def check_machine(cls, verb: str) -> None:
        from harness.extras import require_run_extra

        require_run_extra(verb)

    def run(self, points: Sequence[Point], sweep_dir: Path) -> None:
        raise NotImplementedError

    def submit(self, points: Sequence[Point], sweep_dir: Path) -> HereJobs:
        return HereJobs(self, tuple(points), sweep_dir)

    def settle(
        self, statuses: Sequence[PointStatus], sweep_dir: Path, recorded: type[Backend]
    ) -> list[PointStatus]:
        """The local jobs that outlived the `harness run` that started them, waited for
        (follow.wait_for_orphaned_jobs): points run here run one at a time."""
        from harness.backends.follow import wait_for_orphaned_jobs

        return wait_for_orphaned_jobs(statuses, sweep_dir, recorded)

    def follow(self, sweep_dir: Path) -> None:
        """Nothing to follow: `settle` waited for this machine's jobs of the sweep."""
        return None


def run_passes(backend: Passes, points: Sequence[Point], sweep_dir: Path) -> None:
    """Measure the units each point lacks, in passes (ABC ABC); a point whose every unit failed
    in a pass runs its other repeats at once in the next."""
    batches = _numbered(points, sweep_dir)
    whole = {p.id: p for p in points}
    failing: list[Point] = []  # every unit failed in the last pass: the rest at once, next pass
    given_up: set[str] = set()
    for k, batch in enumerate(batches, 1):
        given_up |= {p.id for p in failing}
        batch = [p for p in batch if p.id not in given_up]
        if len(batches) > 1:
            log.info("pass %d/%d: one repeat of %d point(s)", k, len(batches), len(batch))
        backend.run([*batch, *failing], sweep_dir)
        failing = [whole[p.id] for p in batch if _failed_wholly(sweep_dir, p)]
        # Their other repeats, if any: a point with no unit left is not run again for nothing
        # (its progress line twice, under the local backend a job started for nothing).
        left = lacking(failing, sweep_dir)
        failing = [p for p in failing if p.id in left]
    if failing:
        backend.run(failing, sweep_dir)


def _numbered(points: Sequence[Point], sweep_dir: Path) -> list[list[Point]]:
    """The passes of what the points lack (adaptive.passes), each point marked with its pass
    (RunPass): numbered on from the sweep's last pass, so that rows with the same run_pass
    were measured side by side, whichever run of the sweep measured them."""
    from dataclasses import replace

    from harness.backends.adaptive import passes
    from harness.config.plan import RunPass

    batches = passes(points, lacking(points, sweep_dir))
    first = next_pass(sweep_dir)
    repeats = {p.id: p.measure.repeats for p in points}
    return [
        [
            replace(p, run_pass=RunPass(number=first + k, k=k + 1, of=len(batches), repeats=repeats[p.id]))
            for p in batch
        ]
        for k, batch in enumerate(batches)
    ]


def next_pass(sweep_dir: Path) -> int:
    """The number of the sweep's next pass: one past the highest run_pass of its rows."""
    from harness.storage.sweep import load_info, load_points
    from harness_schema import layout
    from harness_schema.reading import read_point

    info = load_info(sweep_dir)
    done = [
        read_point(layout.point_dir(sweep_dir, p.id), info.ranks(p.id)).last_pass
        for p in load_points(sweep_dir)
    ]
    return max(done, default=-1) + 1


def _failed_wholly(sweep_dir: Path, point: Point) -> bool:
    """Every unit of the point so far has a failed row (a workload that does not build, no
    device): a point run again per pass would fail as many times."""
    from harness.storage.sweep import load_info
    from harness_schema import layout
    from harness_schema.reading import read_point

    rows = read_point(layout.point_dir(sweep_dir, point.id), load_info(sweep_dir).ranks(point.id))
    return bool(rows.units) and rows.failed == rows.units


def lacking(points: Sequence[Point], sweep_dir: Path) -> dict[str, list[int]]:
    """Point id -> the repeat numbers of which some unit (rung, repeat) has no row on every
    rank yet: what a run of the point measures (an interrupted pass, resumed, measures each
    missing unit once)."""
    from harness.storage.sweep import load_info
    from harness_schema import layout
    from harness_schema.reading import read_point

    info = load_info(sweep_dir)
    out = {}
    for p in points:
        done = read_point(layout.point_dir(sweep_dir, p.id), info.ranks(p.id)).units
        missing = sorted({r for r in range(p.measure.repeats) for rung in p.rungs if (rung, r) not in done})
        if missing:
            out[p.id] = missing
    return out
