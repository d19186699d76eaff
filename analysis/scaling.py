"""How many GPUs the input pipeline feeds: the same workload at several sizes (slurm.nodes: [1, 2,
4]), and the size where it gives way.

Read from result rows only (torch-free, a login node). A *series* is the points of one sweep that
differ in size alone (their settings equal); a series of two sizes or more gets a table:

- `samples_per_s`: all ranks together, over the common window (analysis/aggregate.py's rule);
- `per_gpu`: that over the ranks (a rank is one GPU; on an emulated accelerator, one rank);
- `au`: accelerator utilisation, time computing over wall time, MLPerf Storage's figure (the
  DLIO benchmark: https://github.com/argonne-lcf/dlio_benchmark, "AU"). Under DDP every rank
  waits for the one whose data came last, so a run's AU is 1 - the longest wait for data of its
  ranks (loading_time_total) over the window (training_time);
- `loading_time`: the wait for data per step, of the rank that waited most;
- `stage`: where the point measured the caching ladder, its costliest stage at that size (the
  wait each stage adds per step, between neighbouring rungs) and its share of the full rung's
  wait: reading from storage, or decoding and transforms on the node's CPUs.

Then two findings: the largest size up to which every size holds AU >= `au_threshold` (MLPerf
Storage's 90 % by default), and the first step between sizes where per-GPU throughput falls by
more than FALL: "storage gives way between 2 and 4 nodes: per-GPU samples/s -38 %, reading the
stored bytes 81 % of the wait for data". A series that holds names nothing.

Medians over repeats; one run per size judges a fall against FALL alone (no interval).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pandas as pd

from analysis.aggregate import sweep_label
from harness_schema import rungs as rung_names
from harness_schema import settings

AU_THRESHOLD = 0.90
"""MLPerf Storage's pass mark: a storage system feeds N accelerators when each is at least 90 %
busy (its training workloads' AU)."""
FALL = 0.15
"""A fall of per-GPU samples/s between two neighbouring sizes named only beyond this: 15 %,
three times the 5 % margin within which two configurations are called tied (analysis/noise.py),
so that one run's jitter on a shared machine does not name a knee."""

SERIES_COLUMNS = ["sweep_dir", "sequence_step", *settings.SETTING_COLUMNS]
"""What a series of sizes shares: a sweep's points whose settings are equal."""

# The stage between two neighbouring rungs (the lower one, the full pipeline's side, first), and
# whom it loads: the words of analysis/ladder/verdict_text.py's _elementary, where they match.
_STAGES: dict[tuple[str, str], tuple[str, str]] = {
    ("full", "raw_bytes"): ("reading the stored bytes", "storage"),
    ("full", "raw_sample"): ("raw data loading (reading and decoding)", "storage"),
    ("raw_bytes", "raw_sample"): ("decoding", "the node's CPUs"),
    ("raw_sample", "processed_sample"): ("transforms", "the node's CPUs"),
    ("processed_sample", "host_batch"): ("collation and worker IPC", "the node's CPUs"),
    ("host_batch", "device_batch"): ("host-to-device copy", "the host-to-device copy"),
}


@dataclass(frozen=True, slots=True)
class Scaling:
    """One series: its table (a row per size, smallest first) and its findings."""

    sweep_dir: str
    label: str
    """The settings the series shares that vary in its sweep, or its sweep's name."""
    table: pd.DataFrame
    holds: str
    """The AU finding, a sentence."""
    falls: str | None
    """Where per-GPU throughput falls, a sentence; None where it holds at every size."""
    knee: tuple[int, int] | None = None
    """(last size that held, first that fell), in ranks, where it falls."""
    who: str | None = None
    """storage, the node's CPUs, ... : whom the costliest stage at the fall loads."""
    notes: list[str] = field(default_factory=list)


RUN = ["sweep_dir", "point_id", "rung", "repeat"]
"""A run of a point: every rank's row of one rung and repeat."""


def scale_count(rows: pd.DataFrame) -> int:
    """How many sizes the rows span (nodes, ranks): the report adds its section above one."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty:
        return 0
    return int(_sizes(ok).drop_duplicates().shape[0])


def scaling(rows: pd.DataFrame, au_threshold: float = AU_THRESHOLD) -> list[Scaling]:
    """Every series of two sizes or more in the rows, with its findings."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty:
        return []
    ok = ok.assign(nodes=_sizes(ok)["nodes"])
    runs = _per_run(ok)
    points = runs.groupby(["sweep_dir", "point_id", "rung"], sort=False).agg(
        samples_per_s=("samples_per_s", "median"),
        au=("au", "median"),
        loading_time=("loading_time", "median"),
        world_size=("world_size", "max"),
        nodes=("nodes", "max"),
        repeats=("repeat", "nunique"),
    )
    points = points.reset_index()
    keys = ok.drop_duplicates(["sweep_dir", "point_id"]).set_index(["sweep_dir", "point_id"])
    keys = keys[[c for c in SERIES_COLUMNS if c != "sweep_dir"]].astype(str)
    points = points.join(keys, on=["sweep_dir", "point_id"])
    out = []
    for _, series in points.groupby(SERIES_COLUMNS, sort=False, dropna=False):
        if series[["nodes", "world_size"]].drop_duplicates().shape[0] < 2:
            continue
        out.append(_series(series, au_threshold, _label(series, points)))
    return out


def _sizes(ok: pd.DataFrame) -> pd.DataFrame:
    """Per row, its point's nodes and ranks: the row's `nodes` where written (the planned size),
    else the hosts of its run (a Slurm job's), else 1."""
    hosts = ok.groupby(RUN, sort=False)["hostname"].transform("nunique")
    nodes = ok["nodes"] if "nodes" in ok else pd.Series(float("nan"), index=ok.index)
    nodes = pd.to_numeric(nodes, errors="coerce").fillna(hosts).astype(int)
    return pd.DataFrame({"nodes": nodes, "world_size": ok["world_size"].astype(int)})


def _per_run(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per run: all ranks' samples over the common window, AU from the rank that waited
    most, its wait per step."""
    waited = ok["loading_time_total"].astype(float) / ok["training_time"].astype(float)
    grouped = ok.assign(waited=waited).groupby(RUN, sort=False)
    runs = grouped.agg(
        samples=("samples", "sum"),
        training_time=("training_time", "max"),
        waited=("waited", "max"),
        loading_time=("loading_time", "max"),
        world_size=("world_size", "max"),
        nodes=("nodes", "max"),
    ).reset_index()
    runs["samples_per_s"] = runs["samples"] / runs["training_time"]
    runs["au"] = (1 - runs["waited"]).clip(lower=0.0)
    return runs


def _label(series: pd.DataFrame, points: pd.DataFrame) -> str:
    """The settings that set this series apart in its sweep (num_workers=4), or the sweep."""
    sweep = points[points["sweep_dir"] == series["sweep_dir"].iloc[0]]
    varying = [c for c in SERIES_COLUMNS[1:] if sweep[c].nunique() > 1]
    first = series.iloc[0]
    return ", ".join(f"{c}={first[c]}" for c in varying) or sweep_label(str(series["sweep_dir"].iloc[0]))


def _series(series: pd.DataFrame, au_threshold: float, label: str) -> Scaling:
    rung = max(series["rung"].unique(), key=rung_names.ladder_position)  # full where measured
    at = series[series["rung"] == rung].sort_values(["world_size", "nodes"]).reset_index(drop=True)
    at["per_gpu"] = at["samples_per_s"] / at["world_size"]
    stages = [_costliest(series[series["point_id"] == pid]) for pid in at["point_id"]]
    at["stage"] = [f"{s[0]} {s[2]:.0%}" if s else "" for s in stages]
    table = pd.DataFrame(
        {
            "nodes": at["nodes"],
            "ranks": at["world_size"],
            "samples_per_s": at["samples_per_s"],
            "per_gpu_samples_per_s": at["per_gpu"],
            "au": at["au"],
            "loading_time": at["loading_time"],
            "costliest_stage": at["stage"],
            "point_id": at["point_id"],
        }
    )
    words = _size_words(at)
    holds = _holds(at, au_threshold, words)
    falls, knee, who = _fall(at, stages, words)
    notes = []
    if (at["repeats"] < 2).any():
        notes.append(f"one run per size: a fall is named beyond {FALL:.0%} alone, with no interval")
    return Scaling(str(at["sweep_dir"].iloc[0]), label, table, holds, falls, knee, who, notes)


def _fall(
    at: pd.DataFrame, stages: list[tuple[str, str, float] | None], words: list[str]
) -> tuple[str | None, tuple[int, int] | None, str | None]:
    """The first step between sizes where per-GPU samples/s falls beyond FALL: the sentence, the
    step in ranks, and whom the fall loads. With the compute of a step unchanged, a rank's rate
    goes as its AU: the part of the fall the wait for data explains is the AU's ratio. The input
    pipeline is named only where that part alone falls beyond FALL; the rest of a fall is the
    step's own (the gradient all-reduce, a machine shared by the ranks), and is said so."""
    for i in range(1, len(at)):
        change = at.loc[i, "per_gpu"] / at.loc[i - 1, "per_gpu"] - 1
        if change >= -FALL:
            continue
        knee = (int(at.loc[i - 1, "world_size"]), int(at.loc[i, "world_size"]))
        before, after = at.loc[i - 1, "au"], at.loc[i, "au"]
        explained = after / before - 1 if before > 0 else 0.0
        between = f"between {words[i - 1]} and {words[i]}: per-GPU samples/s {change:+.0%}"
        au = f"AU {before:.0%} -> {after:.0%}"
        if explained >= -FALL:
            return (
                f"the step slows {between}, of which the wait for data explains {explained:+.0%} "
                f"({au}): not the input pipeline (the gradient all-reduce, or a machine shared by the ranks)",
                knee,
                "the step",
            )
        stage = stages[i]
        if stage is None:
            why = f"{au} (the rungs [raw_bytes, full] would tell storage from the CPUs)"
            return f"the input pipeline gives way {between}, {why}", knee, "the input pipeline"
        return (
            f"{stage[1]} gives way {between}, {stage[0]} {stage[2]:.0%} of the wait for data, {au}",
            knee,
            stage[1],
        )
    return None, None, None


def _size_words(at: pd.DataFrame) -> list[str]:
    """How each size is named: by its nodes where only nodes vary, else by its GPUs (ranks)."""
    per_node = (at["world_size"] / at["nodes"]).nunique() == 1
    if per_node and at["nodes"].nunique() == len(at):
        return [f"{n} node{'s' if n != 1 else ''}" for n in at["nodes"]]
    return [f"{r} GPU{'s' if r != 1 else ''}" for r in at["world_size"]]


def _holds(at: pd.DataFrame, threshold: float, words: list[str]) -> str:
    """The largest size up to which every size keeps AU >= threshold."""
    held = 0
    while held < len(at) and at.loc[held, "au"] >= threshold:
        held += 1
    if held == 0:
        best = at["au"].idxmax()
        return f"no size holds AU >= {threshold:.0%} (the most: {at.loc[best, 'au']:.1%} at {words[best]})"
    if held == len(at):
        return f"every size holds AU >= {threshold:.0%}, up to {words[-1]} (the largest measured)"
    return (
        f"the largest size holding AU >= {threshold:.0%}: {words[held - 1]} "
        f"(AU {at.loc[held - 1, 'au']:.1%}; {at.loc[held, 'au']:.1%} at {words[held]})"
    )


def _costliest(point: pd.DataFrame) -> tuple[str, str, float] | None:
    """(stage words, whom it loads, its share of the full rung's wait) of the stage that adds the
    most wait per step between neighbouring measured rungs; None without two rungs."""
    waits = point.set_index("rung")["loading_time"].dropna()
    order = sorted(waits.index, key=rung_names.ladder_position)  # bound first
    if len(order) < 2:
        return None
    total = float(waits[order[-1]])
    best: tuple[str, str, float] | None = None
    most = 0.0
    for above, below in itertools.pairwise(order):
        cost = float(waits[below] - waits[above])
        if cost > most:
            words, who = _STAGES.get((below, above), (f"{above} to {below}", "the input pipeline"))
            most, best = cost, (words, who, cost / total if total > 0 else 0.0)
    return best


def render_scaling(found: list[Scaling], fmt: str) -> str:
    """Each series' table and its findings, in `fmt` (the report's formats)."""
    from analysis.render.tables import render

    parts = []
    for s in found:
        shown = s.table.copy()
        if fmt != "csv":
            # samples_per_s and loading_time as every table of the report shows them (tables.py)
            shown["per_gpu_samples_per_s"] = shown["per_gpu_samples_per_s"].map(lambda v: f"{v:.2f}")
            shown["au"] = shown["au"].map(lambda v: f"{v:.0%}")
        lines = [f"{s.label}:" if fmt == "terminal" else s.label, render(shown, fmt)]
        if fmt != "csv":
            lines += [
                s.holds,
                s.falls or "per-GPU samples/s holds at every size: nothing gives way",
                *s.notes,
            ]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
