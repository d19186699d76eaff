"""`harness tune SPEC`: the DataLoader grid's answer from a profile, a model and a few
confirmations, in one normal sweep folder.

1. **Profile.** Two points of the grid's settings, `num_workers=0` and `num_workers=1`, with
   the rungs the model needs (`host_batch`, the step's demand; `full`, with the loader's
   capacity timed alone), one run each; and in the same round the plateau point, the grid's
   most workers and prefetch at `full`, one run, for the hand-off each batch costs the rank's
   own thread (tune.model.with_plateau); and for each further copy mode its `host_batch` and
   its plateau point, one run each.
2. **Predict** every grid point (analysis/tune/model.py, fitted by `fit_profile`).
3. **Confirm** (analysis/tune/search.py): the predicted cheapest configuration that meets the
   demand and its neighbours on each axis, rung `full`, `repeats` runs each (at least 3),
   judged by analysis/noise.py's three-way rule; where the measurements contradict the model,
   the search measures further along that axis.

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
(tune.model.with_copy_mode). A grid that varies any other setting is refused with the setting
named (tune one value of it at a time).
On Slurm, the rounds are the profile (one array of three points), then one array per round of
confirmations (one to three rounds in the benchmarks' grids): each waits in the queue, so a
tune costs a few queue waits more than one exhaustive array, and far fewer GPU-hours. Stopped
midway (the process killed, a job failed), the sweep keeps what was measured; a new tune starts
afresh.
"""

from __future__ import annotations

import argparse
import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import caching
from analysis.aggregate import summarize
from analysis.load import load_results
from analysis.tune.model import (
    COPY,
    MODELLED,
    Config,
    Profile,
    cheapest_meeting,
    configs_in_mode,
    copy_modes,
    fit_profile,
    plateau_config,
    predict,
    with_cache,
    with_copy_mode,
    with_plateau,
)
from analysis.tune.search import SearchResult, search
from harness.backends.base import Backend
from harness.backends.registry import BACKENDS
from harness.config import rungs as rung_names
from harness.config.plan import Plan, Point, point_id, resolve_loader
from harness.storage import layout
from harness.storage.atomic import atomic_write_text
from harness.storage.sweep import create_sweep, plan_csv, want_repeats, with_repeats

log = logging.getLogger(__name__)

PROFILE_RUNGS = ("host_batch", "full")
PROFILED_WORKERS = 1
MIN_REPEATS = 3
TUNE_FILE = "tune.json"


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
        self.sweep_dir = create_sweep(
            replace(plan, points=()), results, backend=backend.name, world_size=world_size
        )

    def variant(
        self, config: Config, *, rungs: tuple[str, ...], repeats: int, capacity: Any = False
    ) -> Point:
        """The template point with these loader settings, rungs and repeats, indexed next."""
        t = self.template
        requested = {**asdict(t.loader), **{k: getattr(config, k) for k in (*MODELLED, *COPY)}}
        if config.num_workers and config.prefetch_factor is None:
            requested["prefetch_factor"] = None
        loader, adjustments = resolve_loader(requested)
        measure = replace(t.measure, repeats=repeats, loader_capacity=capacity)
        pid = point_id(t.workload, loader, measure, rungs, t.sequence_step)
        index = next((p.index for p in self.measured if p.id == pid), len(self.measured))
        return replace(
            t, index=index, id=pid, loader=loader, measure=measure, rungs=rungs, adjustments=adjustments
        )

    def run(self, points: Sequence[Point]) -> pd.DataFrame:
        """Run the points through the backend (a point measured already runs only the repeats
        it lacks, as resume does); the ok rows of the given points."""
        from harness.backends.slurm import SubmissionError
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


def _write_plan(sweep_dir: Path, plan: Plan) -> None:
    """The sweep's plan files list the points measured so far (create_sweep's format)."""
    atomic_write_text(sweep_dir / "plan.csv", plan_csv(plan))
    layout.write_json(
        sweep_dir / "plan.json",
        {"spec": plan.spec.name, "notes": list(plan.notes), "points": [p.to_json() for p in plan.points]},
    )


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


