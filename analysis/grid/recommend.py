"""Per node and sweep: the best configuration, and the cheapest one tied with it.

The best is the highest median samples/s. Every other configuration is judged against it by
analysis.noise's three-way rule on the runs of both (each point's per-run samples/s, paired
by pass where the two took turns on one machine, else as independent runs): *tied* only when
the 95 % interval of the difference lies inside the practical margin (±5 %), *slower* when it
lies wholly below, *undecided* otherwise: a wide interval is never a tie. The cheapest of the
tied is recommended. Cheapest means, in this order: fewest workers, no persistent workers,
least host memory (the rank's process tree, workers included). Cheaper configurations left
undecided are named, with the runs per point that would likely decide them
(`undecided_points` gives the same to code: the adaptive repeats measure those points
again); the cheapest of them whose estimate lies within the margin is the *candidate*, said
right under the recommendation with its figures ("within 1.6% of the best, not proven tied:
15 more runs per point would decide"): what the evidence supports, not hidden behind the
best, and not called tied. With one run on a side there is nothing to test: the
old rule stands in, labelled untested: within 5 % of the best counts as tied. Both are given
with their speedup over the sweep's baseline, its first point (point_index 0): the spec's
first values are the user's starting point; the same judgement says whether the speedup is
beyond the margin.

Not ranked: a point some of whose runs failed (a configuration that fails now and then is no
recommendation, however fast the runs that survived), and a point where not every rank
measured (its figures are those of the ranks present: a world of 1 under 2 ranks reads as
half the work). Each is named on a `not ranked:` line with why. Merged: where the device is
not CUDA, pin_memory and non_blocking change nothing (NO_EFFECT_OFF_CUDA), so points that
differ only there are one configuration, ranked once with their runs pooled. Said: a machine
shared with other work during the windows (the samplers' foreign_cpu_share, SHARED or more),
in one line with the share; so are points whose workers delivered no batch (idle_workers),
which ran on fewer workers than they say (more shards, not more workers).
"""

from __future__ import annotations

import dataclasses
import html
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from analysis import noise
from analysis.aggregate import LOADER_COLUMNS, WORKLOAD_COLUMNS, table_rows, varies
from analysis.grid.deciding import ToDecide, to_decide
from analysis.grid.records import Records
from analysis.ladder.verdict_text import SHARD_FIX
from harness_schema.settings import WORKER_ONLY

WITHIN = noise.MARGIN
"""With one run, configurations within 5 % of the best count as tied (untested)."""
MIN_RUNS = 3
"""The runs a point with one run is asked for first (two give Student's t 12.7: no answer)."""
REPEATS_HINT = (
    "leave measure.repeats out (the sweep then measures the contenders again until decided) "
    "or set it to 3 or more"
)
"""A spec that gave repeats: 1: the default decides; a fixed count of 3 tests every point."""
CHEAPNESS = ["num_workers", "persistent_workers", "cpu_memory_gb"]
SHARED = 0.10
"""Other processes took this share of the ranks' CPUs during the windows, or more: the
recommendation says the machine was shared (an idle machine's own daemons take ~1 %)."""
NO_EFFECT_OFF_CUDA = ("pin_memory", "non_blocking")
"""Settings that change nothing where the device is not CUDA: the harness pins memory only for
a CUDA device (harness/execution/ladder.py, make_loader), and a copy to the CPU is no copy."""


@dataclass(frozen=True, slots=True)
class Choice:
    point_id: str
    jobid: str
    point_index: int
    settings: dict[str, Any]
    samples_per_s: float
    run_samples_per_s: tuple[float, ...]
    """samples/s of each run (repeats; nodes of one type with --by gpu)."""
    cpu_memory_gb: float
    run_passes: tuple[noise.Pass, ...] = ()
    """The pass of each run (analysis.aggregate's labels), for the paired judgement."""
    pooled: tuple[str, ...] = ()
    """The points measured as the same configuration on this device (NO_EFFECT_OFF_CUDA), whose
    runs are pooled with this one's."""
    run_seconds: float = float("nan")
    """What measuring one run took (median; NaN where the rows do not say): the pace of more."""

    @property
    def runs(self) -> int:
        return len(self.run_samples_per_s)

    @property
    def name(self) -> str:
        return f"{self.jobid} (pooled with {', '.join(self.pooled)})" if self.pooled else self.jobid

    def settings_text(self) -> str:
        return " ".join(f"{k}={_value(v)}" for k, v in self.settings.items())

    def against(self, other: Choice) -> noise.Estimate:
        """This one's samples/s over the other's, from their runs (paired by pass where they
        took turns on one machine)."""
        return noise.ratio_by_pass(
            other.run_samples_per_s, self.run_samples_per_s, other.run_passes, self.run_passes
        )


