"""Aggregate rows (ranks, repeats, nodes) into one summary row per point and rung.

Aggregation rules, in order:
1. A *run* is the ranks that measured one (point, rung, repeat) together: the same Slurm job
   (several nodes for a multi-node point), or, outside Slurm, the same host.
2. In a run, the ranks share one window (they leave the warmup together through a barrier):
   the run's training_time is the longest of its ranks' (the common window), its samples are
   all ranks' delivered samples, and samples_per_s is the one over the other. Under DDP the
   gradient all-reduce makes every rank's training_time equal, so the slowest rank by
   training_time says nothing about the loader: the run's loading_time is that of the rank that
   *waited most* (`loading_rank` names it), and likewise next_time (`next_rank`). The spread of
   training_time between ranks, (slowest - fastest) / median rank, is `rank_spread`.
3. Over the runs of a point in a table group (its repeats; with --by gpu also the nodes of one
   type), the median is reported, with `runs` and `ci95`: half the width of the 95 % interval
   of the point's samples/s, relative to it, from analysis.noise (the same model, on the same
   runs, as every judgement of a difference). A run that stands out (analysis.noise.outliers)
   is named in `outliers` ("repeat 2 -8%": its repeat, and how far it lies from the median),
   and stays in every figure. The runs' own figures stay in `run_samples_per_s` and
   `run_loading_time`, for the judgements (compare, the recommendation, the expectations),
   with `run_passes`: the pass each run was measured in (`<sweep>#<run_pass>`, None where the
   point's repeats ran back to back), by which two points' runs are paired (analysis.noise).
4. The tail of the wait (`loading_time_p50`, `_p95`, `_p99`, `waited_share`) is, in a run, that
   of the rank with the longest tail: under DDP every rank waits for the one whose read stalled.
"""

from __future__ import annotations

import statistics
from itertools import islice

import numpy as np
import pandas as pd

from analysis import noise
from harness_schema import rungs as rung_names
from harness_schema import settings

# The settings a row carries, as declared once in harness_schema/settings.py.
WORKLOAD_COLUMNS = list(settings.WORKLOAD_COLUMNS)
LOADER_COLUMNS = list(settings.LOADER_COLUMNS)
SETTING_COLUMNS = ["sequence_step", *WORKLOAD_COLUMNS, *LOADER_COLUMNS, "device", "steps"]
# Shown only where the sampler recorded them.
SAMPLED_COLUMNS = ["gpu_util", "energy_per_sample_j", "loader_cores"]
GROUPINGS = ("node", "gpu")
KEY = ["group", "sweep_dir", "point_id", "rung"]
RUN = [*KEY, "node", "repeat"]
TAIL_COLUMNS = ["loading_time_p50", "loading_time_p95", "loading_time_p99", "waited_share"]
METRICS = [
    "loading_time",
    *TAIL_COLUMNS,
    "next_time",
    "training_time",
    "first_step_loading_time",
    "samples_per_s",
    "steps_per_s",
    "cpu_memory_gb",
    "step_time",
    "rank_spread",
    "epoch_restarts",
    "epoch_restart_time",
    "run_seconds",
    *SAMPLED_COLUMNS,
    "gpu_power_w",
    "peak_device_memory_gb",
    "cpus_allotted",
    "foreign_cpu_share",
    "idle_workers",
    "delivery_period",
]
# Per point, taken from its first run: the settings and where it ran.
FIRST_COLUMNS = [*SETTING_COLUMNS, "point_index", "hostname", "sweep_id", "node", "node_type"]
UNKNOWN_TYPE = "unknown node type"


def add_nodes(rows: pd.DataFrame, meta: pd.DataFrame | None = None) -> pd.DataFrame:
    """Add `node` (the host, or hosts joined by + for a multi-node Slurm run, or `vm ×2 emulated
    nodes` for a point of 2 nodes on one machine) and `node_type`
    (GPU count and model from `meta-rank<k>.json`, matched by sweep, point and rank)."""
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
    # Nodes emulated on one machine (the local backend's point of slurm.nodes: 2): a table of
    # their own, as a Slurm run's n1+n2 has, not among the one-node points of the host.
    sizes = pd.to_numeric(rows["nodes"], errors="coerce") if "nodes" in rows else None
    if sizes is not None and (sizes > 1).any():
        emulated = (sizes > 1) & (node == rows["hostname"])
        label = node.astype(str) + " ×" + sizes.fillna(1).astype(int).astype(str) + " emulated nodes"
        node = node.where(~emulated, label)
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
    """One row per (group, sweep, point, rung): each run's ranks aggregated (rule 2 of the
    module), then the median over runs. `by` is node (a table per host), gpu (per node type)
    or all (one group)."""
    if not (rows["status"] == "ok").any():
        return pd.DataFrame(columns=[*KEY, *FIRST_COLUMNS, "jobid"])
    return summarize_grouped(with_groups(rows, by, meta))


