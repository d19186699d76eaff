"""One tune's sweep folder and its rounds: the points measured so far, the plan files that list
them, and each round run through the backend (harness/sweeps.run_points: in passes, ABC ABC)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.load import load_results
from analysis.tune.model import (
    COPY,
    MODELLED,
    Config,
)
from analysis.tune.windows import PROFILE_SHARE, profile_steps
from harness.backends.base import Backend
from harness.config.plan import Plan, Point, point_id, resolve_loader
from harness.execution.steady import MOST
from harness.storage.sweep import create_sweep, plan_csv
from harness_schema import layout
from harness_schema.atomic import atomic_write_text
from harness_schema.settings import Measure

log = logging.getLogger(__name__)


class TuneError(ValueError):
    """A grid tune cannot model; the message names the setting and what to do."""


class Tuner:
    """One tune: the sweep folder, the points measured so far, and how to run more."""

    def __init__(self, plan: Plan, results: Path, backend: Backend, world_size: int) -> None:
        self.grid = list(plan.points)
        self.plan, self.backend, self.world = plan, backend, world_size
        self.template = self.grid[0]
        self.measured: list[Point] = []
        self.rounds_submitted = 0
        self.profile_ids: set[str] = set()
        """The profile's points (its windows: tune.json says whether the machine was shared)."""
        self.sweep_dir = create_sweep(
            replace(plan, points=()), results, backend=backend.name, world_size=world_size
        )

    def variant(
        self,
        config: Config,
        *,
        rungs: tuple[str, ...],
        repeats: int,
        capacity: Any = False,
        profile: bool = False,
    ) -> Point:
        """The template point with these loader settings, rungs and repeats, indexed next;
        `profile`: a profile point, its windows shortened (`profile_measure`)."""
        t = self.template
        requested = {**asdict(t.loader), **{k: getattr(config, k) for k in (*MODELLED, *COPY)}}
        if config.num_workers and config.prefetch_factor is None:
            requested["prefetch_factor"] = None
        loader, adjustments = resolve_loader(requested)
        measure = replace(t.measure, repeats=repeats, loader_capacity=capacity)
        if profile:
            short = profile_measure(measure)
            adjustments = (*adjustments, *profile_adjustments(measure, short))
            measure = short
        pid = point_id(t.workload, loader, measure, rungs, t.sequence_step)
        index = next((p.index for p in self.measured if p.id == pid), len(self.measured))
        return replace(
            t, index=index, id=pid, loader=loader, measure=measure, rungs=rungs, adjustments=adjustments
        )

    def run(self, points: Sequence[Point]) -> pd.DataFrame:
        """Run the points through the backend (a point measured already runs only the repeats
        it lacks, as resume does); the ok rows of the given points."""
        from harness.backends.slurm.backend import SubmissionError
        from harness.sweeps import run_points

        known = {m.id for m in self.measured}
        self.measured += [p for p in points if p.id not in known]
        _write_plan(self.sweep_dir, replace(self.plan, points=tuple(self.measured)))
        try:
            # Here, in passes of one repeat of each point (ABC ABC), as every sweep runs here.
            run_points(self.backend, points, self.sweep_dir, lambda ids: self._announce(points, ids))
        except SubmissionError as e:
            raise TuneError(str(e)) from e
        return self._rows(points)

    def _rows(self, points: Sequence[Point]) -> pd.DataFrame:
        rows = load_results([self.sweep_dir]).rows
        ids = {p.id for p in points}
        return rows[(rows["status"] == "ok") & rows["point_id"].isin(ids)]

    def _announce(self, points: Sequence[Point], job_ids: Sequence[str]) -> None:
        """A round submitted to a scheduler (one job array), before it is followed to its end."""
        self.rounds_submitted += 1
        print(
            f"tune: round {self.rounds_submitted}: {len(points)} point(s) as jobs "
            f"{job_ids[0]} .. {job_ids[-1]} (harness status {self.sweep_dir})",
            flush=True,
        )


def profile_measure(measure: Measure) -> Measure:
    """A profile window: a quarter of the spec's (PROFILE_SHARE). In steps, at least
    MIN_PROFILE_STEPS (tune.windows.profile_steps): the windows at num_workers=0 and 1 are the
    grid's slowest a step. In seconds (`measure.seconds`, and an auto window's least and most):
    every window then lasts about its seconds whatever its rate, and the profile's dozen
    windows (their loader-capacity passes as long) would cost more than the confirmations;
    an auto window still stops only once its step rate is known to AUTO_RSE (or at its most,
    said), and the profile takes each figure as the median of its interleaved windows, so its
    least duration, which guards against drifts slower than its blocks, is what is shortened.
    An auto window keeps its least steps (the loop's AUTO_MIN_BLOCKS blocks)."""
    if not measure.auto_window:
        measure = replace(measure, steps=profile_steps(measure.steps))
    if measure.seconds is None:
        return measure
    seconds = measure.seconds / PROFILE_SHARE
    most = None if measure.max_seconds is None else max(seconds, measure.max_seconds / PROFILE_SHARE)
    return replace(measure, seconds=seconds, max_seconds=most)


def profile_adjustments(spec: Measure, short: Measure) -> tuple[str, ...]:
    """What a profile window changed from the spec's that a line of the run names: an auto
    window's most (the loop's line when a window stops there says this, steady.most_said,
    not the spec's measure.max_seconds it no longer had)."""
    if short.max_seconds is None or spec.max_seconds is None or short.max_seconds == spec.max_seconds:
        return ()
    quarter = spec.max_seconds / PROFILE_SHARE
    raised = "" if short.max_seconds == quarter else f", raised to its least, {short.seconds:g} s"
    return (
        f"{MOST} {short.max_seconds:g} s in harness tune's profile: a quarter of the spec's "
        f"{spec.max_seconds:g} s{raised} (harness/tune/rounds.profile_measure)",
    )


def _write_plan(sweep_dir: Path, plan: Plan) -> None:
    """The sweep's plan files list the points measured so far (create_sweep's format)."""
    atomic_write_text(sweep_dir / "plan.csv", plan_csv(plan))
    layout.write_json(
        sweep_dir / "plan.json",
        {"spec": plan.spec.name, "notes": list(plan.notes), "points": [p.to_json() for p in plan.points]},
    )