@dataclass(frozen=True, slots=True)
class Undecided:
    """A configuration whose difference from the best the runs leave undecided (its interval
    straddles an edge of the margin): cheaper than the recommended one, or possibly faster
    than the best by more than the margin (a challenger)."""

    choice: Choice
    ratio: noise.Estimate
    """Its samples/s over the best's."""
    runs: int | None
    """Runs per point (it and the best) that would likely decide; None: more than MAX_RUNS."""

    cheaper: bool = True
    """Cheaper than the recommended one (else a dearer one that may be faster than the best)."""

    @property
    def challenges(self) -> bool:
        """Its interval reaches beyond +margin: it may be the real best."""
        return self.ratio.high is not None and self.ratio.high > 1 + noise.MARGIN

    @property
    def close(self) -> bool:
        """Cheaper, and its estimate lies within the margin of the best: the runs point to a
        tie they cannot prove yet (a candidate, where it is the cheapest such)."""
        return self.cheaper and abs(self.ratio.change) <= noise.MARGIN

    def candidate_line(self) -> str:
        """What the evidence supports, said as such: its figures, how close, and that it is
        not proven tied."""
        c, r = self.choice, self.ratio
        if self.runs is None:
            more = f"more than {noise.MAX_RUNS} runs per point would be needed to decide"
        else:
            more = f"{self.runs - c.runs} more runs per point would decide (about {self.runs} in all)"
        return (
            f"candidate, cheaper: {c.name} {c.settings_text()}: {c.samples_per_s:.2f} samples/s, "
            f"within {abs(r.change):.1%} of the best ({r.interval_text()}), not proven tied: {more}"
        )

    def line(self) -> str:
        c, r = self.choice, self.ratio
        what = "cheaper" if self.cheaper else "could be faster than the best"
        if self.runs is None:
            more = f"more than {noise.MAX_RUNS} runs per point would be needed"
        else:
            more = f"about {self.runs} runs per point would decide ({self.runs - c.runs} more)"
        return (
            f"undecided, {what}: {c.name} {c.settings_text()}: {c.samples_per_s:.2f} samples/s "
            f"({r.change:+.1%}, {r.interval_text()}): {more}"
        )


@dataclass(frozen=True, slots=True)
class Unranked:
    """A point left out of the ranking, and why (failed runs, missing ranks)."""

    choice: Choice
    reason: str

    def line(self) -> str:
        c = self.choice
        return (
            f"not ranked: {c.name} {c.settings_text()}: {c.samples_per_s:.2f} samples/s "
            f"from {c.runs} run(s): {self.reason}"
        )


