"""The profile of `harness tune` (driver.py, step 1): the points it runs and the model's fit
from their rows (analysis/tune/fit.py's fit_profile, with_plateau, with_copy_mode)."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial

import pandas as pd

from analysis.tune.fit import configs_in_mode, copy_modes, plateau_config, with_copy_mode
from analysis.tune.model import COPY, Config, Profile
from analysis.tune.windows import FIRST_WINDOWS, WINDOWS, fit_windows, passes_agree, plateau_windows
from harness.config.plan import Point
from harness.storage.sweep import want_repeats, with_repeats
from harness.tune.rounds import TuneError, Tuner
from harness_schema import rungs as rung_names

log = logging.getLogger(__name__)

PROFILE_RUNGS = ("host_batch", "full")
PROFILED_WORKERS = 1


def profile(tuner: Tuner) -> Profile:
    """Run the profile points and fit the model (driver.py's docstring, step 1): the two points
    of the fit and the plateau point, in the grid's first copy mode; for each further copy
    mode, its bound rung and its plateau point. All in one round of FIRST_WINDOWS windows a
    point (passes, ABC ABC), and a round of one more each where those windows disagree beyond
    the margin (analysis/tune/windows.py): each quantity is then the median of three."""
    configs = [Config.of(q.settings()) for q in tuner.grid]
    base, *others = copy_modes(configs)
    copy = {k: getattr(base, k) for k in COPY}
    zero_cfg = Config(num_workers=0, prefetch_factor=None, **copy)
    some_cfg = replace(Config.of(tuner.template.settings()), num_workers=PROFILED_WORKERS)
    if some_cfg.prefetch_factor is None:
        some_cfg = replace(some_cfg, prefetch_factor=2)
    cached = cached_rungs(tuner.template.rungs)
    window = partial(tuner.variant, repeats=FIRST_WINDOWS, profile=True)  # a profile point
    points = [
        window(zero_cfg, rungs=PROFILE_RUNGS, capacity=True),
        window(some_cfg, rungs=(PROFILE_RUNGS[0], *cached, *PROFILE_RUNGS[1:]), capacity=True),
    ]
    tops = {m: plateau_config(configs_in_mode(configs, m)) for m in (base, *others)}
    plateaus = {m: window(top, rungs=("full",)) for m, top in tops.items() if top}
    # Each further copy mode: the worker point's bound rung in that mode (its step and copy).
    bounds = {
        m: window(replace(some_cfg, **{k: getattr(m, k) for k in COPY}), rungs=("host_batch",))
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
    rows = _windows(tuner, points, plateaus.get(base), [*plateaus.values(), *bounds.values()])
    zeros, somes = _aligned(_passes(rows, points[0].id), _passes(rows, points[1].id))
    fitted = fit_windows(
        zeros,
        somes,
        workers=PROFILED_WORKERS,
        batch_size=tuner.template.workload.batch_size,
        ranks=tuner.world,
    )
    fitted = replace(fitted, copy_mode=base.copy_mode(), cached=_cached_figures(rows, points[1].id, cached))
    fitted = _with_plateau(fitted, rows, tops[base], plateaus.get(base))
    base_bound = statistics.median(f["bound_steps_per_s"] for f in (*zeros, *somes))
    return _with_copy_modes(fitted, rows, base_bound, bounds, tops, plateaus)


def _windows(
    tuner: Tuner, points: Sequence[Point], plateau: Point | None, others: Sequence[Point]
) -> pd.DataFrame:
    """The profile's round of FIRST_WINDOWS windows a point, then one more each where they
    disagree (windows.passes_agree); the rows of every profile point."""
    everything = [*points, *others]
    tuner.profile_ids = {p.id for p in everything}
    rows = tuner.run(everything)
    zeros, somes = _aligned(_passes(rows, points[0].id), _passes(rows, points[1].id))
    rates = [] if plateau is None else _rates(rows, plateau.id)
    batch = tuner.template.workload.batch_size
    if passes_agree(zeros, somes, rates, workers=PROFILED_WORKERS, batch_size=batch):
        return rows
    log.info(
        "tune: the profile's first %d windows disagree beyond the margin (a busy spell of the machine?): "
        "one more window of each profile point, the median of %d",
        FIRST_WINDOWS,
        WINDOWS,
    )
    want_repeats(tuner.sweep_dir, {p.id: WINDOWS for p in everything})
    return tuner.run([with_repeats(p, WINDOWS) for p in everything])


def _passes(rows: pd.DataFrame, pid: str) -> dict[int, dict[str, float]]:
    """A profile point's figures in each of its windows (by repeat: one pass of the round)."""
    mine = rows[rows["point_id"] == pid]
    if mine.empty:
        _figures(mine, pid)  # raises, naming the point
    return {int(k): _figures(group, pid) for k, group in mine.groupby("repeat")}


def _aligned(
    zero: Mapping[int, dict[str, float]], some: Mapping[int, dict[str, float]]
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """The two points' figures of the passes both have (a pass's windows were measured side by
    side: they are fitted together)."""
    common = sorted(set(zero) & set(some))
    if not common:
        raise TuneError(
            "tune: the profile's two points have no window of the same pass: see the rows' error column"
        )
    return [zero[k] for k in common], [some[k] for k in common]


def _rates(rows: pd.DataFrame, pid: str) -> list[float]:
    """A plateau point's steps/s in each of its windows (median over ranks)."""
    mine = rows[(rows["point_id"] == pid) & (rows["rung"] == "full")]
    return [float(v) for v in mine.groupby("repeat")["steps_per_s"].median()]


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
    rates = _rates(rows, point.id)
    if not rates:
        log.warning("tune: the plateau point %s has no ok row: the hand-off is taken as 0", point.id)
        return fitted
    return plateau_windows(fitted, top, rates)


def _rate(rows: pd.DataFrame, pid: str, rung: str) -> float | None:
    """A profile point's steps/s at `rung` (median over ranks and runs); None without an ok row."""
    mine = rows[(rows["point_id"] == pid) & (rows["rung"] == rung)]
    return None if mine.empty else float(mine["steps_per_s"].median())


def _figures(rows: pd.DataFrame, pid: str) -> dict[str, float]:
    """One profile point's figures per rank (median over ranks and the rows' runs): the `full` rung's
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
