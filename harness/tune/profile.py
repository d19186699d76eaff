"""The profile of `harness tune` (driver.py, step 1): the points it runs and the model's fit
from their rows (analysis/tune/model.py's fit_profile, with_plateau, with_copy_mode)."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pandas as pd

from analysis.tune.model import (
    COPY,
    Config,
    Profile,
    configs_in_mode,
    copy_modes,
    fit_profile,
    plateau_config,
    with_copy_mode,
    with_plateau,
)
from harness.config import rungs as rung_names
from harness.config.plan import Point
from harness.tune.rounds import TuneError, Tuner

log = logging.getLogger(__name__)

PROFILE_RUNGS = ("host_batch", "full")
PROFILED_WORKERS = 1


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
