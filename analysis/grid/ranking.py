"""A grid's rows grouped per node (or node type) and sweep, the points of each group ranked
cheapest first (CHEAPNESS) and judged against the group's best (analysis.noise's three-way rule),
with the points left out of the ranking (failed runs, missing ranks) and the configurations
merged where a setting has no effect on the device (NO_EFFECT_OFF_CUDA)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from analysis import noise
from analysis.aggregate import LOADER_COLUMNS, WORKLOAD_COLUMNS, table_rows, varies
from analysis.grid.choices import Choice, Row, as_passes, choice_of, passes_of
from analysis.grid.machine import SHARED, idle_workers, shared_machine
from analysis.grid.records import Records
from analysis.grid.tail import heavy_tailed
from harness_schema.settings import WORKER_ONLY

MIN_RUNS = 3
"""The runs a point with one run is asked for first (two give Student's t 12.7: no answer)."""


CHEAPNESS = ["num_workers", "persistent_workers", "cpu_memory_gb"]


NO_EFFECT_OFF_CUDA = ("pin_memory", "non_blocking")
"""Settings that change nothing where the device is not CUDA: the harness pins memory only for
a CUDA device (harness/execution/ladder.py, make_loader), and a copy to the CPU is no copy."""


@dataclass(frozen=True, slots=True)
class Group:
    """One group's and sweep's points, ready to rank: identical configurations merged."""

    group: str
    sweep_dir: str
    rows: pd.DataFrame
    """The points that can be ranked: every run ok on every rank."""
    records: Records
    """`rows` as Records gives them, in their order."""
    unranked: tuple[tuple[Row, str], ...]
    """The others, each with why."""
    complete: pd.DataFrame
    """The points every rank of every run measured (failed runs or not): a baseline's candidates."""
    shown: list[str]
    notes: tuple[str, ...]
    first: pd.Series
    """The group's first row as the table shows it: its sweep and rung."""


def groups(chosen: pd.DataFrame) -> Iterator[Group]:
    shown_by_sweep = {s: _shown_settings(rows) for s, rows in chosen.groupby("sweep_dir")}
    for (group, sweep_dir), rows in chosen.groupby(["group", "sweep_dir"], sort=True):
        merged, hidden, notes = _merge_identical(rows)
        records = Records.of(merged)
        reasons = _unranked_reasons(records)
        kept = [i for i in range(len(records)) if i not in reasons]
        yield Group(
            group=str(group),
            sweep_dir=str(sweep_dir),
            rows=merged if not reasons else merged.iloc[kept],
            records=records.take(kept),
            unranked=tuple((records[i], r) for i, r in reasons.items()),
            complete=merged[every_rank(merged)],
            shown=[c for c in shown_by_sweep[sweep_dir] if c not in hidden],
            notes=(*notes, *shared_machine(rows), *idle_workers(rows)),
            first=rows.iloc[0],
        )


def _unranked_reasons(records: Records) -> dict[int, str]:
    """Position -> why, for the rows that cannot be ranked (_unranked_reason), in their order;
    asked only of the rows that may have a reason (failed runs, or fewer ranks than the world):
    the others have none."""
    n = len(records)
    failed = records.columns.get("failed_runs", [0] * n)
    ranks, world = records.column("ranks"), records.column("world_size")
    maybe = (i for i in range(n) if (failed[i] or 0) or ranks[i] < world[i])
    return {i: r for i in maybe if (r := _unranked_reason(records[i]))}


def _unranked_reason(row: Row) -> str:
    """Why the point cannot be ranked ("" when it can): runs that failed, or missing ranks."""
    reasons = []
    failed, runs = int(row.get("failed_runs", 0) or 0), int(row.get("all_runs", 0) or 0)
    if failed:
        reasons.append(f"{failed} of {max(runs, failed)} runs failed (see harness status)")
    if row["ranks"] < row["world_size"]:
        reasons.append(
            f"not every rank measured (ranks {row['ranks']:.0f}/{row['world_size']:.0f}): "
            "its figures are those of the ranks present"
        )
    return "; ".join(reasons)


def every_rank(rows: pd.DataFrame) -> pd.Series:
    """Per point: every rank of every run left an ok row."""
    return ~(rows["ranks"] < rows["world_size"])


def _merge_identical(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str], tuple[str, ...]]:
    """Points that differ only in settings with no effect on their device (NO_EFFECT_OFF_CUDA,
    where the device is not CUDA) as one row: the lowest point index's, every run pooled. Also
    the settings no longer to show, and the note that says so (once)."""
    off = ~rows["device"].astype(str).str.startswith("cuda")
    varying = [c for c in NO_EFFECT_OFF_CUDA if c in rows and rows.loc[off, c].astype(str).nunique() > 1]
    if not varying:
        return rows, [], ()
    kinds = rows["device"].astype(str).str.partition(":")[0]
    columns = ["sequence_step", *WORKLOAD_COLUMNS, *LOADER_COLUMNS]
    keys = [
        (kind, *(("-" if c in NO_EFFECT_OFF_CUDA and kind != "cuda" else str(row[c])) for c in columns))
        for kind, (_, row) in zip(kinds, rows.iterrows(), strict=True)
    ]
    merged = [
        _pooled(members.sort_values("point_index", kind="stable"))
        for _, members in rows.groupby(pd.Series(keys, index=rows.index), sort=False)
    ]
    devices = " and ".join(sorted(set(kinds[off])))
    note = (
        f"{' and '.join(varying)}: no effect on {devices} (nothing is copied to a GPU): "
        "points that differ only there are one configuration, ranked once with their runs pooled"
    )
    hidden = varying if off.all() else []
    return pd.DataFrame(merged).infer_objects(), hidden, (note,)


