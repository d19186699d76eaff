"""Adaptive repeats (`measure.repeats: auto`): measure again only the points that the runs leave
undecided against the best, until each is decided or its budget is spent.

pyperf calibrates its runs and criterion.rs sizes its samples; here the question a sweep answers
(which configuration to use) sizes them. The first round measures every point
settings.FIRST_ROUND times. Then, in rounds:

1. The results are judged as the recommendation judges them, per node type
   (`analysis.grid.recommend.undecided_points`): the points whose interval against the best straddles
   an edge of the practical margin, each with the runs that would likely decide it (from the
   spread observed so far). The best itself is among them when it has fewer runs than they need.
2. Each such point is brought at once to the runs it needs (at least one more), as in Stein's
   two-stage procedure: the first round's spread sizes the second. One repeat at a time would
   look at the data after every repeat, and each look is one more chance to stop on a lucky
   interval.
3. Within its budget: at most `measure.max_repeats` repeats in all, and at most
   `measure.budget_minutes` of measuring the point (its first round included; the pace of its
   repeats so far says how many more fit). A point whose budget is spent stays undecided, and
   the report says so.

Rounds go on until no point is undecided or every undecided point's budget is spent.

The contenders' follow-up (`measure.decide`, the default where measure.repeats is not given)
runs the same rounds on fewer points: after a first round of one run a point, only the
contenders of the best (analysis.grid.contenders: within the margin, not settled, able to
change the answer) and the best, within `decide` repeats and `budget_minutes`. Either way a
point's measuring, its first round included, stays within its own limit (limits.point_minutes,
else slurm.time) at the pace of its repeats so far: `harness plan` says the most a sweep may
spend. The rows of
the new repeats are numbered on from the point's last (repeats 3, 4, ...), so a report, a resume
or a comparison reads them like any other.

Where they run: here (inline, local), one repeat of each point in turn (ABC ABC, as the runner
orders rungs and as every sweep's first round runs here: a slow spell of the machine lands on
several points, not on all repeats of one; harness/backends/here.py).
On Slurm, as a follow-up job array of only those points, through the resume machinery: the
sweep's repeats.json raises their planned repeats (harness.storage.sweep.load_points), so
`harness status` counts the new repeats as missing until they are measured, `harness resume`
resubmits them, and each job measures only the repeats its point lacks. `harness submit --wait`
and `harness resume --wait` submit the rounds themselves; without --wait, `harness resume SWEEP`
submits the next round once the previous one is done (`harness status` says when).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.config.plan import Point
from harness.storage.sweep import load_points, want_repeats, with_repeats
from harness_schema import layout
from harness_schema import rows as results

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Round:
    """The next round: point id -> repeats it should have in all after it, and the undecided
    points whose budget is spent (they are not measured again)."""

    targets: dict[str, int]
    spent: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.targets)

    contenders: bool = False
    """The contenders' follow-up (measure.decide), not repeats: auto."""

    @property
    def worth_saying(self) -> bool:
        """Said to the user: anything but the default's follow-up with nothing open, which is
        every default sweep's quiet end."""
        return bool(self) or bool(self.spent) or not self.contenders

    def line(self, doing: str = "measured again") -> str:
        """What the round does, for the log and the terminal."""
        spent = f"{len(self.spent)} undecided with their budget spent ({', '.join(sorted(self.spent))})"
        name, which = (
            ("decide", "contender(s) of the best") if self.contenders else ("repeats: auto", "point(s)")
        )
        if not self.targets:
            return f"{name}: {spent}" if self.spent else f"{name}: every point decided"
        listed = ", ".join(f"{p} to {n}" for p, n in sorted(self.targets.items()))
        line = f"{name}: {len(self.targets)} {which} undecided against the best, {doing}"
        line += f" ({listed} repeats)"
        return f"{line}; {spent}" if self.spent else line


def undecided(sweep_dir: Path) -> dict[str, int]:
    """Point id -> the runs that would likely decide it, for the points the sweep's results leave
    undecided against their node type's best (analysis.grid.recommend.undecided_points)."""
    from analysis.grid.recommend import undecided_points

    summary = _summary(sweep_dir)
    return {} if summary is None else undecided_points(summary)


def _summary(sweep_dir: Path) -> pd.DataFrame | None:
    """The sweep's results summarized by node type (a follow-up on Slurm may run a point on
    another node of the same type); None where nothing was measured."""
    from analysis.aggregate import summarize
    from analysis.load import load_results
    from analysis.meta import load_meta

    loaded = load_results([sweep_dir])
    if loaded.rows.empty:
        return None
    meta = load_meta(loaded.rows, loaded.problems)
    return summarize(loaded.rows, by="gpu", meta=meta)


def contended(sweep_dir: Path) -> dict[str, int]:
    """Point id -> the runs that would likely decide it, for the contenders of their node
    type's best (analysis.grid.contenders)."""
    from analysis.grid.contenders import contenders

    summary = _summary(sweep_dir)
    return {} if summary is None else contenders(summary)