@dataclass(frozen=True, slots=True)
class Recommendation:
    group: str
    sweep: str
    sweep_dir: str
    rung: str
    best: Choice | None
    """None where no point could be ranked (every one is in `unranked`)."""
    cheapest: Choice | None
    baseline: Choice | None
    baseline_elsewhere: bool = False
    """Point 0 was not measured in this group: its median over the other groups is used."""
    tied: int = 1
    """Configurations tied with the best, the best included."""
    tested: bool = False
    """Every tie was decided by a test (no point with one run)."""
    undecided: tuple[Undecided, ...] = ()
    """Cheaper than the recommended configuration, and undecided against the best."""
    challengers: tuple[Undecided, ...] = ()
    """Dearer configurations that may be faster than the best by more than the margin."""
    unranked: tuple[Unranked, ...] = ()
    """Points left out of the ranking: some runs failed, or not every rank measured."""
    notes: tuple[str, ...] = ()
    """Said once under the choices: settings with no effect on this device."""

    @property
    def candidate(self) -> Undecided | None:
        """The cheapest configuration cheaper than the recommended one whose estimate lies
        within the margin of the best, but whose interval does not (undecided, not tied)."""
        return next((u for u in self.undecided if u.close), None)

    @property
    def to_decide(self) -> ToDecide | None:
        """Where the answer is open: the points whose repeats would decide it, what that costs,
        and the command (analysis.grid.deciding)."""
        return to_decide(self)

    @property
    def provisional(self) -> bool:
        """Some configuration may be faster than the best by more than the margin: until it is
        decided, the best, and so the recommendation, may be the wrong one."""
        return any(u.challenges for u in (*self.undecided, *self.challengers))

    def speedup(self, choice: Choice) -> float | None:
        if self.baseline is None or not self.baseline.samples_per_s:
            return None
        return choice.samples_per_s / self.baseline.samples_per_s

    def against_baseline(self, choice: Choice) -> str:
        """The speedup and whether the runs call it a change."""
        base = self.baseline
        if base is None:
            return "no baseline (point 0 has no ok rows)"
        if choice.point_id == base.point_id:
            return "the baseline itself"
        text = f"{self.speedup(choice):.2f}× the baseline"
        ratio = choice.against(base)
        judgement = ratio.judge()
        if judgement == noise.NOT_TESTED:
            return f"{text} ({noise.UNTESTED})"
        if judgement == noise.WITHIN:
            return f"{text}, tied with it ({ratio.interval_text()}, within ±{noise.MARGIN:.0%})"
        if judgement == noise.UNDECIDED:
            return f"{text}, undecided ({ratio.interval_text()})"
        return f"{text} ({ratio.interval_text()})"

    def lines(self) -> list[str]:
        best, base = self.best, self.baseline
        if best is None:
            out = ["no configuration ranked: every point here had failed runs or missing ranks"]
        else:
            out = [f"best: {best.name} {best.settings_text()}: {best.samples_per_s:.2f} samples/s, "]
            out[0] += self.against_baseline(best)
            out.append(self._cheapest_line(best))
            candidate = self.candidate
            if candidate is not None:
                out.append(candidate.candidate_line())
            out += [u.line() for u in (*self.challengers, *self.undecided) if u is not candidate]
            deciding = self.to_decide
            if deciding is not None:
                out.append(deciding.line())
        out += [u.line() for u in self.unranked]
        if base is not None:
            where = " (measured on another node or node type)" if self.baseline_elsewhere else ""
            out.append(
                f"baseline (point 0){where}: {base.name} {base.settings_text()}: "
                f"{base.samples_per_s:.2f} samples/s"
            )
        if best is not None and best.runs < 2 and (base is None or base.runs < 2):
            out.append(f"one run per point: nothing is tested, ties are within {WITHIN:.0%}; {REPEATS_HINT}")
        return out + list(self.notes)

    def _cheapest_line(self, best: Choice) -> str:
        cheap = self.cheapest
        assert cheap is not None, "a recommendation with a best has a cheapest"
        open_ = [
            w for w, on in (("the best", self.provisional), ("a cheaper candidate", self.candidate)) if on
        ]
        verb = "are" if len(open_) > 1 else "is"
        provisional = f"; provisional, {' and '.join(open_)} {verb} undecided" if open_ else ""
        label = (
            f"cheapest tied with the best (within ±{noise.MARGIN:.0%}{provisional})"
            if self.tested
            else f"cheapest within {WITHIN:.0%} of the best"
        )
        if not self.tested:
            label += f" ({noise.UNTESTED})" if best.runs < 2 else " (untested where a point has 1 run)"
        if cheap.point_id == best.point_id:
            others = f" ({self.tied - 1} other(s) tied)" if self.tied > 1 else ""
            return f"{label}: the best itself{others}"
        ratio = cheap.against(best)
        interval = f", {ratio.interval_text()}" if ratio.tested else ""
        return (
            f"{label}: {cheap.name} {cheap.settings_text()}: {cheap.samples_per_s:.2f} samples/s "
            f"({ratio.estimate - 1:+.1%}{interval}), {_memory(cheap)}{self.against_baseline(cheap)}"
        )

    def title(self) -> str:
        rung = f", rung {self.rung}" if self.rung != "full" else ""
        return f"recommendation for {self.group} ({self.sweep}{rung})"