def _pooled(members: pd.DataFrame) -> pd.Series:
    """The first member, standing for all: their runs, failures and ranks together."""
    row = members.iloc[0].copy()
    if len(members) == 1:
        return row
    runs = tuple(v for rates in members["run_samples_per_s"] for v in rates)
    row["run_samples_per_s"] = runs
    row["run_passes"] = passes_pooled(members)
    row["samples_per_s"] = statistics.median(runs)
    row["runs"] = len(runs)
    row["cpu_memory_gb"] = members["cpu_memory_gb"].median()
    for column in ("failed_runs", "all_runs"):
        if column in members:
            row[column] = members[column].sum()
    row["ranks"], row["world_size"] = members["ranks"].min(), members["world_size"].max()
    row["pooled"] = tuple(str(j) for j in members["jobid"].iloc[1:])
    return row


def cost_order(rows: pd.DataFrame) -> list[int]:
    """The positions of the configurations, cheapest first (CHEAPNESS), the faster first among
    equals (sorting only the columns that decide, not every column of the rows)."""
    columns = [*CHEAPNESS, "samples_per_s"]
    order = (
        rows[columns]
        .reset_index(drop=True)
        .sort_values(
            columns,
            ascending=[True, True, True, False],
            na_position="last",
            kind="stable",
        )
    )
    return order.index.tolist()


def against_best(
    best: Choice,
    rows: pd.DataFrame,
    margin: float = noise.MARGIN,
    *,
    records: Records | None = None,
) -> dict[str, tuple[noise.Estimate | None, bool]]:
    """Per point: its samples/s over the best's (None for the best itself) and whether it is
    tied with the best: its interval inside the margin; with one run on a side (untested),
    within WITHIN of the best stands in. `records`: Records.of(rows), where made already."""
    out: dict[str, tuple[noise.Estimate | None, bool]] = {}
    records = Records.of(rows) if records is None else records
    point_ids = records.column("point_id")
    rates = records.column("run_samples_per_s")
    passes = records.columns.get("run_passes", [None] * len(records))
    others = [i for i, p in enumerate(point_ids) if p != best.point_id]
    # Choice.against without making the Choice (one per point of the group), the best's runs
    # prepared once for all of them.
    ratios = noise.ratios_by_pass(
        best.run_samples_per_s,
        best.run_passes,
        ((tuple(map(float, rates[i])), as_passes(passes[i])) for i in others),
    )
    for point_id, rate in zip(point_ids, rows["samples_per_s"].tolist(), strict=True):
        if point_id == best.point_id:
            out[str(point_id)] = (None, True)
            continue
        ratio = next(ratios)
        judgement = ratio.judge(margin)
        if judgement == noise.NOT_TESTED:
            out[str(point_id)] = (ratio, rate >= (1 - margin) * best.samples_per_s)
        else:
            out[str(point_id)] = (ratio, judgement == noise.WITHIN)
    return out


