"""Aggregate rows (ranks, repeats, nodes) and lay out the per-node DataLoader table of the course (004_*).

Aggregation rules, in order:
1. A *run* is the ranks that measured one (point, rung, repeat) together: the same Slurm job
   (several nodes for a multi-node point), or, outside Slurm, the same host.
2. In a run, the slowest rank decides: its training_time is the run's, and throughput is the
   samples of all ranks over it. The spread between ranks, (slowest - fastest) / median rank,
   is `rank_spread`.
3. Over the runs of a point in a table group (its repeats; with --by gpu also the nodes of one
   type), the median is reported; `spread` is the range of training_time (max - min), `cv` its
   coefficient of variation (standard deviation / mean).
"""

from __future__ import annotations

import pandas as pd
from tabulate import tabulate

from harness.config import rungs as rung_names
from harness.config import settings

# The Jean Zay table's columns, in its order (004_*), then ours.
# The Jean Zay table's columns, in its order (004_*): the job, the loader's knobs (every one
# declared, so a new knob joins the table), the two chronometers. Then ours.
JEAN_ZAY_COLUMNS = ["jobid", *settings.LOADER_COLUMNS, "loading_time", "training_time"]
EXTRA_COLUMNS = ["first_step_loading_time", "samples_per_s", "cpu_memory_gb"]
# Shown only where the sampler recorded them.
SAMPLED_COLUMNS = ["gpu_util", "energy_per_sample_j", "loader_cores"]
# The settings a row carries, as declared once in harness/config/settings.py.
WORKLOAD_COLUMNS = list(settings.WORKLOAD_COLUMNS)
LOADER_COLUMNS = list(settings.LOADER_COLUMNS)
SETTING_COLUMNS = ["sequence_step", *WORKLOAD_COLUMNS, *LOADER_COLUMNS, "device", "steps"]
FORMATS = {"terminal": "simple", "markdown": "github", "latex": "latex_booktabs", "html": "html"}
GROUPINGS = ("node", "gpu")
KEY = ["group", "sweep_dir", "point_id", "rung"]
RUN = [*KEY, "node", "repeat"]
METRICS = [
    "loading_time",
    "training_time",
    "first_step_loading_time",
    "samples_per_s",
    "steps_per_s",
    "cpu_memory_gb",
    "step_time",
    "rank_spread",
    *SAMPLED_COLUMNS,
    "gpu_power_w",
    "peak_device_memory_gb",
    "cpus_allotted",
]
UNKNOWN_TYPE = "unknown node type"


def add_nodes(rows: pd.DataFrame, meta: pd.DataFrame | None = None) -> pd.DataFrame:
    """Add `node` (the host, or hosts joined by + for a multi-node Slurm run) and `node_type`
    (GPU count and model from meta-rank<k>.json, matched by sweep, point and rank)."""
    rows = rows.copy()
    node = rows["hostname"].astype(object)
    slurm = rows["jobid"] != ""
    if slurm.any():
        run = ["sweep_dir", "point_id", "jobid"]
        hosts = rows.groupby(run, sort=False)["hostname"].transform("nunique")
        multi = slurm & (hosts > 1)
        if multi.any():
            joined = (
                rows[multi]
                .groupby(run, sort=False)["hostname"]
                .transform(lambda s: "+".join(sorted(s.unique())))
            )
            node = node.where(~multi, joined)
    rows["node"] = node
    rows["node_type"] = node_types(rows, meta) if meta is not None else ""
    return rows


def node_types(rows: pd.DataFrame, meta: pd.DataFrame) -> pd.Series:
    """`8× NVIDIA A100-SXM4-80GB`, `cpu`, or UNKNOWN_TYPE for each row."""
    if meta.empty:
        return pd.Series(UNKNOWN_TYPE, index=rows.index, dtype=object)
    meta = meta.assign(
        node_type=[type_label(d, c) for d, c in zip(meta["device_name"], meta["gpu_count"], strict=True)]
    )
    keys = ["sweep_dir", "point_id", "rank"]
    joined = rows[[*keys, "hostname"]].merge(meta[[*keys, "meta_hostname", "node_type"]], on=keys, how="left")
    joined.index = rows.index
    # A resumed point rewrites meta-rank<k>.json on its new host: trust it for that host only.
    same_host = (
        joined["meta_hostname"].isna()
        | joined["meta_hostname"].isin(["", None])
        | (joined["meta_hostname"] == joined["hostname"])
    )
    types = joined["node_type"].where(same_host)
    # The type of a host does not change: fill the rest from the host's other points.
    known = meta[meta["meta_hostname"] != ""].drop_duplicates("meta_hostname")
    by_host = dict(zip(known["meta_hostname"], known["node_type"], strict=True))
    types = types.fillna(rows["hostname"].map(by_host))
    return types.fillna(UNKNOWN_TYPE).astype(object)


