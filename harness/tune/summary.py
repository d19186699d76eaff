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

from analysis import caching
from analysis.load import load_results
from analysis.tune.model import (
    Config,
    Profile,
    cheapest_meeting,
    predict,
    with_cache,
)
from analysis.tune.search import SearchResult
from harness.tune.rounds import TuneError, Tuner

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
