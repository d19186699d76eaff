"""`harness tune SPEC`: the DataLoader grid's answer from a profile, a model and a few
confirmations, in one normal sweep folder.

1. **Profile.** Two points of the grid's settings, `num_workers=0` and `num_workers=1`, with
   the rungs the model needs (`host_batch`, the step's demand; `full`, with the loader's
   capacity timed alone), one run each; and in the same round the plateau point, the grid's
   most workers and prefetch at `full`, one run, for the hand-off each batch costs the rank's
   own thread (tune.fit.with_plateau); and for each further copy mode its `host_batch` and
   its plateau point, one run each. The profile's windows are a quarter of the spec's
   (rounds.profile_measure): in steps, they are the grid's slowest; in seconds
   (`measure.seconds`, `steps: auto`), a quarter of the least and most seconds.
2. **Predict** every grid point (analysis/tune/model.py, fitted by analysis/tune/fit.py).
3. **Confirm** (analysis/tune/search.py): the predicted cheapest configuration that meets the
   demand and its neighbours on each axis, rung `full`, `repeats` runs each (at least 3),
   judged by analysis/noise.py's three-way rule; where the measurements contradict the model,
   the search measures further along that axis.
   Each confirmation measures the spec's own window, an auto one included (`steps: auto`: as
   long as its step rate needs, within its seconds): a point-run of `--budget` is one window,
   and tune.json prices the grid's runs in the seconds the confirmations' windows lasted
   (summary.window_s).

Every point runs through the inline or local backend, or as a Slurm job array per round
(`--backend slurm`: this process submits each round and follows it to its end, as
`submit --wait` does), into one sweep folder (harness/storage/sweep.py); the sweep's plan
lists the points measured so far, so `harness report` and `harness status` read it as any
sweep. `tune.json` beside it holds the profile, the grid's
predictions, the measured runs and what each approach costs (analysis/tune/report.py renders
it; `harness tune --what-if gpus=8,cores=64 SWEEP` reads its profile again).

The model covers num_workers, prefetch_factor and persistent_workers; the copy settings
(pin_memory, non_blocking) are measured: each further copy mode of the grid adds its bound rung
(the step with that mode's copy) and its plateau point to the profile's round
(tune.fit.with_copy_mode). A grid that varies any other setting is refused with the setting
named (tune one value of it at a time).
On Slurm, the rounds are the profile (one array of three points), then one array per round of
confirmations (one to three rounds in the benchmarks' grids): each waits in the queue, so a
tune costs a few queue waits more than one exhaustive array, and far fewer GPU-hours. Stopped
midway (the process killed, a job failed), the sweep keeps what was measured; a new tune starts
afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.aggregate import summarize
from analysis.tune.fit import copy_modes
from analysis.tune.judge import Runs
from analysis.tune.model import COPY, MODELLED, Config, predict
from analysis.tune.search import search
from analysis.tune.windows import FIRST_WINDOWS, PROFILE_SHARE, with_intervals
from harness.backends.base import Backend
from harness.backends.registry import BACKENDS
from harness.config.plan import Plan
from harness.storage.sweep import want_repeats, with_repeats
from harness.tune.profile import PROFILE_RUNGS, profile
from harness.tune.rounds import TuneError, Tuner
from harness.tune.summary import TUNE_FILE, tune_summary
from harness_schema import layout

log = logging.getLogger(__name__)

MIN_REPEATS = 3


def check_grid(plan: Plan) -> None:
    """Refuse a grid that varies a setting the model does not cover."""
    fixed = [k for k in plan.points[0].settings() if k not in (*MODELLED, *COPY)]
    for key in fixed:
        values = {repr(p.settings()[key]) for p in plan.points}
        if len(values) > 1:
            raise TuneError(
                f"{plan.spec.path}: tune models num_workers, prefetch_factor, persistent_workers, "
                f"pin_memory and non_blocking; the grid also varies {key} "
                f"({', '.join(sorted(values))}): tune one value at a time "
                f"(override it, e.g. loader.{key}=... or workload.{key}=...)"
            )
    if plan.points[0].workload.script is not None:
        raise TuneError(
            f"{plan.spec.path}: tune profiles with the harness's ladder (host_batch, full), which a "
            "script workload does not have (it measures through harness.probe): sweep it with harness run"
        )
    if any(p.sequence_step for p in plan.points):
        raise TuneError(f"{plan.spec.path}: tune takes a grid, not a sequence")


def tune(
    plan: Plan,
    results: Path,
    *,
    backend: str | Backend = "inline",
    world_size: int | None = None,
    repeats: int = MIN_REPEATS,
    budget: int | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Profile, predict, confirm (module docstring); the sweep folder and tune.json's content.
    `backend`: a registry name or a backend; `world_size`: its ranks per point unless given."""
    check_grid(plan)
    if isinstance(backend, str):
        backend = BACKENDS[backend](plan.spec)
    world_size = backend.world_size(plan) if world_size is None else world_size
    repeats = max(MIN_REPEATS, repeats)
    modes = len(copy_modes([Config.of(p.settings()) for p in plan.points]))
    timed = plan.spec.measure.seconds is not None
    if small := small_grid_note(len(plan.points), repeats, modes, timed=timed):
        print(small, flush=True)
    tuner = Tuner(plan, results, backend, world_size)
    prof = profile(tuner)
    by_config = {Config.of(p.settings()): p for p in plan.points}
    predictions = with_intervals(prof, predict(prof, by_config))

    def measure(configs: Sequence[Config], runs: int) -> dict[Config, Runs]:
        """Each configuration's point (its id fixed by its first `repeats` runs) brought to
        `runs` runs in all: repeats.json raises it, as the adaptive repeats do."""
        points = {c: tuner.variant(c, rungs=("full",), repeats=repeats, capacity=False) for c in configs}
        if runs > repeats:
            want_repeats(tuner.sweep_dir, {p.id: runs for p in points.values()})
            points = {c: with_repeats(p, runs) for c, p in points.items()}
        rows = tuner.run(list(points.values()))
        per_point = _runs_by_point(rows)
        return {c: per_point.get(p.id, Runs((), ())) for c, p in points.items()}

    result = search(list(by_config), predictions, measure, repeats=repeats, budget=budget)
    summary = tune_summary(tuner, prof, predictions, result, repeats)
    layout.write_json(tuner.sweep_dir / TUNE_FILE, summary)
    return tuner.sweep_dir, summary