def next_round(sweep_dir: Path, points: Sequence[Point] | None = None) -> Round:
    """The repeats to add now (see the module); an empty Round: every point is decided or has
    spent its budget. `points`: the sweep's points as load_points gives them."""
    points = load_points(sweep_dir) if points is None else points
    following = {p.id: p for p in points if p.measure.follows_up}
    if not following:
        return Round({})
    contenders_only = not any(p.measure.adaptive for p in following.values())
    judged = contended(sweep_dir) if contenders_only else undecided(sweep_dir)
    needed = {p: runs for p, runs in judged.items() if p in following}
    have = {p: following[p].measure.repeats for p in needed}
    step = plan_round(needed, have, {p: _room(sweep_dir, following[p]) for p in needed})
    return replace(step, contenders=contenders_only)


def deciding_round(sweep_dir: Path, more: int, points: Sequence[Point] | None = None) -> Round:
    """`harness resume --more-repeats N`: N more repeats of each point that the recommendation's
    `to decide:` lines name (analysis.grid.deciding), whatever the spec's budget: the user
    asked for them. An empty Round where nothing is open."""
    from analysis.grid.recommend import recommend

    summary = _summary(sweep_dir)
    if summary is None:
        return Round({})
    named = {p for rec in recommend(summary) if (d := rec.to_decide) for p in d.point_ids}
    have = {p.id: p.measure.repeats for p in (load_points(sweep_dir) if points is None else points)}
    return Round({p: have[p] + more for p in sorted(named) if p in have}, contenders=True)


def plan_round(needed: Mapping[str, int], have: Mapping[str, int], room: Mapping[str, int]) -> Round:
    """The round, from the judgement (point id -> runs that would likely decide it), the repeats
    each point has, and how many more its budget allows: each brought at once to what it needs,
    at least one more, within its room (benchmarks/recommend_truth.py plays rounds with it)."""
    targets, spent = {}, []
    for point_id, runs in needed.items():
        target = min(max(have[point_id] + 1, runs), have[point_id] + room[point_id])
        if target > have[point_id]:
            targets[point_id] = target
        else:
            spent.append(point_id)
    return Round(targets, tuple(sorted(spent)))


def _room(sweep_dir: Path, point: Point) -> int:
    """How many more repeats the point's budget allows: max_repeats (auto) or decide, and
    budget_minutes and the point's own limit at the pace of its repeats so far."""
    m = point.measure
    room = m.most_repeats - m.repeats
    if room <= 0:
        return 0
    spent = spent_minutes(sweep_dir, point.id)
    per_repeat = spent / m.repeats
    if per_repeat <= 0:
        return room
    minutes = [limit_minutes(sweep_dir)]
    if m.budget_minutes is not None:
        minutes.append(m.budget_minutes)
    return max(0, min(room, math.floor((min(minutes) - spent) / per_repeat)))


def limit_minutes(sweep_dir: Path) -> float:
    """A point's limit (limits.point_minutes, else slurm.time), from the sweep's spec: the most
    its measuring may take in all, follow-ups included."""
    from harness.config.spec import parse_spec
    from harness.plan_cost import point_limit_s
    from harness_schema.reading import read_sweep_spec

    spec = parse_spec(read_sweep_spec(sweep_dir), file=str(sweep_dir / "spec.yaml"))
    return point_limit_s(spec)[0] / 60


def spent_minutes(sweep_dir: Path, point_id: str) -> float:
    """Minutes rank 0 spent measuring the point: the sum of its rows' started_at..finished_at."""
    path = layout.rank_file(layout.point_dir(sweep_dir, point_id), 0)
    if not path.exists():
        return 0.0
    seconds = 0.0
    for row in results.read_rows(path):
        try:
            start, end = datetime.fromisoformat(row["started_at"]), datetime.fromisoformat(row["finished_at"])
        except (KeyError, TypeError, ValueError):
            continue
        seconds += max(0.0, (end - start).total_seconds())
    return seconds / 60


def raise_repeats(sweep_dir: Path, step: Round) -> list[Point]:
    """Record the round's targets (repeats.json) and return its points with their new repeats:
    what a follow-up array submits, or what `harness resume` runs."""
    want_repeats(sweep_dir, step.targets)
    return [p for p in load_points(sweep_dir) if p.id in step.targets]


def passes(points: Sequence[Point], lacking: Mapping[str, Sequence[int]]) -> list[list[Point]]:
    """The points as passes of one repeat each (ABC ABC): pass k holds each point that lacks a
    k-th repeat (`lacking`: point id -> the repeat numbers it lacks, ascending), with its
    repeats raised to that repeat's, so that it measures that repeat only (skip_done: the
    earlier ones were measured in the earlier passes). A sweep's first round, a resume and an
    adaptive round run here alike (harness/backends/here.py)."""
    most = max((len(lacking.get(p.id, ())) for p in points), default=0)
    return [
        [with_repeats(p, lacking[p.id][k] + 1) for p in points if len(lacking.get(p.id, ())) > k]
        for k in range(most)
    ]
