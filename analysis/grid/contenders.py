"""The contenders of a grid's best: the points a follow-up measures again so that the sweep
decides by itself (measure.decide, the default where measure.repeats is not given).

After the grid, per group (a node, or a node type) the recommendation's judgement
(analysis.grid.recommend) is read again, and a point is a contender when its figures sit
within the practical margin of the best's but the runs do not settle it:

- **untested** (one run on a side, the default's first round): its run lies within ranking.SCREEN of
  the best's. Four times the margin: on a quiet machine runs scatter by 1-2 %, but on a
  2-core VM shared with other work one run of a configuration tied with the best read 13.6 %
  low (issue 39's grid, num_workers=8 against 4), and a contender missed is an answer lost,
  where one too many costs two runs. A point cheaper than the best whose run was not clean
  (ranking.unclean_points: other processes took machine.SHARED of the CPU or more, its
  window was not steady, or its wait was heavy-tailed) is a contender whatever its gap:
  beside a busy loop, one run of num_workers=4 read 24 % below 8, its tie, and hid the
  answer; only a cheaper point can change it. Each is asked for ranking.MIN_RUNS runs, the
  fewest with an interval.
- **undecided** (its interval crosses an edge of the margin) and able to change the answer:
  cheaper than the cheapest configuration proven tied with its estimate inside the margin
  (the recommendation's candidate), or possibly faster than the best by more than the margin
  wherever its estimate lies (what makes the recommendation provisional). It is asked for the
  runs that would likely decide it (analysis.noise's formula on the spread so far).

The best is measured again with them, to the most any of them needs: the formula counts the
runs of both sides, and a follow-up run of each, in turn, pairs them by pass. A cheaper
configuration whose estimate lies beyond the margin, and that cannot beat the best by more
than it, is not a contender: its `undecided` line says what would decide it, and so does
the recommendation's `to decide:` line for the candidate a follow-up could not settle within
its budget (analysis.grid.deciding).

`repeats: auto` asks more of every undecided point (recommend.undecided_points); a follow-up
of the contenders asks only what the answer turns on, and its first round is one run a point.
"""

from __future__ import annotations

import pandas as pd

from analysis import noise
from analysis.grid.ranking import MIN_RUNS, judged_groups, screened, unclean_points


def contenders(summary: pd.DataFrame, margin: float = noise.MARGIN) -> dict[str, int]:
    """Point id -> the runs in all that would likely decide it, for the contenders of each
    group's best (see the module), the best itself among them where it has fewer runs than
    they need. An empty dict: nothing the answer turns on is open.

        from analysis.grid.contenders import contenders
        more = contenders(summarize(rows))   # {"3f9c2a1b0e": 3, "77aa01c2d4": 3}
    """
    out: dict[str, int] = {}
    for j in judged_groups(summary, margin):
        g, best, judged, by_cost = j.group, j.best, j.judged, j.by_cost
        rows = g.rows
        # The cheapest proven tied (the best where none is): only a cheaper one can be the answer.
        settled = next(
            n
            for n, p in enumerate(by_cost)
            if (ratio := judged[p][0]) is None or ratio.judge(margin) == noise.WITHIN
        )
        unclean = unclean_points(rows, g.records)
        for n, point_id in enumerate(by_cost):
            runs = _asks(judged[point_id][0], margin, cheaper=n < settled, unclean=point_id in unclean)
            if runs is None:
                continue
            out[point_id] = max(out.get(point_id, 0), runs)
            if best.runs < runs:
                out[best.point_id] = max(out.get(best.point_id, 0), runs)
    return out


def _asks(ratio: noise.Estimate | None, margin: float, *, cheaper: bool, unclean: bool = False) -> int | None:
    """The runs in all a point against the best asks for as a contender; None: not one."""
    if ratio is None:  # the best itself
        return None
    verdict = ratio.judge(margin)
    if verdict == noise.NOT_TESTED:
        return None if screened(ratio, cheaper=cheaper, unclean=unclean) else MIN_RUNS
    if verdict != noise.UNDECIDED:
        return None
    # What the recommendation calls open (recommend.Recommendation.candidate and .provisional):
    # a cheaper point whose estimate lies within the margin, or any point that may beat the
    # best by more than it, however far below its estimate lies (a busy machine's scattered runs).
    close = abs(ratio.change) <= margin
    challenges = ratio.high is not None and ratio.high > 1 + margin
    if not ((cheaper and close) or challenges):
        return None
    return ratio.runs_needed(margin) or noise.MAX_RUNS