def _memory(choice: Choice) -> str:
    return "" if pd.isna(choice.cpu_memory_gb) else f"{choice.cpu_memory_gb:.2f} GB host memory, "


def _value(v: Any) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def recommend(summary: pd.DataFrame) -> list[Recommendation]:
    chosen = table_rows(summary)
    if chosen.empty:
        return []
    # Point 0 of each sweep where every rank measured it: the baseline of a group without it.
    zero = chosen[(chosen["point_index"] == 0) & _every_rank(chosen)]
    return [_recommendation(g, zero) for g in _groups(chosen)]


@dataclass(frozen=True, slots=True)
class _Group:
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


def _groups(chosen: pd.DataFrame) -> Iterator[_Group]:
    shown_by_sweep = {s: _shown_settings(rows) for s, rows in chosen.groupby("sweep_dir")}
    for (group, sweep_dir), rows in chosen.groupby(["group", "sweep_dir"], sort=True):
        merged, hidden, notes = _merge_identical(rows)
        records = Records.of(merged)
        reasons = _unranked_reasons(records)
        kept = [i for i in range(len(records)) if i not in reasons]
        yield _Group(
            group=str(group),
            sweep_dir=str(sweep_dir),
            rows=merged if not reasons else merged.iloc[kept],
            records=records.take(kept),
            unranked=tuple((records[i], r) for i, r in reasons.items()),
            complete=merged[_every_rank(merged)],
            shown=[c for c in shown_by_sweep[sweep_dir] if c not in hidden],
            notes=(*notes, *shared_machine(rows), *idle_workers(rows)),
            first=rows.iloc[0],
        )


def shared_machine(rows: pd.DataFrame) -> list[str]:
    """One line where other processes held the ranks' CPUs during the windows (the samplers'
    foreign_cpu_share, over all the windows of these points), else none."""
    if "foreign_cpu_share" not in rows:
        return []
    share, weight = rows["foreign_cpu_share"], rows["training_time"] * rows["runs"]
    known = share.notna() & weight.notna() & (weight > 0)
    if not known.any():
        return []
    mean = float((share[known] * weight[known]).sum() / weight[known].sum())
    top = share[known].idxmax()
    if mean < SHARED and share[top] < 2 * SHARED:
        return []
    most = f" (up to {share[top]:.0%}, in {rows.loc[top, 'jobid']}'s)" if share[top] - mean >= SHARED else ""
    return [
        f"the machine was shared: other processes used {mean:.0%} of its CPU during the windows{most}; "
        "figures may read slow and the ranking move"
    ]


def idle_workers(rows: pd.DataFrame) -> list[str]:
    """One line where some points' workers delivered no batch (idle_workers: a stream with
    fewer shards than workers, or an epoch with fewer batches), else none. Those points ran on
    fewer workers than their num_workers says: a point is never to be preferred for its extra
    workers, which did nothing; a stream's answer is more shards, not more workers."""
    if "idle_workers" not in rows:
        return []
    idle = pd.to_numeric(rows["idle_workers"], errors="coerce")
    if not (idle > 0).any():  # the common case, without a copy of the group's rows
        return []
    hit = rows[idle > 0]
    named = ", ".join(
        f"{row['jobid']} ({int(count)} of num_workers={int(row['num_workers'])})"
        for (_, row), count in zip(hit.iterrows(), idle[idle > 0], strict=True)
    )
    return [
        f"workers that delivered no batch: {named}: these ran on fewer workers than they say, and "
        "their idle workers gain nothing; a stream with fewer shards than workers needs more "
        f"shards, not more workers ({SHARD_FIX})"
    ]


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