def profile(tuner: Tuner) -> Profile:
    """Run the profile points and fit the model (module docstring, step 1): the two points of
    the fit and the plateau point, in the grid's first copy mode; for each further copy mode,
    its bound rung and its plateau point. All in one round."""
    configs = [Config.of(q.settings()) for q in tuner.grid]
    base, *others = copy_modes(configs)
    copy = {k: getattr(base, k) for k in COPY}
    zero_cfg = Config(num_workers=0, prefetch_factor=None, **copy)
    some_cfg = replace(Config.of(tuner.template.settings()), num_workers=PROFILED_WORKERS)
    if some_cfg.prefetch_factor is None:
        some_cfg = replace(some_cfg, prefetch_factor=2)
    cached = cached_rungs(tuner.template.rungs)
    points = [
        tuner.variant(zero_cfg, rungs=PROFILE_RUNGS, repeats=1, capacity=True),
        tuner.variant(
            some_cfg, rungs=(PROFILE_RUNGS[0], *cached, *PROFILE_RUNGS[1:]), repeats=1, capacity=True
        ),
    ]
    tops = {m: plateau_config(configs_in_mode(configs, m)) for m in (base, *others)}
    plateaus = {m: tuner.variant(top, rungs=("full",), repeats=1) for m, top in tops.items() if top}
    # Each further copy mode: the worker point's bound rung in that mode (its step and copy).
    bounds = {
        m: tuner.variant(
            replace(some_cfg, **{k: getattr(m, k) for k in COPY}), rungs=("host_batch",), repeats=1
        )
        for m in others
    }
    top = tops[base]
    log.info(
        "tune: profiling num_workers=0 and num_workers=%d (rungs %s), and the plateau at %s%s",
        PROFILED_WORKERS,
        PROFILE_RUNGS,
        "none (no larger worker count)" if top is None else top.text(),
        "".join(f"; copy mode {m.copy_mode()}: its bound rung and plateau" for m in others),
    )
    rows = tuner.run([*points, *plateaus.values(), *bounds.values()])
    zero, some = (_figures(rows, p.id) for p in points)
    fitted = fit_profile(
        zero,
        some,
        workers=PROFILED_WORKERS,
        batch_size=tuner.template.workload.batch_size,
        ranks=tuner.world,
    )
    fitted = replace(fitted, copy_mode=base.copy_mode(), cached=_cached_figures(rows, points[1].id, cached))
    fitted = _with_plateau(fitted, rows, tops[base], plateaus.get(base))
    base_bound = statistics.median([zero["bound_steps_per_s"], some["bound_steps_per_s"]])
    return _with_copy_modes(fitted, rows, base_bound, bounds, tops, plateaus)


def _with_copy_modes(
    fitted: Profile,
    rows: pd.DataFrame,
    base_bound: float,
    bounds: Mapping[Config, Point],
    tops: Mapping[Config, Config | None],
    plateaus: Mapping[Config, Point],
) -> Profile:
    """Each further copy mode's step (its bound rung's rate against the profile mode's
    `base_bound`) and hand-off (its plateau point), from the profile's rows."""
    for mode, point in bounds.items():
        bound = _rate(rows, point.id, "host_batch")
        if bound is None:
            raise TuneError(
                f"tune: the profile point {point.id} (copy mode {mode.copy_mode()}) has no ok "
                "host_batch row: see the rows' error column (harness report on the sweep) before tuning"
            )
        plateau = plateaus.get(mode)
        rate = None if plateau is None else _rate(rows, plateau.id, "full")
        fitted = with_copy_mode(fitted, mode, base_bound / bound, tops[mode] if rate else None, rate or 0.0)
    return fitted


def cached_rungs(rungs: Sequence[str]) -> tuple[str, ...]:
    """The spec's cached sample-level rungs (all but `full`), bound first: the profile's worker
    point measures them, with their loader's capacity, for the caching what-if."""
    picked = [r for r in rungs if r != "full" and rung_names.is_sample_level(r)]
    return tuple(sorted(picked, key=rung_names.ladder_position))


