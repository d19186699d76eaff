"""Stragglers: a rank that waits for data much longer than its peers, or a node much slower
than the others on the same point.

Ranks of one run are in lockstep (DDP's all-reduce makes their training_time equal), so they are
judged on the wait for data: per repeat, a rank's loading_time less the median of the other
ranks' of its run, as a share of the run's median step time (a wait may be zero: a difference,
not a ratio). It straggles when the 95 % interval of that share (analysis.noise, paired by
repeat: the ranks of a repeat measured together) lies wholly above noise.STRAGGLER_SHARE (10 %
of a step). Separate runs of one point on different nodes (of the same type) are not in
lockstep: a node straggles when the interval of its training_time over the other nodes' lies
wholly above 1 + STRAGGLER_SHARE (independent runs). Either is listed as *undecided*, with the
repeats that would likely decide, when its estimate is above the share but its interval reaches
below; with one run, as untested.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pandas as pd

from analysis import noise
from analysis.aggregate import add_nodes, sweep_label

RULE = (
    f"a rank straggles when its wait for data (loading_time) exceeds the other ranks' of its run "
    f"by more than {noise.STRAGGLER_SHARE:.0%} of the run's step time; a node when its training_time "
    f"on a point is more than {noise.STRAGGLER_SHARE:.0%} above the other nodes' that ran it "
    "separately; either with its whole 95% interval beyond that, else marked undecided (with the "
    "repeats that would decide), or untested with one run"
)


@dataclass(frozen=True, slots=True)
class Straggler:
    kind: str
    """rank (judged on its wait for data) or node (on training_time)."""
    sweep_dir: str
    point_id: str
    rung: str
    who: str
    time: float
    """The rank's loading_time, or the node's training_time (seconds; medians over repeats)."""
    others: float
    step_time: float | None = None
    """The run's median step time (ranks): the wait is judged against it."""
    tested: bool = True
    judged: noise.Estimate | None = None
    """The rank's extra wait (a share of a step) or the node's training_time ratio, judged."""

    @property
    def excess(self) -> float:
        """A rank: its extra wait as a share of a step. A node: its extra training_time."""
        if self.step_time:
            return (self.time - self.others) / self.step_time
        return self.time / self.others - 1

    @property
    def undecided(self) -> bool:
        """Above the share on its estimate, but its interval reaches below it."""
        return self.judged is not None and self.judged.judge(noise.STRAGGLER_SHARE) == noise.UNDECIDED

    def line(self) -> str:
        sweep = sweep_label(self.sweep_dir)
        untested = "" if self.tested else f" ({noise.UNTESTED})"
        if self.undecided and self.judged is not None:
            runs = self.judged.runs_needed(noise.STRAGGLER_SHARE)
            more = f"about {runs}" if runs else f"over {noise.MAX_RUNS}"
            j = self.judged
            ci = j.interval_text()
            if j.shift and j.low is not None and j.high is not None:  # a rank's: a share of a step
                ci = f"95% CI {j.low:+.1%} .. {j.high:+.1%} of a step, n={j.n}"
            untested = f" (undecided: {ci}; {more} repeats would decide)"
        where = f"{sweep} point {self.point_id} ({self.rung}): {self.who}"
        if self.step_time:
            return (
                f"{where} waited {self.time:.4f} s per step for data, the other ranks "
                f"{self.others:.4f} s (+{self.excess:.0%} of a {self.step_time:.3f} s step){untested}"
            )
        return (
            f"{where} took {self.time:.3f} s, the other {self.kind}s {self.others:.3f} s "
            f"(+{self.excess:.0%}){untested}"
        )


def find_stragglers(rows: pd.DataFrame) -> list[Straggler]:
    ok = rows[(rows["status"] == "ok") & rows["training_time"].notna()]
    if ok.empty:
        return []
    if "node" not in ok.columns:
        ok = add_nodes(ok)
    found = _ranks(ok) + _nodes(ok)
    return sorted(found, key=lambda s: (s.sweep_dir, s.point_id, s.rung, s.kind, s.who))


def _ranks(ok: pd.DataFrame) -> list[Straggler]:
    """Ranks of one run, judged on their wait for data against the others of each repeat."""
    run = ["sweep_dir", "point_id", "rung", "node"]
    multi = ok[ok.groupby(run, sort=False)["rank"].transform("nunique") > 1]
    found = []
    for (sweep_dir, point_id, rung, _), rows in multi.groupby(run, sort=False):
        step = rows["step_time"].median()
        waits = rows.pivot_table(index="repeat", columns="rank", values="loading_time", aggfunc="median")
        if pd.isna(step) or step <= 0 or waits.shape[1] < 2:
            continue
        hosts = rows.groupby("rank")["hostname"].first()
        for rank in waits.columns:
            mine = waits[rank].dropna()
            others_per_repeat = waits.drop(columns=rank).median(axis=1).loc[mine.index]
            wait = float(mine.median())
            others = float(waits.drop(columns=rank).median().median())
            extra = noise.paired_shift(((mine - others_per_repeat) / step).tolist())
            if not extra.estimate > noise.STRAGGLER_SHARE or _within(extra):
                continue
            who = f"rank {int(rank)} on {hosts[rank]}"
            found.append(
                Straggler(
                    "rank",
                    str(sweep_dir),
                    str(point_id),
                    str(rung),
                    who,
                    wait,
                    others,
                    step,
                    extra.tested,
                    extra,
                )
            )
    return found


def _within(judged: noise.Estimate) -> bool:
    """Decided not to straggle: the interval lies wholly at or under the share (three-way
    against it: inside it, or below it)."""
    return judged.judge(noise.STRAGGLER_SHARE) in (noise.WITHIN, noise.LOWER)


def _nodes(ok: pd.DataFrame) -> list[Straggler]:
    """Separate runs of one point on different nodes (not in lockstep), on training_time."""
    # A run's time is its common window: the longest of its ranks'.
    per_run = (
        ok.groupby(["sweep_dir", "point_id", "rung", "node_type", "node", "repeat"], sort=False)[
            "training_time"
        ]
        .max()
        .reset_index()
    )
    peers = ["sweep_dir", "point_id", "rung", "node_type"]
    per_run = per_run[per_run.groupby(peers, sort=False)["node"].transform("nunique") > 1]
    found = []
    for (sweep_dir, point_id, rung, _), runs in per_run.groupby(peers, sort=False):
        by_node = {str(n): list(t["training_time"]) for n, t in runs.groupby("node", sort=True)}
        for node, times in by_node.items():
            other_times = [t for n, ts in by_node.items() if n != node for t in ts]
            ratio = noise.independent_ratio(other_times, times)
            if not ratio.estimate > 1 + noise.STRAGGLER_SHARE or _within(ratio):
                continue
            others = statistics.median(statistics.median(ts) for n, ts in by_node.items() if n != node)
            found.append(
                Straggler(
                    "node",
                    str(sweep_dir),
                    str(point_id),
                    str(rung),
                    f"node {node}",
                    statistics.median(times),
                    others,
                    tested=ratio.tested,
                    judged=ratio,
                )
            )
    return found