def _shown_settings(rows: pd.DataFrame) -> list[str]:
    """The settings that vary in the sweep (num_workers always): the rest is the spec's."""
    step = ["sequence_step"] if (rows["sequence_step"] != "").any() else []
    # With num_workers=0, PyTorch takes none of the worker-only settings: that is no choice.
    workers = rows[rows["num_workers"] > 0]
    varying = [
        c
        for c in [*LOADER_COLUMNS, *WORKLOAD_COLUMNS]
        if c == "num_workers" or varies((workers if c in WORKER_ONLY else rows)[c])
    ]
    return [*step, *varying]


def passes_pooled(members: pd.DataFrame) -> tuple[noise.Pass, ...]:
    """The pooled rows' passes, aligned with their pooled runs; none where a row lacks them."""
    per_row = [passes_of(row) for _, row in members.iterrows()]
    if any(len(p) != len(r) for p, r in zip(per_row, members["run_samples_per_s"], strict=True)):
        return ()
    return tuple(label for passes in per_row for label in passes)


SCREEN = 4 * noise.MARGIN
"""A one-run point more than this share below the best is judged slower without more runs, where
its run was clean or it is not cheaper (`screened`): analysis.grid.contenders says why 20 %."""


def unclean_points(rows: pd.DataFrame, records: Records) -> set[str]:
    """The points whose runs a busy machine, a drifting window or a stalling read may have read
    low: other processes took SHARED of the CPU or more during their windows, a window was not
    steady (analysis.aggregate's `steady`), or its wait for data was heavy-tailed (a stall
    landed in the window: analysis.grid.tail). Unknown (no sampler, no test) counts clean."""
    shared = rows["foreign_cpu_share"] if "foreign_cpu_share" in rows else pd.Series(float("nan"), rows.index)
    steady = rows["steady"] if "steady" in rows else pd.Series(None, rows.index, dtype=object)
    tails = {"loading_time_p50", "loading_time_p99", "step_time", "steps"} <= set(rows.columns)
    heavy = heavy_tailed(rows) if tails else pd.Series(False, rows.index)
    return {
        str(point_id)
        for point_id, share, still, stalled in zip(
            records.column("point_id"), shared.tolist(), steady.tolist(), heavy.tolist(), strict=True
        )
        if (share == share and share >= SHARED)
        or (still is not None and still == still and not still)
        or stalled
    }


def screened(ratio: noise.Estimate | None, *, cheaper: bool, unclean: bool) -> bool:
    """One run on a side, more than SCREEN below the best: slower, without more runs. Not where
    the point is cheaper than the answer and its run was not clean: beside a busy loop, one run
    of num_workers=4 read 24 % below 8, its tie, and only a cheaper point can change the answer."""
    return (
        ratio is not None
        and ratio.judge() == noise.NOT_TESTED
        and ratio.change < -SCREEN
        and not (cheaper and unclean)
    )


@dataclass(frozen=True, slots=True)
class Judged:
    """One group of a summary judged against its best: what the follow-ups ask of it."""

    group: Group
    best: Choice
    judged: dict[str, tuple[noise.Estimate | None, bool]]
    """against_best's: per point, its ratio to the best and whether it is tied."""
    by_cost: list[str]
    """The point ids, cheapest first (cost_order)."""


def judged_groups(summary: pd.DataFrame, margin: float = noise.MARGIN) -> Iterator[Judged]:
    """Each group of a summary's table rows, judged against its best (what
    recommend.undecided_points and contenders.contenders walk)."""
    chosen = table_rows(summary)
    if chosen.empty:
        return
    for g in groups(chosen):
        rows = g.rows
        if rows.empty:
            continue
        best = choice_of(rows.loc[rows["samples_per_s"].idxmax()], [])
        point_ids = g.records.column("point_id")
        yield Judged(
            g,
            best,
            against_best(best, rows, margin, records=g.records),
            [str(point_ids[i]) for i in cost_order(rows)],
        )