def _cached_figures(rows: pd.DataFrame, pid: str, cached: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Each cached rung's loader at the profile's worker point: (capacity in batches/s,
    core-seconds a batch). A rung the dataset cannot serve (a skipped row) is left out."""
    out: dict[str, tuple[float, float]] = {}
    for rung in cached:
        mine = rows[(rows["point_id"] == pid) & (rows["rung"] == rung)]
        capacity = mine["loader_capacity"].median() if not mine.empty else float("nan")
        if not capacity > 0:
            continue
        cores, rate = mine["loader_cores"].median(), mine["steps_per_s"].median()
        out[rung] = (float(capacity), float(cores / rate) if pd.notna(cores) and rate > 0 else 0.0)
    return out


def _with_plateau(fitted: Profile, rows: pd.DataFrame, top: Config | None, point: Point | None) -> Profile:
    if top is None or point is None:
        return fitted
    rate = _rate(rows, point.id, "full")
    if rate is None:
        log.warning("tune: the plateau point %s has no ok row: the hand-off is taken as 0", point.id)
        return fitted
    return with_plateau(fitted, top, rate)


def _rate(rows: pd.DataFrame, pid: str, rung: str) -> float | None:
    """A profile point's steps/s at `rung` (median over ranks and runs); None without an ok row."""
    mine = rows[(rows["point_id"] == pid) & (rows["rung"] == rung)]
    return None if mine.empty else float(mine["steps_per_s"].median())


def _figures(rows: pd.DataFrame, pid: str) -> dict[str, float]:
    """One profile point's figures per rank (median over ranks and runs): the `full` rung's
    columns, with the bound rung's steps/s and main-process cores as bound_*."""
    mine = rows[rows["point_id"] == pid]
    full, bound = mine[mine["rung"] == "full"], mine[mine["rung"] == "host_batch"]
    if full.empty or bound.empty:
        raise TuneError(
            f"tune: the profile point {pid} has no ok rows for {PROFILE_RUNGS}: see "
            "the rows' error column (harness report on the sweep) before tuning"
        )
    out = {c: float(v) for c, v in full.median(numeric_only=True).items() if pd.notna(v)}
    out["bound_steps_per_s"] = float(bound["steps_per_s"].median())
    main = bound["main_cores"].median()
    if pd.notna(main):
        out["bound_main_cores"] = float(main)
    return out


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
    if small := small_grid_note(len(plan.points), repeats, modes):
        print(small, flush=True)
    tuner = Tuner(plan, results, backend, world_size)
    prof = profile(tuner)
    by_config = {Config.of(p.settings()): p for p in plan.points}
    predictions = predict(prof, by_config)

    def measure(configs: Sequence[Config], runs: int) -> dict[Config, list[float]]:
        """Each configuration's point (its id fixed by its first `repeats` runs) brought to
        `runs` runs in all: repeats.json raises it, as the adaptive repeats do."""
        points = {c: tuner.variant(c, rungs=("full",), repeats=repeats, capacity=False) for c in configs}
        if runs > repeats:
            want_repeats(tuner.sweep_dir, {p.id: runs for p in points.values()})
            points = {c: with_repeats(p, runs) for c, p in points.items()}
        rows = tuner.run(list(points.values()))
        per_point = _runs_by_point(rows)
        return {c: per_point.get(p.id, []) for c, p in points.items()}

    result = search(list(by_config), predictions, measure, repeats=repeats, budget=budget)
    summary = tune_summary(tuner, prof, predictions, result, repeats)
    layout.write_json(tuner.sweep_dir / TUNE_FILE, summary)
    return tuner.sweep_dir, summary


def small_grid_note(points: int, repeats: int, modes: int = 1) -> str:
    """A line where the grid costs no more than tune's least: the profile's windows, then the
    model's choice and a neighbour on each side of num_workers, `repeats` runs each. `modes`:
    the grid's copy modes (each further one profiles its bound rung and plateau)."""
    # The two points' rungs and the plateau point; two windows for each further copy mode.
    windows = 2 * len(PROFILE_RUNGS) + 1 + 2 * (modes - 1)
    least = windows + 3 * repeats
    if points * repeats > least:
        return ""
    return (
        f"tune: the grid has {points} points ({points * repeats} runs at {repeats} a point); tune "
        f"spends at least {least} (the profile's {windows} windows, then 3 points "
        f"{repeats} times): harness run measures this grid for less; tune pays from about "
        f"{least // repeats + 1} points"
    )


def _runs_by_point(rows: pd.DataFrame) -> dict[str, list[float]]:
    """Each point's samples/s per run, all ranks together (the report's figure)."""
    if rows.empty:
        return {}
    summary = summarize(rows, by="all")
    return {str(r.point_id): [float(v) for v in r.run_samples_per_s] for r in summary.itertuples()}


def tune_summary(
    tuner: Tuner, prof: Profile, predictions: Sequence[Any], result: SearchResult, repeats: int
) -> dict[str, Any]:
    """What tune.json holds: enough to render the report and the what-if without the rows."""
    rows = load_results([tuner.sweep_dir]).rows
    rank0 = rows[rows["rank"] == 0]
    spent = _seconds(rank0)
    measured = rank0[rank0["status"] == "ok"]
    per_run = overhead_s(measured[measured["rung"] == "full"])
    measure = tuner.template.measure
    steps = measure.warmup_steps + measure.steps
    exhaustive_s = sum(
        repeats * (steps / (x.samples_per_s / prof.batch_size / prof.ranks) + per_run) for x in predictions
    )
    j = result.judged
    return {
        "spec": tuner.plan.spec.name,
        "created": datetime.now().isoformat(timespec="seconds"),
        "profile": prof.to_json(),
        "repeats": repeats,
        "predictions": [
            {**asdict(x.config), "samples_per_s": x.samples_per_s, "memory_gb": x.memory_gb, "bound": x.bound}
            for x in predictions
        ],
        "model_choice": asdict(result.model_choice),
        "measured": [{**asdict(c), "runs": list(r)} for c, r in result.runs.items()],
        "rounds": [[asdict(c) for c in r] for r in result.rounds],
        "best": asdict(j.best),
        "answer": asdict(j.answer),
        "verdicts": [{**asdict(c), "verdict": v} for c, v in j.verdicts.items()],
        "undecided": [{**asdict(c), "runs_needed": n} for c, n in j.undecided.items()],
        "point_runs": {"tune": len(measured), "exhaustive": repeats * len(predictions)},
        "device_seconds": {"tune": spent, "exhaustive_estimate": exhaustive_s},
        "budget_spent": result.budget_spent,
        "grid_points": len(predictions),
        "caching": caching_entries(prof, rows, [x.config for x in predictions]),
    }


def caching_entries(prof: Profile, rows: pd.DataFrame, configs: Sequence[Config]) -> list[dict[str, Any]]:
    """Per cached rung the profile measured, Plumber's what-if in the model's terms: the grid
    predicted with that stage's output cached (tune.model.with_cache), its cheapest
    configuration within the margin of its best, and what the cache would take (the bytes of
    one cached value, the data set's samples, the job's memory limit, from the rung's row)."""
    out = []
    for rung, (capacity, cpu_s) in prof.cached.items():
        # Only the profile's worker point measures a cached rung: its rows are that rung's.
        mine = rows[(rows["rung"] == rung) & (rows["status"] == "ok")]
        choice = cheapest_meeting(predict(with_cache(prof, capacity, cpu_s), configs))
        out.append(
            {
                "rung": rung,
                "capacity": capacity,
                "choice": asdict(choice.config),
                "samples_per_s": choice.samples_per_s,
                "memory_gb": choice.memory_gb * prof.ranks,
                "sample_bytes": _median(mine, "cached_sample_bytes"),
                "samples": _median(mine, "dataset_samples"),
                "limit_gb": _median(mine, "memory_limit_gb"),
                "transform_names": caching.transform_names(mine["transform_names"].iloc[0]),
            }
        )
    return out


def _median(rows: pd.DataFrame, column: str) -> float | None:
    if column not in rows:
        return None
    value = pd.to_numeric(rows[column], errors="coerce").median()
    return float(value) if pd.notna(value) else None


def _seconds(rows: pd.DataFrame) -> float:
    """Wall seconds the rows' rungs held the device, start to finish (one rank's rows)."""
    start = pd.to_datetime(rows["started_at"], errors="coerce")
    end = pd.to_datetime(rows["finished_at"], errors="coerce")
    return float((end - start).dt.total_seconds().sum())


def overhead_s(rows: pd.DataFrame) -> float:
    """A run's seconds beyond its steps (iterator and worker start-up, the stock's warmup):
    the median over measured runs, to price the grid's unmeasured runs alike. Runs that timed
    the loader's capacity after their window (the profile's) count only where there is no
    other run, less that phase: `steps` batches at the capacity, for at least the window
    (runner._capacity's minimum)."""
    if rows.empty:
        return 0.0
    plain = rows[rows["loader_capacity"].isna()]
    use = rows if plain.empty else plain
    duration = (pd.to_datetime(use["finished_at"]) - pd.to_datetime(use["started_at"])).dt.total_seconds()
    stepping = (use["warmup_steps"] + use["steps"]) / use["steps_per_s"]
    capacity = 0.0 if not plain.empty else (use["steps"] / use["loader_capacity"]).clip(lower=stepping)
    return max(0.0, float(statistics.median(duration - stepping - capacity)))


def load_summary(sweep_dir: Path) -> Mapping[str, Any]:
    import json

    path = sweep_dir / TUNE_FILE
    if not path.exists():
        raise TuneError(f"{sweep_dir}: no {TUNE_FILE}: not a sweep made by `harness tune`")
    return dict(json.loads(path.read_text()))


def parse_what_if(text: str) -> tuple[int, int]:
    """ "gpus=8,cores=64" -> (8, 64)."""
    try:
        parts = dict(item.split("=", 1) for item in text.split(","))
        gpus, cores = int(parts.pop("gpus")), int(parts.pop("cores"))
        if parts or gpus < 1 or cores < 1:
            raise ValueError
    except (ValueError, KeyError):
        raise TuneError(
            f"--what-if: expected gpus=G,cores=C with integers >= 1 (e.g. gpus=8,cores=64), got {text!r}"
        ) from None
    return gpus, cores


def run_tune_verb(args: argparse.Namespace, load_plan: Callable[[Path, Sequence[str]], Plan]) -> int:
    """`harness tune SPEC` or `harness tune --what-if gpus=G,cores=C SWEEP` (cli.cmd_tune)."""
    from analysis.tune.report import render, render_what_if

    if args.what_if:
        gpus, cores = parse_what_if(args.what_if)
        if args.overrides:
            raise TuneError("--what-if reads a tune's sweep folder and takes no KEY=VALUE overrides")
        print(render_what_if(load_summary(args.spec), gpus=gpus, cores=cores))
        return 0
    if args.budget is not None and args.budget < 0:
        raise TuneError(
            f"--budget: the point-runs the confirmations may spend, an integer >= 0 (0: the profile "
            f"alone, its choice unconfirmed); got {args.budget}"
        )
    from harness.sweeps import check_backend, require_torch_here

    require_torch_here(BACKENDS[args.backend], "tune")  # on Slurm the jobs run the points
    plan = load_plan(args.spec, args.overrides)
    backend = BACKENDS[args.backend](plan.spec)
    check_backend(backend, plan, args.spec)
    sweep_dir, summary = tune(plan, args.results, backend=backend, repeats=args.repeats, budget=args.budget)
    print(render(summary))
    print(f"\nresults: {sweep_dir} (the tables: harness report {sweep_dir})")
    return 0