def _every_rank(rows: pd.DataFrame) -> pd.Series:
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
    row["run_passes"] = _passes_pooled(members)
    row["samples_per_s"] = statistics.median(runs)
    row["runs"] = len(runs)
    row["cpu_memory_gb"] = members["cpu_memory_gb"].median()
    for column in ("failed_runs", "all_runs"):
        if column in members:
            row[column] = members[column].sum()
    row["ranks"], row["world_size"] = members["ranks"].min(), members["world_size"].max()
    row["pooled"] = tuple(str(j) for j in members["jobid"].iloc[1:])
    return row


def _recommendation(g: _Group, zero: pd.DataFrame) -> Recommendation:
    """One group's: the best, the cheapest tied with it, and what the runs leave undecided.
    `zero`: the rows of point 0 every rank measured, of every group (_baseline)."""
    rows, shown = g.rows, g.shown
    baseline, elsewhere = _baseline(g.complete, zero, g.sweep_dir)
    unranked = Recommendation(
        group=g.group,
        sweep=str(g.first["sweep"]),
        sweep_dir=g.sweep_dir,
        rung=str(g.first["rung"]),
        best=None,
        cheapest=None,
        baseline=None if baseline is None else _choice(baseline, shown),
        baseline_elsewhere=elsewhere,
        unranked=tuple(Unranked(_choice(row, shown), why) for row, why in g.unranked),
        notes=g.notes,
    )
    if rows.empty:
        return unranked
    best = _choice(rows.loc[rows["samples_per_s"].idxmax()], shown)
    judged = _judged(best, rows, records=g.records)
    tied = {p for p, (_, in_tie) in judged.items() if in_tie}
    by_cost = _cost_order(rows)
    point_ids = g.records.column("point_id")
    cheapest = next(n for n, i in enumerate(by_cost) if point_ids[i] in tied)
    open_ = [
        Undecided(_choice(g.records[i], shown), ratio, ratio.runs_needed(), cheaper=n < cheapest)
        for n, i in enumerate(by_cost)
        if (ratio := judged[point_ids[i]][0]) is not None
        and ratio.judge() in (noise.UNDECIDED, noise.HIGHER)
        and (n < cheapest or (ratio.high is not None and ratio.high > 1 + noise.MARGIN))
    ]
    return dataclasses.replace(
        unranked,
        best=best,
        cheapest=_choice(g.records[by_cost[cheapest]], shown),
        tied=len(tied),
        tested=best.runs > 1 and all(r is None or r.tested for r, _ in judged.values()),
        undecided=tuple(u for u in open_ if u.cheaper),
        challengers=tuple(u for u in open_ if not u.cheaper),
    )


def _cost_order(rows: pd.DataFrame) -> list[int]:
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


