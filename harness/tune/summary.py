"""What tune.json holds (driver.py): the profile, the grid's predictions, the measured runs and
what each approach cost, enough to render the report and the what-if without the rows."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.ladder import caching
from analysis.load import load_results
from analysis.tune.model import (
    Config,
    Profile,
    cheapest_meeting,
    predict,
    with_cache,
)
from analysis.tune.search import SearchResult
from harness.tune.rounds import TuneError, Tuner, profile_measure
from harness_schema.settings import AUTO_RSE, Measure

TUNE_FILE = "tune.json"


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
    confirmed = measured[~measured["point_id"].isin(tuner.profile_ids)]
    lasted = _median(confirmed[confirmed["rung"] == "full"], "training_time")
    exhaustive_s = 0.0
    for x in predictions:
        rate = x.samples_per_s / prof.batch_size / prof.ranks  # a rank's steps a second
        exhaustive_s += repeats * (measure.warmup_steps / rate + window_s(measure, rate, lasted) + per_run)
    j = result.judged
    return {
        "spec": tuner.plan.spec.name,
        "created": datetime.now().isoformat(timespec="seconds"),
        "profile": prof.to_json(),
        "repeats": repeats,
        "predictions": [
            {
                **asdict(x.config),
                "samples_per_s": x.samples_per_s,
                "low": x.low,
                "high": x.high,
                "memory_gb": x.memory_gb,
                "bound": x.bound,
            }
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
        "widened": [asdict(c) for c in result.widened],
        "profile_shared": profile_shared(rows[rows["point_id"].isin(tuner.profile_ids)]),
        "windows": timed_windows(measure, measured, tuner.profile_ids),
    }


def window_s(measure: Measure, steps_per_s: float, lasted: float | None = None) -> float:
    """Seconds one of the spec's windows lasts at `steps_per_s` (a rank's), to price the grid's
    unmeasured runs: its steps; with measure.seconds, at least that; an auto window
    (steps: auto, whose `steps` is its least), as long as the confirmations' windows lasted
    (`lasted`, their median; measure.seconds where none was measured), within its least and
    most (at a slow rate its least steps outlast both)."""
    stepping = measure.steps / steps_per_s
    if measure.seconds is None:
        return stepping
    if measure.max_seconds is None:
        return max(stepping, measure.seconds)
    typical = min(max(lasted or 0.0, measure.seconds), measure.max_seconds)
    return max(stepping, typical)


def timed_windows(measure: Measure, rows: pd.DataFrame, profile_ids: set[str]) -> dict[str, Any] | None:
    """What the windows were and what they lasted, where they are sized in seconds
    (measure.seconds, steps: auto; None for windows of a number of steps, priced in steps):
    the spec's and the profile's least and most seconds (rounds.profile_measure), each
    phase's windows' durations (rank 0's ok rows), and the auto windows' relative standard
    errors with how many stopped at their most above AUTO_RSE."""
    if measure.seconds is None:
        return None
    short = profile_measure(measure)
    profiled = rows["point_id"].isin(profile_ids)
    out: dict[str, Any] = {
        "auto": measure.auto_window,
        "seconds": measure.seconds,
        "max_seconds": measure.max_seconds,
        "profile_seconds": short.seconds,
        "profile_max_seconds": short.max_seconds,
    }
    for phase, mine in (("profile", rows[profiled]), ("confirmations", rows[~profiled])):
        lasted = pd.to_numeric(mine.get("training_time", pd.Series(dtype=float)), errors="coerce").dropna()
        rse = pd.to_numeric(mine.get("window_rse", pd.Series(dtype=float)), errors="coerce").dropna()
        out[phase] = {
            "windows": len(lasted),
            "lasted": [float(lasted.min()), float(lasted.median()), float(lasted.max())]
            if len(lasted)
            else None,
            "rse": [float(rse.median()), float(rse.max())] if len(rse) else None,
            "capped": int((rse > AUTO_RSE).sum()),
        }
    return out


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


def profile_shared(rows: pd.DataFrame) -> dict[str, float] | None:
    """The CPU share other processes took while the profile's windows ran (the host sampler's
    foreign_cpu_share, harness/sampling/mates.py): the mean over its windows and the most in
    one. None where the sampler recorded none (sampler: {host: false})."""
    if "foreign_cpu_share" not in rows:
        return None
    share = pd.to_numeric(rows["foreign_cpu_share"], errors="coerce").dropna()
    if share.empty:
        return None
    return {"mean": float(share.mean()), "max": float(share.max()), "windows": len(share)}


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
