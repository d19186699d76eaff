"""Aggregate rows (ranks, repeats) and lay out the per-node DataLoader table of the course (004_*)."""

from __future__ import annotations

import pandas as pd
from tabulate import tabulate

from harness import rungs as rung_names

# The Jean Zay table's columns, in its order (004_*), then ours.
JEAN_ZAY_COLUMNS = [
    "jobid",
    "num_workers",
    "persistent_workers",
    "pin_memory",
    "non_blocking",
    "prefetch_factor",
    "drop_last",
    "loading_time",
    "training_time",
]
EXTRA_COLUMNS = ["first_step_loading_time", "samples_per_s", "cpu_memory_gb"]
SETTING_COLUMNS = [
    "step",
    "dataset",
    "model",
    "batch_size",
    "amp",
    "compile",
    "num_workers",
    "persistent_workers",
    "pin_memory",
    "non_blocking",
    "prefetch_factor",
    "drop_last",
    "device",
    "steps",
]
FORMATS = {"terminal": "simple", "markdown": "github", "latex": "latex_booktabs"}
KEY = ["hostname", "sweep_id", "point_id", "rung"]


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (node, sweep, point, rung): the slowest rank of each repeat decides, then
    the median over repeats. `spread` is the range of training_time over repeats."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame(columns=[*KEY, *SETTING_COLUMNS, "point_index", "jobid"])
    slowest = ok.loc[ok.groupby([*KEY, "repeat"])["training_time"].idxmax()]
    per_repeat = slowest.set_index([*KEY, "repeat"])
    grouped = ok.groupby([*KEY, "repeat"])
    per_repeat = per_repeat.assign(
        samples=grouped["samples"].sum(),
        cpu_memory_gb=grouped["cpu_memory_gb"].sum(min_count=1),
        first_step_loading_time=grouped["first_step_loading_time"].max(),
        ranks=grouped["rank"].nunique(),
    ).reset_index()
    per_repeat["samples_per_s"] = per_repeat["samples"] / per_repeat["training_time"]
    metrics = [
        "loading_time",
        "training_time",
        "first_step_loading_time",
        "samples_per_s",
        "steps_per_s",
        "cpu_memory_gb",
        "step_time",
    ]
    by_point = per_repeat.groupby(KEY)
    summary = by_point[metrics].median()
    summary["spread"] = by_point["training_time"].max() - by_point["training_time"].min()
    summary["repeats"] = by_point["repeat"].nunique()
    summary["ranks"] = by_point["ranks"].max()
    first = by_point[[*SETTING_COLUMNS, "point_index"]].first()
    jobid = by_point["jobid"].agg(lambda s: next((j for j in s if j), ""))
    out = summary.join(first).assign(jobid=jobid).reset_index()
    out["jobid"] = out["jobid"].where(out["jobid"] != "", out["point_id"])
    return out


def table_rung(summary: pd.DataFrame) -> str | None:
    """The rung the DataLoader table shows: `full` when measured, else the rung closest to it."""
    present = set(summary["rung"])
    if not present:
        return None
    return max(present, key=rung_names.ladder_position)


def loader_tables(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per node: the course's columns, then ours and the other settings that vary."""
    rung = table_rung(summary)
    if rung is None:
        return {}
    chosen = summary[summary["rung"] == rung]
    varying = [
        c
        for c in ("step", "dataset", "model", "batch_size", "amp", "compile")
        if chosen[c].astype(str).nunique() > 1 or (c == "step" and (chosen[c] != "").any())
    ]
    columns = JEAN_ZAY_COLUMNS + EXTRA_COLUMNS + varying
    if (chosen["repeats"] > 1).any():
        columns.append("spread")
    if (chosen["ranks"] > 1).any():
        columns.append("ranks")
    in_sequence = (chosen["step"] != "").any()
    tables = {}
    for host, group in chosen.groupby("hostname", sort=True):
        # A sequence reads in its order (each step builds on the previous); a grid by time.
        ordered = group.sort_values("point_index" if in_sequence else "training_time")
        tables[str(host)] = ordered[columns].reset_index(drop=True)
    return tables


def render(table: pd.DataFrame, fmt: str) -> str:
    shown = table.copy()
    if "prefetch_factor" in shown:
        shown["prefetch_factor"] = shown["prefetch_factor"].map(lambda v: "-" if pd.isna(v) else int(v))
    if fmt == "csv":
        return str(shown.to_csv(index=False)).rstrip("\n")
    floats = {"loading_time": ".6f", "first_step_loading_time": ".4f", "training_time": ".3f"}
    for column, spec in floats.items():
        if column in shown:
            shown[column] = shown[column].map(lambda v, s=spec: "" if pd.isna(v) else format(v, s))
    for column in ("samples_per_s", "cpu_memory_gb", "spread"):
        if column in shown:
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    return tabulate(shown, headers="keys", tablefmt=FORMATS[fmt], showindex=False, disable_numparse=True)