def _judged(
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
        ((tuple(map(float, rates[i])), _as_passes(passes[i])) for i in others),
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


def undecided_points(
    summary: pd.DataFrame, margin: float = noise.MARGIN, *, cheaper_only: bool = False
) -> dict[str, int]:
    """The points whose difference from their group's best the runs leave undecided, each with
    the total runs per point that would likely decide it (analysis.noise's formula).

    `summary`: analysis.aggregate.summarize's frame (the rows the tables show are judged, per
    group and sweep, as recommend() judges them). Returns point id -> runs: the undecided
    points; the best itself too, with the most runs any of them needs, where it has fewer
    (the formula counts the runs of both sides); a point with one run (untested, no spread to
    go by) gets MIN_RUNS; a difference that sits on the margin gets noise.MAX_RUNS. With
    `cheaper_only`, only those that could change the recommendation: the points cheaper than
    the recommended one, and those that may be faster than the best by more than the margin.
    An empty dict: everything is decided.

        from analysis.grid.recommend import undecided_points
        more = undecided_points(summarize(rows))   # {"3f9c2a1b0e": 7, ...}
    """
    chosen = table_rows(summary)
    out: dict[str, int] = {}
    if chosen.empty:
        return out
    for g in _groups(chosen):
        rows = g.rows
        if rows.empty:
            continue
        best = _choice(rows.loc[rows["samples_per_s"].idxmax()], [])
        judged = _judged(best, rows, margin, records=g.records)
        point_ids = g.records.column("point_id")
        by_cost = [point_ids[i] for i in _cost_order(rows)]
        cheapest = next(i for i, p in enumerate(by_cost) if judged[p][1])
        for n, point_id in enumerate(by_cost):
            ratio, _ = judged[point_id]
            if ratio is None or ratio.judge(margin) not in (noise.UNDECIDED, noise.NOT_TESTED):
                continue
            challenges = ratio.high is not None and ratio.high > 1 + margin
            if cheaper_only and n >= cheapest and not challenges:
                continue
            if ratio.judge(margin) == noise.NOT_TESTED:
                runs = MIN_RUNS
            else:
                runs = ratio.runs_needed(margin) or noise.MAX_RUNS
            out[point_id] = max(out.get(point_id, 0), runs)
            if best.runs < runs:
                out[best.point_id] = max(out.get(best.point_id, 0), runs)
    return out


def _baseline(rows: pd.DataFrame, zero: pd.DataFrame, sweep_dir: str) -> tuple[pd.Series | None, bool]:
    """Point 0 where every rank measured it (its surviving runs, where some failed, still
    measure it): in this group, else its median over the others (`zero`: the rows of point 0
    every rank measured, of every group)."""
    at = np.flatnonzero((rows["point_index"] == 0).to_numpy())
    if len(at):  # the first row of point 0, without a copy of the group's rows
        return rows.iloc[at[0]], False
    there = zero[zero["sweep_dir"] == sweep_dir]
    if there.empty:
        return None, False
    row = there.iloc[0].copy()
    row["samples_per_s"] = there["samples_per_s"].median()
    # Every run of point 0 in the other groups: the runs the speedup is tested against.
    row["run_samples_per_s"] = tuple(v for runs in there["run_samples_per_s"] for v in runs)
    row["run_passes"] = _passes_pooled(there)
    row["runs"] = there["runs"].sum()
    return row, True


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


Row: TypeAlias = pd.Series | dict[str, Any]
"""A summary row: a Series, or one of Records' dicts."""


def _choice(row: Row, shown: list[str]) -> Choice:
    return Choice(
        point_id=str(row["point_id"]),
        jobid=str(row["jobid"]),
        point_index=int(row["point_index"]),
        settings={c: row[c] for c in shown},
        samples_per_s=float(row["samples_per_s"]),
        run_samples_per_s=tuple(float(v) for v in row["run_samples_per_s"]),
        run_passes=_passes(row),
        cpu_memory_gb=float(row["cpu_memory_gb"]),
        pooled=pooled if isinstance(pooled := row.get("pooled"), tuple) else (),
        run_seconds=float(row.get("run_seconds", float("nan"))),
    )


def _passes(row: Row) -> tuple[noise.Pass, ...]:
    """The row's run_passes (none in a frame made before passes: then nothing is paired)."""
    return _as_passes(row.get("run_passes"))


def _as_passes(passes: Any) -> tuple[noise.Pass, ...]:
    return tuple(passes) if isinstance(passes, tuple) else ()


def _passes_pooled(members: pd.DataFrame) -> tuple[noise.Pass, ...]:
    """The pooled rows' passes, aligned with their pooled runs; none where a row lacks them."""
    per_row = [_passes(row) for _, row in members.iterrows()]
    if any(len(p) != len(r) for p, r in zip(per_row, members["run_samples_per_s"], strict=True)):
        return ()
    return tuple(label for passes in per_row for label in passes)


def render_recommendations(recs: list[Recommendation], fmt: str) -> str:
    blocks = []
    for rec in recs:
        lines = rec.lines()
        if fmt == "markdown":
            blocks.append(f"**{rec.title()}**\n\n" + "\n".join(f"- {line}" for line in lines))
        elif fmt == "latex":
            blocks.append(f"% {rec.title()}\n" + "\n".join(f"%   {line}" for line in lines))
        elif fmt == "html":
            items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
            blocks.append(f"<p><b>{html.escape(rec.title())}</b></p><ul>{items}</ul>")
        else:
            blocks.append(f"{rec.title()}:\n" + "\n".join(f"  {line}" for line in lines))
    return "\n\n".join(blocks)