def type_label(device_name: object, gpu_count: object) -> str:
    name = str(device_name or "")
    try:
        count = int(gpu_count)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        count = 0
    if not name:
        return UNKNOWN_TYPE
    return f"{count}× {name}" if count > 0 and name != "cpu" else name


def summarize(rows: pd.DataFrame, by: str = "node", meta: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (group, sweep, point, rung): the slowest rank of each run decides, then the
    median over runs. `by` is node (a table per host), gpu (per node type) or all (one group)."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty:
        return pd.DataFrame(
            columns=[*KEY, *SETTING_COLUMNS, "point_index", "jobid", "hostname", "sweep_id", "node"]
        )
    if "node" not in ok.columns or (meta is not None and (ok["node_type"] == "").all()):
        ok = add_nodes(ok, meta)
    if by == "gpu":
        group = ok["node_type"].replace("", UNKNOWN_TYPE)
    else:
        group = ok["node"] if by == "node" else pd.Series("all", index=ok.index)
    ok = ok.assign(group=group)

    grouped = ok.groupby(RUN, sort=False)
    slowest = ok.loc[grouped["training_time"].idxmax().to_numpy()]
    per_run = slowest.set_index(RUN)
    per_run = per_run.assign(
        samples=grouped["samples"].sum(),
        cpu_memory_gb=grouped["cpu_memory_gb"].sum(min_count=1),
        first_step_loading_time=grouped["first_step_loading_time"].max(),
        ranks=grouped["rank"].nunique(),
        world_size=grouped["world_size"].max(),
        slowest_rank=per_run["rank"],
        gpu_util=grouped["gpu_util"].mean(),
        gpu_power_w=grouped["gpu_power_w"].mean(),
        loader_cores=grouped["loader_cores"].mean(),
        energy_j=grouped["energy_j"].sum(min_count=1),
        energy_per_sample_j=grouped["energy_per_sample_j"].mean(),
        peak_device_memory_gb=grouped["peak_device_memory_gb"].max(),
    )
    fastest, median_rank = grouped["training_time"].min(), grouped["training_time"].median()
    per_run["rank_spread"] = (per_run["training_time"] - fastest) / median_rank
    per_run = per_run.reset_index()
    per_run["samples_per_s"] = per_run["samples"] / per_run["training_time"]
    # Energy over all ranks per sample over all ranks, where the sampler measured energy.
    measured = per_run["energy_j"].notna() & (per_run["samples"] > 0)
    per_run.loc[measured, "energy_per_sample_j"] = (
        per_run.loc[measured, "energy_j"] / per_run.loc[measured, "samples"]
    )

    by_point = per_run.groupby(KEY, sort=False)
    summary = by_point[METRICS].median()
    times = by_point["training_time"]
    summary["spread"] = times.max() - times.min()
    summary["cv"] = times.std() / times.mean()
    summary["throughput_spread"] = by_point["samples_per_s"].max() - by_point["samples_per_s"].min()
    summary["loading_spread"] = by_point["loading_time"].max() - by_point["loading_time"].min()
    summary["runs"] = by_point.size()
    summary["repeats"] = by_point["repeat"].nunique()
    summary["nodes"] = by_point["node"].nunique()
    summary["ranks"] = by_point["ranks"].min()
    summary["world_size"] = by_point["world_size"].max()
    first = by_point[
        [*SETTING_COLUMNS, "point_index", "hostname", "sweep_id", "node", "node_type", "slowest_rank"]
    ].first()
    jobid = per_run.assign(jobid=per_run["jobid"].replace("", None)).groupby(KEY, sort=False)["jobid"].first()
    out = summary.join(first).join(jobid).reset_index()
    out["jobid"] = out["jobid"].fillna(out["point_id"]).astype(object)
    out["sweep"] = [_sweep_label(s) for s in out["sweep_dir"]]
    return out


def _sweep_label(sweep_dir: str) -> str:
    parts = sweep_dir.replace("\\", "/").rstrip("/").split("/")
    return "/".join(parts[-2:])


def table_rung(summary: pd.DataFrame) -> str | None:
    """The rung the DataLoader table shows: `full` when measured, else the rung closest to it."""
    present = set(summary["rung"])
    if not present:
        return None
    return max(present, key=rung_names.ladder_position)


def table_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows the tables show: per sweep, the rung closest to `full` (a sweep of the caching
    ladder shows its full pipeline; a sweep of one rung shows that rung)."""
    if summary.empty:
        return summary
    rungs = summary.groupby("sweep_dir")["rung"].agg(lambda s: max(set(s), key=rung_names.ladder_position))
    return summary[summary["rung"] == summary["sweep_dir"].map(rungs)]


def loader_tables(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per group (node or node type): the course's columns, then ours and the settings that vary."""
    chosen = table_rows(summary)
    if chosen.empty:
        return {}
    varying = [
        c
        for c in ("sequence_step", *WORKLOAD_COLUMNS)
        if chosen[c].astype(str).nunique() > 1 or (c == "sequence_step" and (chosen[c] != "").any())
    ]
    columns = JEAN_ZAY_COLUMNS + EXTRA_COLUMNS + ["sampled"] + varying
    if chosen["rung"].nunique() > 1:
        columns.append("rung")
    if (chosen["runs"] > 1).any():
        columns += ["spread", "cv"]
    if (chosen["world_size"] > 1).any():
        columns += ["ranks", "rank_spread"]
    if (chosen["nodes"] > 1).any():
        columns.append("nodes")
    in_sequence = (chosen["sequence_step"] != "").any()
    tables = {}
    for group, rows in chosen.groupby("group", sort=True):
        # Sampled figures only where this group has some (a CPU node has no gpu_util).
        sampled = [c for c in SAMPLED_COLUMNS if rows[c].notna().any()]
        at = columns.index("sampled")
        table_columns = columns[:at] + sampled + columns[at + 1 :]
        if rows["sweep_dir"].nunique() > 1:
            table_columns.append("sweep")
        # A sequence reads in its order (each step builds on the previous); a grid by time.
        order = ["sweep", "point_index"] if in_sequence else ["sweep", "training_time"]
        ordered = rows.sort_values(order, kind="stable")
        table = ordered[table_columns].reset_index(drop=True)
        if "ranks" in table:
            # "3/4": a rank's rows are missing; the slowest of the ranks present decides.
            table["ranks"] = [
                f"{r:.0f}" if r >= w else f"{r:.0f}/{w:.0f}"
                for r, w in zip(ordered["ranks"], ordered["world_size"], strict=True)
            ]
        tables[str(group)] = table
    return tables


def render(table: pd.DataFrame, fmt: str) -> str:
    shown = table.copy()
    if "prefetch_factor" in shown:
        shown["prefetch_factor"] = shown["prefetch_factor"].map(lambda v: "-" if pd.isna(v) else int(v))
    if fmt == "csv":
        return str(shown.to_csv(index=False)).rstrip("\n")
    formats = {
        "loading_time": "{:.6f}",
        "first_step_loading_time": "{:.4f}",
        "training_time": "{:.3f}",
        "samples_per_s": "{:.2f}",
        "cpu_memory_gb": "{:.2f}",
        "spread": "{:.2f}",
        "cv": "{:.1%}",
        "rank_spread": "{:.1%}",
        "gpu_util": "{:.1f}",
        "energy_per_sample_j": "{:.4g}",
        "loader_cores": "{:.2f}",
    }
    for column, spec in formats.items():
        if column in shown:
            shown[column] = [("" if pd.isna(v) else spec.format(v)) for v in shown[column]]
    if "batch_size" in shown:
        shown["batch_size"] = shown["batch_size"].map(lambda v: "" if pd.isna(v) else int(v))
    if fmt == "terminal":
        return simple_table(list(shown.columns), shown.astype(str).to_numpy().tolist())
    return tabulate(shown, headers="keys", tablefmt=FORMATS[fmt], showindex=False, disable_numparse=True)


def simple_table(headers: list[str], rows: list[list[str]]) -> str:
    """tabulate's "simple" layout for text cells, byte for byte (a test checks it), in a
    fraction of its time: tabulate infers a type for every cell, seconds for 10,000 rows."""
    widths = [len(h) + 2 for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)
