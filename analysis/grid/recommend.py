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

Where each part lives: a configuration and its lines in choices.py, the groups, their cost
order and the judgement against the best in ranking.py, the machine's notes in machine.py, what
deciding an open answer would cost in deciding.py; this module puts them together.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from analysis import noise
from analysis.aggregate import table_rows
from analysis.grid.choices import Choice, Undecided, Unranked, choice_of
from analysis.grid.deciding import ToDecide, to_decide
from analysis.grid.ranking import (
    MIN_RUNS,
    SCREEN,
    Group,
    against_best,
    cost_order,
    every_rank,
    groups,
    judged_groups,
    passes_pooled,
    screened,
    unclean_points,
)

WITHIN = noise.MARGIN
"""With one run, configurations within 5 % of the best count as tied (untested)."""
REPEATS_HINT = (
    "leave measure.repeats out (the sweep then measures the contenders again until decided) "
    "or set it to 3 or more"
)
"""A spec that gave repeats: 1: the default decides; a fixed count of 3 tests every point."""


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
    screened: tuple[Choice, ...] = ()
    """Points of one run far below the best (ranking.screened), judged slower without more runs:
    what lets the recommendation be tested without them where the best has several runs."""
    unscreened: int = 0
    """Points with one run on a side that the screen leaves open (within ranking.SCREEN of the
    best, or cheaper with a run that was not clean): what more runs would decide."""
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
        return to_decide(self.best, self.candidate, self.challengers, self.sweep_dir)

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
            if self.screened:
                out.append(self._screened_line(best))
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
        # Said where more runs could change the answer: not where every other point was judged
        # slower after its one run (the default's follow-up then has nothing to measure).
        if best is not None and best.runs < 2 and (base is None or base.runs < 2) and self.unscreened:
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

    def _screened_line(self, best: Choice) -> str:
        far = ", ".join(
            f"{c.name} {c.settings_text()} ({c.samples_per_s / best.samples_per_s - 1:+.0%})"
            for c in self.screened
        )
        return f"slower after one run (more than {SCREEN:.0%} below the best, not measured again): {far}"

    def title(self) -> str:
        rung = f", rung {self.rung}" if self.rung != "full" else ""
        return f"recommendation for {self.group} ({self.sweep}{rung})"


def _memory(choice: Choice) -> str:
    return "" if pd.isna(choice.cpu_memory_gb) else f"{choice.cpu_memory_gb:.2f} GB host memory, "


def recommend(summary: pd.DataFrame) -> list[Recommendation]:
    chosen = table_rows(summary)
    if chosen.empty:
        return []
    # Point 0 of each sweep where every rank measured it: the baseline of a group without it.
    zero = chosen[(chosen["point_index"] == 0) & every_rank(chosen)]
    return [_recommendation(g, zero) for g in groups(chosen)]


def _recommendation(g: Group, zero: pd.DataFrame) -> Recommendation:
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
        baseline=None if baseline is None else choice_of(baseline, shown),
        baseline_elsewhere=elsewhere,
        unranked=tuple(Unranked(choice_of(row, shown), why) for row, why in g.unranked),
        notes=g.notes,
    )
    if rows.empty:
        return unranked
    best = choice_of(rows.loc[rows["samples_per_s"].idxmax()], shown)
    judged = against_best(best, rows, records=g.records)
    tied = {p for p, (_, in_tie) in judged.items() if in_tie}
    by_cost = cost_order(rows)
    point_ids = g.records.column("point_id")
    cheapest = next(n for n, i in enumerate(by_cost) if point_ids[i] in tied)
    open_ = [
        Undecided(choice_of(g.records[i], shown), ratio, ratio.runs_needed(), cheaper=n < cheapest)
        for n, i in enumerate(by_cost)
        if (ratio := judged[point_ids[i]][0]) is not None
        and ratio.judge() in (noise.UNDECIDED, noise.HIGHER)
        and (n < cheapest or (ratio.high is not None and ratio.high > 1 + noise.MARGIN))
    ]
    # Slower after one run: more than SCREEN below the best, and clean where it is cheaper. Said
    # beside a best of several runs, or of one where it settles every other point (the default's
    # follow-up then had nothing to measure); a one-run sweep with ties open says nothing of it.
    unclean = unclean_points(rows, g.records)
    far = [
        i
        for n, i in enumerate(by_cost)
        if screened(judged[point_ids[i]][0], cheaper=n < cheapest, unclean=point_ids[i] in unclean)
    ]
    far_ids = {point_ids[i] for i in far}
    unscreened = sum(
        1
        for p, (r, _) in judged.items()
        if r is not None and r.judge() == noise.NOT_TESTED and p not in far_ids
    )
    if best.runs < 2 and unscreened:
        far, far_ids = [], set()
    return dataclasses.replace(
        unranked,
        best=best,
        cheapest=choice_of(g.records[by_cost[cheapest]], shown),
        tied=len(tied),
        tested=best.runs > 1 and all(r is None or r.tested or p in far_ids for p, (r, _) in judged.items()),
        screened=tuple(choice_of(g.records[i], shown) for i in far),
        unscreened=unscreened,
        undecided=tuple(u for u in open_ if u.cheaper),
        challengers=tuple(u for u in open_ if not u.cheaper),
    )


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
    out: dict[str, int] = {}
    for j in judged_groups(summary, margin):
        best, judged, by_cost = j.best, j.judged, j.by_cost
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
    row["run_passes"] = passes_pooled(there)
    row["runs"] = there["runs"].sum()
    return row, True


class Sayable(Protocol):
    """What rendering asks of a recommendation: its title and lines (a Recommendation, or one
    kept as said: analysis.summary_cache.Said)."""

    def title(self) -> str: ...

    def lines(self) -> list[str]: ...


def render_recommendations(recs: Sequence[Sayable], fmt: str) -> str:
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
