"""One point's caching ladder on one node, read from its rows (a `Ladder`, analysis/ladder/figures.py):
the repeats every rank measured, the slowest rank's figures per repeat, their medians per rung,
the data's sizes, and the rungs that failed or were skipped with their errors.

Apart from the verdict (analysis/ladder/verdict.py), which judges a Ladder: which rows count and
how ranks and repeats combine is decided here alone, before anything is judged.
"""

from __future__ import annotations

import pandas as pd

from analysis import noise
from analysis.ladder import caching
from analysis.ladder.figures import Ladder, Sizes
from harness_schema import rungs as rung_names


def ladder(group: pd.DataFrame) -> Ladder | None:
    """None when no repeat of any rung was measured by every rank."""
    unmeasured = _unmeasured(group)
    # A repeat of a rung counts only when every rank measured it: under DDP, the ranks that
    # went on alone measured another thing.
    bad = group[group["status"] != "ok"][["rung", "repeat"]].drop_duplicates()
    keys = pd.MultiIndex.from_frame(group[["rung", "repeat"]])
    ok = group[(group["status"] == "ok") & ~keys.isin(pd.MultiIndex.from_frame(bad))]
    if ok.empty:
        return None
    per_repeat = _per_repeat(ok)
    table = _per_rung(per_repeat)
    measured = list(table["rung"])
    bound = next((r for r in rung_names.BOUND_RUNGS if r in measured), measured[0])
    return Ladder(
        table=table,
        steps=per_repeat["steps_per_s"].unstack("rung")[measured],
        capacity=per_repeat["capacity"].unstack("rung")[measured],
        names=caching.transform_names(group["transform_names"].iloc[0]),
        on_cpu=bool((ok["device"] == "cpu").all()),
        bound=bound,
        unmeasured=unmeasured,
        sizes=_sizes(ok),
        given=_given(group),
    )


def _given(group: pd.DataFrame) -> bool:
    """The rows are of a loader the harness was given (loader_given names its class)."""
    if "loader_given" not in group:
        return False
    return bool(group["loader_given"].fillna("").astype(str).str.strip().ne("").any())


def _per_repeat(ok: pd.DataFrame) -> pd.DataFrame:
    """Per (rung, repeat): the slowest rank's figures (it holds the others back at every
    step), the samples of all ranks, and the lowest loader capacity of the ranks."""
    keys = ["rung", "repeat"]
    slowest = ok.loc[ok.groupby(keys)["training_time"].idxmax()].set_index(keys)
    by = ok.groupby(keys)

    def number(column: str) -> pd.Series:
        if column not in slowest:
            return pd.Series(float("nan"), index=slowest.index)
        return pd.to_numeric(slowest[column], errors="coerce")

    capacity = (
        pd.to_numeric(ok["loader_capacity"], errors="coerce").groupby([ok["rung"], ok["repeat"]]).min()
        if "loader_capacity" in ok
        else number("loader_capacity")
    )
    return pd.DataFrame(
        {
            "steps_per_s": slowest["steps"] / slowest["training_time"],
            "samples_per_s": by["samples"].sum() / slowest["training_time"],
            "capacity": capacity,
            "gpu_util": number("gpu_util"),
            "busy_cores": number("loader_cores") + number("main_cores"),
            "main_cores": number("main_cores"),
            "cpus_allotted": number("cpus_allotted"),
            "input_shapes": by["input_shapes"].max() if "input_shapes" in ok else number("input_shapes"),
        }
    )


def _per_rung(per_repeat: pd.DataFrame) -> pd.DataFrame:
    """Medians over repeats, ladder order; `ci95` is the half-width of steps/s's 95 % interval
    over its estimate (analysis.noise.relative_half_width, the table's figure of the grid)."""
    by_rung = per_repeat.reset_index().groupby("rung")
    table = by_rung[
        ["steps_per_s", "samples_per_s", "capacity", "gpu_util", "busy_cores", "main_cores", "cpus_allotted"]
    ].median()
    table["ci95"] = by_rung["steps_per_s"].agg(lambda s: noise.relative_half_width(list(s)))
    table["input_shapes"] = by_rung["input_shapes"].max()
    table = table.reset_index()
    table["position"] = table["rung"].map(rung_names.ladder_position)
    return table.sort_values("position").reset_index(drop=True)


def _unmeasured(group: pd.DataFrame) -> dict[str, str]:
    """Failed or skipped rungs, with their error: never dropped silently."""
    out: dict[str, str] = {}
    repeats = group["repeat"].nunique()
    bad = group[group["status"] != "ok"]
    for rung, rows in bad.groupby("rung", sort=False):
        parts = []
        for (status, error), cells in rows.groupby(["status", "error"], sort=True):
            which = sorted({int(r) for r in cells["repeat"]})
            where = "" if repeats == 1 else f" in repeat {', '.join(map(str, which))} of {repeats}"
            parts.append(f"{status}{where}: {error or 'no error recorded'}")
        out[str(rung)] = "; ".join(parts)
    return out


def _sizes(ok: pd.DataFrame) -> Sizes | None:
    """None for rows written before the columns existed."""
    if "cached_sample_bytes" not in ok:
        return None
    number = {c: pd.to_numeric(ok[c], errors="coerce") for c in ("cached_sample_bytes", "dataset_samples")}
    per_rung = number["cached_sample_bytes"].groupby(ok["rung"]).median().dropna()
    samples = number["dataset_samples"].max()
    limit = pd.to_numeric(ok.get("memory_limit_gb"), errors="coerce").min()
    full = ok[ok["rung"] == "full"]
    in_use = pd.to_numeric(full.get("cpu_memory_gb"), errors="coerce").groupby(full["rank"]).median().sum()
    return Sizes(
        sample_bytes={str(r): float(v) for r, v in per_rung.items()},
        samples=int(samples) if pd.notna(samples) else None,
        limit_gb=float(limit) if pd.notna(limit) else None,
        in_use_gb=float(in_use) if pd.notna(in_use) else 0.0,
    )