def with_groups(rows: pd.DataFrame, by: str = "node", meta: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows with `group`, the table each falls in (summarize's `by`): every row's, the
    failed ones too: a point's failed runs are counted in the group where its ok runs are shown."""
    if "node" not in rows.columns or (meta is not None and (rows["node_type"] == "").all()):
        rows = add_nodes(rows, meta)
    if by == "gpu":
        group = rows["node_type"].replace("", UNKNOWN_TYPE)
    else:
        group = rows["node"] if by == "node" else pd.Series("all", index=rows.index)
    return rows.assign(group=group)


def summarize_grouped(rows: pd.DataFrame) -> pd.DataFrame:
    """summarize's rows of rows that have their `group` (with_groups), some of them ok. Each
    sweep's summary rows depend on its own rows alone (every key holds sweep_dir): the
    summaries of sweeps one after the other are theirs at once (analysis/summary_cache.py)."""
    summary = over_runs(per_run(rows[rows["status"] == "ok"]))
    return _with_failed_runs(summary, rows)


def _with_failed_runs(summary: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """`failed_runs`: the point's runs (repeats, nodes) of the rung with a failed row on some
    rank; `all_runs`: its runs of the rung that left a row, ok or failed. A point whose
    configuration fails now and then is not to be recommended from the runs that survived."""
    measured = rows[rows["status"].isin(["ok", "failed"])]
    runs = measured.drop_duplicates(RUN)
    failed = measured[measured["status"] == "failed"].drop_duplicates(RUN)
    counts = pd.DataFrame(
        {
            "all_runs": runs.groupby(KEY, sort=False).size(),
            "failed_runs": failed.groupby(KEY, sort=False).size(),
        }
    )
    out = summary.merge(counts, left_on=KEY, right_index=True, how="left")
    out["failed_runs"] = out["failed_runs"].fillna(0).astype(int)
    out["all_runs"] = out["all_runs"].fillna(out["runs"]).astype(int)
    return out


def per_run(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per run (RUN): the common window, all ranks' samples, the rank that waited most."""
    grouped = ok.groupby(RUN, sort=False)
    runs = grouped[[c for c in FIRST_COLUMNS if c != "node"] + ["jobid"]].first()
    runs = runs.assign(
        # What measuring the run took (warmup and loader start included): the cost of one
        # more repeat, which the recommendation states where more would decide.
        run_seconds=_run_seconds(ok).groupby([ok[c] for c in RUN], sort=False).max(),
        training_time=grouped["training_time"].max(),
        samples=grouped["samples"].sum(),
        # The slowest rank's steps over its window: the steps of the common window.
        steps_per_s=grouped["steps_per_s"].min(),
        step_time=grouped["step_time"].max(),
        epoch_steps=grouped["epoch_steps"].min(),
        epoch_restarts=grouped["epoch_restarts"].max(),
        epoch_restart_time=grouped["epoch_restart_time"].max(),
        window_steady=_all_true(ok, RUN, "window_steady"),
        cpu_memory_gb=grouped["cpu_memory_gb"].sum(min_count=1),
        first_step_loading_time=grouped["first_step_loading_time"].max(),
        ranks=grouped["rank"].nunique(),
        world_size=grouped["world_size"].max(),
        gpu_util=grouped["gpu_util"].mean(),
        gpu_power_w=grouped["gpu_power_w"].mean(),
        loader_cores=grouped["loader_cores"].mean(),
        energy_j=grouped["energy_j"].sum(min_count=1),
        energy_per_sample_j=grouped["energy_per_sample_j"].mean(),
        peak_device_memory_gb=grouped["peak_device_memory_gb"].max(),
        cpus_allotted=grouped["cpus_allotted"].max(),
        # The most shared of the run's machines: its ranks wait for the slowest.
        foreign_cpu_share=grouped["foreign_cpu_share"].max(),
        # The ranks of a run measured it in one pass.
        run_pass=grouped["run_pass"].max() if "run_pass" in ok else float("nan"),
        # Workers that made no batch (a stream with fewer shards than workers): any rank's.
        idle_workers=grouped["idle_workers"].max(),
        # Bursts of the loader's delivery (steps per period), where any rank saw them.
        delivery_period=grouped["delivery_period"].max() if "delivery_period" in ok else float("nan"),
        # An auto window's precision: its least precise rank's (they ended it together).
        window_rse=grouped["window_rse"].max() if "window_rse" in ok else float("nan"),
        **{column: grouped[column].max() for column in TAIL_COLUMNS},
    )
    for column, rank_column in (("loading_time", "loading_rank"), ("next_time", "next_rank")):
        runs[column], runs[rank_column] = _most_waiting(ok, column)
    fastest, median_rank = grouped["training_time"].min(), grouped["training_time"].median()
    runs["rank_spread"] = (runs["training_time"] - fastest) / median_rank
    runs = runs.reset_index()
    runs["samples_per_s"] = runs["samples"] / runs["training_time"]
    # Energy over all ranks per sample over all ranks, where the sampler measured energy.
    measured = runs["energy_j"].notna() & (runs["samples"] > 0)
    runs.loc[measured, "energy_per_sample_j"] = runs.loc[measured, "energy_j"] / runs.loc[measured, "samples"]
    return runs


def _run_seconds(ok: pd.DataFrame) -> pd.Series:
    """Per row, finished_at - started_at in seconds (NaN where a row lacks them)."""
    if "started_at" not in ok or "finished_at" not in ok:
        return pd.Series(float("nan"), index=ok.index)
    start = pd.to_datetime(ok["started_at"], errors="coerce", utc=True, format="ISO8601")
    end = pd.to_datetime(ok["finished_at"], errors="coerce", utc=True, format="ISO8601")
    return (end - start).dt.total_seconds()


def _most_waiting(ok: pd.DataFrame, column: str) -> tuple[pd.Series, pd.Series]:
    """Per run, the longest wait of its ranks and the rank that had it (NaN where none measured).
    Not the rank slowest by training_time: under DDP those are all equal, and the pick would
    be an accident."""
    waits = ok[column].astype(float)
    # idxmax needs a number in every group; a run with no figure gets NaN back below.
    at = waits.fillna(float("-inf")).groupby([ok[c] for c in RUN], sort=False).idxmax()
    longest = waits.loc[at.to_numpy()].to_numpy()
    rank = ok.loc[at.to_numpy(), "rank"].astype(float).to_numpy()
    measured = ~pd.isna(longest)
    return (
        pd.Series(longest, index=at.index),
        pd.Series(rank, index=at.index).where(measured),
    )


def _all_true(frame: pd.DataFrame, by: list[str], column: str) -> pd.Series:
    """Per group of `by`: False where one value is False, True where all known ones are True,
    NaN where none is known (a window too short to judge)."""
    known = frame[column].map({True: 1.0, False: 0.0})
    lowest = known.groupby([frame[c] for c in by], sort=False).min()
    return lowest.map({1.0: True, 0.0: False})


def over_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per point (KEY): the median over its runs, the noise of the runs, their figures."""
    by_point = runs.groupby(KEY, sort=False)
    summary = by_point[METRICS].median()
    codes = by_point.ngroup().to_numpy()
    rates = _tuples(runs["samples_per_s"], codes, summary.index)
    summary["ci95"] = pd.Series(
        noise.relative_half_widths(rates.tolist()), index=summary.index, dtype=object
    ).astype(float)
    summary["run_samples_per_s"] = rates
    summary["outliers"] = _outliers(runs, rates, codes)
    summary["run_loading_time"] = _tuples(runs["loading_time"], codes, summary.index)
    summary["run_passes"] = _tuples(_pass_labels(runs), codes, summary.index)
    summary["runs"] = by_point.size()
    summary["repeats"] = by_point["repeat"].nunique()
    summary["nodes"] = by_point["node"].nunique()
    summary["ranks"] = by_point["ranks"].min()
    summary["world_size"] = by_point["world_size"].max()
    summary["epoch_steps"] = by_point["epoch_steps"].min()
    # False where a run's window was not steady; NaN (not shown) where no run could tell.
    summary["steady"] = _all_true(runs, KEY, "window_steady")
    summary["unsteady_runs"] = (
        runs["window_steady"].eq(False).groupby([runs[c] for c in KEY], sort=False).sum()
    )
    # Auto windows that stopped at measure.max_seconds short of their precision.
    summary["imprecise_runs"] = (
        runs["window_rse"].gt(settings.AUTO_RSE).groupby([runs[c] for c in KEY], sort=False).sum()
    )
    summary["window_rse"] = runs.groupby(KEY, sort=False)["window_rse"].max()
    for column in ("loading_rank", "next_rank"):
        summary[column] = _usual(runs, column)
    first = by_point[FIRST_COLUMNS].first()
    jobid = runs.assign(jobid=runs["jobid"].replace("", None)).groupby(KEY, sort=False)["jobid"].first()
    out = summary.join(first).join(jobid).reset_index()
    out["jobid"] = out["jobid"].fillna(out["point_id"]).astype(object)
    labels = {d: sweep_label(d) for d in out["sweep_dir"].unique()}
    out["sweep"] = out["sweep_dir"].map(labels).astype(object)
    return out


def _pass_labels(runs: pd.DataFrame) -> pd.Series:
    """Per run, its pass as `<sweep_dir>#<run_pass>` (passes are numbered per sweep), or None
    where the run was not measured in an interleaved pass (Slurm, results older than passes)."""
    passes = runs["run_pass"] if "run_pass" in runs else pd.Series(float("nan"), index=runs.index)
    missing = passes.isna().tolist()  # pd.isna of each, in one call
    labels = [
        None if na else f"{sweep}#{int(number)}"
        for sweep, number, na in zip(runs["sweep_dir"].tolist(), passes.tolist(), missing, strict=True)
    ]
    return pd.Series(labels, index=runs.index, dtype=object)


def _tuples(values: pd.Series, codes: np.ndarray, index: pd.Index) -> pd.Series:
    """Per group (`codes`: each row's group, numbered as `index` lists them), its values in
    the rows' order as a tuple: groupby(...).agg(tuple), in one pass rather than a Series per
    group (most of the time of summarize on 10,000 points)."""
    items = values.tolist()
    if len(codes) > 1 and not (codes[1:] >= codes[:-1]).all():  # rows not grouped: group them, stably
        order = np.argsort(codes, kind="stable")
        items = [items[i] for i in order.tolist()]
    sizes = np.bincount(codes, minlength=len(index)).tolist() if len(codes) else [0] * len(index)
    rest = iter(items)
    return pd.Series([tuple(islice(rest, size)) for size in sizes], index=index, dtype=object)


def _outliers(runs: pd.DataFrame, rates: pd.Series, codes: np.ndarray) -> pd.Series:
    """Per point, its runs that stand out, as `repeat 2 -8%` (with the node where a point's
    runs come from several): "" where none does."""
    several = runs.groupby(KEY, sort=False)["node"].transform("nunique") > 1
    label = "repeat " + runs["repeat"].astype(str)
    label = label.where(~several, runs["node"].astype(str) + " " + label)
    labels = _tuples(label, codes, rates.index)
    cells = []
    for values, names in zip(rates, labels, strict=True):
        if len(values) < 3:  # noise.outliers names none under 3 runs
            cells.append("")
            continue
        middle = statistics.median(values)
        cells.append("; ".join(f"{names[i]} {values[i] / middle - 1:+.0%}" for i in noise.outliers(values)))
    return pd.Series(cells, index=rates.index, dtype=object)


def _usual(runs: pd.DataFrame, column: str) -> pd.Series:
    """Per point, the value of `column` most runs had (the lowest on a tie); NaN where none."""
    counts = runs.dropna(subset=[column]).groupby([*KEY, column], sort=True).size()
    if counts.empty:
        return pd.Series(dtype=float)
    top = counts.sort_values(ascending=False, kind="stable").reset_index()
    return top.drop_duplicates(KEY).set_index(KEY)[column]


def varies(values: pd.Series) -> bool:
    """values.astype(str).nunique() > 1, without making 100,000 strings where the dtype allows:
    for bools and integers each value has its own text, and so for floats except 0.0 and -0.0
    (equal, written apart) and NaN (text on pandas 2, "nan"; missing on 3): those take the strings."""
    kind = values.dtype.kind if isinstance(values.dtype, np.dtype) else "O"
    if kind in "biu" or (kind == "f" and not ((values == 0) | values.isna()).any()):
        return bool(values.nunique() > 1)
    return bool(values.astype(str).nunique() > 1)


def sweep_label(sweep_dir: str) -> str:
    """How a sweep is named in a report: `<spec>/<sweep id>`, the last two parts of its folder."""
    parts = sweep_dir.replace("\\", "/").rstrip("/").split("/")
    return "/".join(parts[-2:])


def table_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows the tables show: per sweep, the rung closest to `full` (a sweep of the caching
    ladder shows its full pipeline; a sweep of one rung shows that rung)."""
    if summary.empty:
        return summary
    rungs = summary.groupby("sweep_dir")["rung"].agg(lambda s: max(set(s), key=rung_names.ladder_position))
    return summary[summary["rung"] == summary["sweep_dir"].map(rungs)]