def small_grid_note(points: int, repeats: int, modes: int = 1, *, timed: bool = False) -> str:
    """A line where the grid costs no more than tune's least and one configuration more: the
    profile's windows (FIRST_WINDOWS passes), then the model's choice and a neighbour on each
    side of num_workers, `repeats` runs each, and the configuration an uncertain profile adds
    (trust.plausible). `modes`: the grid's copy modes (each further one profiles its bound
    rung and plateau). Counted in windows of the spec's length, a low count in device time:
    in steps, the profile's windows at num_workers=0 and 1 are the grid's slowest
    (benchmarks/tune_truth.py prices both); `timed` (measure.seconds, steps: auto), every
    window lasts about its seconds, the profile's a quarter of the spec's (rounds.profile_measure)."""
    # A pass: the two points' rungs, the worker point's loader timed alone, the plateau point;
    # two windows for each further copy mode.
    windows = FIRST_WINDOWS * (2 * len(PROFILE_RUNGS) + 2 + 2 * (modes - 1))
    profile_cost = -(-windows // PROFILE_SHARE) if timed else windows
    least = profile_cost + 3 * repeats
    if points * repeats > least + repeats:
        return ""
    if timed:
        profiled = (
            f"the profile's {windows} windows in {FIRST_WINDOWS} passes, each a quarter of the spec's "
            f"seconds: about {profile_cost} of the spec's windows"
        )
        slowest = "its windows last their seconds (at least), whatever their configuration"
    else:
        profiled = f"the profile's {windows} windows in {FIRST_WINDOWS} passes"
        slowest = "its windows at num_workers=0 and 1 are the grid's slowest"
    return (
        f"tune: the grid has {points} points ({points * repeats} runs at {repeats} a point); tune "
        f"spends at least {least} ({profiled}, then 3 points {repeats} times), more where its profile is "
        f"uncertain, and {slowest}: harness run measures this grid for less; "
        f"tune pays from about {(least + repeats) // repeats + 1} points"
    )


def _runs_by_point(rows: pd.DataFrame) -> dict[str, Runs]:
    """Each point's samples/s per run, all ranks together (the report's figure), with the
    pass each was measured in (the judgement pairs the runs of one pass)."""
    if rows.empty:
        return {}
    summary = summarize(rows, by="all")
    return {
        str(r.point_id): Runs(tuple(float(v) for v in r.run_samples_per_s), tuple(r.run_passes))
        for r in summary.itertuples()
    }
