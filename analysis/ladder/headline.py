"""The caching ladder verdict's headline: the one stage a user reads first, or none (issue 42).
analysis.ladder.verdict decides with it, analysis.ladder.verdict_text says it.

- **The largest estimated cost.** The headline is the stage that costs the loader the most time
  by its estimate (Capacity.costliest), whether its repeats settle that cost or not. A smaller
  stage whose interval is tighter is never promoted over it: on a shared CPU with 2 repeats, a
  read estimated at 42 % of the loader's time was passed over for collation's settled 9 %.
  Where the repeats do not settle it (Stage.unsettled: the paired ratio's interval reaches
  across an edge of the ±5 % margin), the headline says so, and how many repeats would
  (`repeats_to_settle`).
- **Room to spare.** Where full's loader delivered at least ROOM times the step's demand in
  every repeat, nothing is headlined: the loader keeps up with room to spare, and no stage's
  cost is worth a user's time. Judged on the worst repeat (each repeat's capacity over the
  same repeat's demand, paired as the ladder's rungs run in turn), not on the interval: with 2
  repeats Student's t is 12.7, and the interval of a loader at 21× the demand reached down to
  0.37× (measured beside a CPU burner), so the noise model alone called it undecided and
  headlined a stage that costs the step nothing.
"""

from __future__ import annotations

import pandas as pd

from analysis.ladder.figures import Capacity, Stage

ROOM = 2.0
"""Capacity over demand, in every repeat, from which the loader has room to spare. A stage
stands out above the loader's headroom when its cost is more than the time the loader has to
spare each step (1/demand − 1/capacity): it alone could make the step wait. A stage costs at
most all of the loader's time (1/capacity), so from 2× on, no stage can, and the loader could
take twice as long for every batch (a machine twice as busy) and still keep up. The loader's
capacity is measured through the rung's own workers (batches/s of all of them together), so
the worker count is in it already: the rule needs no num_workers."""


def room(demand: pd.Series, capacity: pd.Series) -> float | None:
    """The least, over the repeats in which both were measured, of capacity over demand; None
    without a repeat in common."""
    both = pd.concat([demand, capacity], axis=1, keys=["demand", "capacity"]).dropna()
    both = both[(both["demand"] > 0) & (both["capacity"] > 0)]
    if both.empty:
        return None
    return float((both["capacity"] / both["demand"]).min())


def has_room(cap: Capacity) -> bool:
    """The loader delivered at least ROOM times the demand in every repeat."""
    return cap.room is not None and cap.room >= ROOM


def loader_headline(cap: Capacity) -> tuple[str | None, bool | None]:
    """(the headline's stage, whether its cost is settled), judged on loader time; (None, None)
    where the loader has room to spare, or where the largest cost is settled as too small to
    name (under 5 % of the loader's time, or a drop inside the margin): nothing stands out."""
    if has_room(cap):
        return None, None
    top = cap.costliest()
    if top.named or top.unsettled:
        return top.label, top.named
    return None, None


def repeats_to_settle(stage: Stage) -> int | None:
    """The repeats after which an unsettled stage's cost would likely be settled; None where
    more than analysis.noise.MAX_RUNS would be needed (or there is no spread to go by).

    The usual n for a margin, on the stage's paired ratio (below's rate over above's, repeat by
    repeat, on the log scale): its standard error SE comes from the spread the n repeats showed,
    and is taken to shrink as √(n/n′) with n′ repeats while the estimate stays where it is; n′
    is the smallest count with (t₀.₉₇₅(n′ − 1) + z₀.₈) · SE · √(n/n′) ≤ the distance from the
    estimate to the edge of the ±5 % margin its interval must clear: 95 % confidence, 80 %
    power (analysis.noise.Estimate.runs_needed). Repeats, not more runs of one rung: the rungs
    run in turn, so each repeat adds one pair."""
    if stage.ratio is None:
        return None
    return stage.ratio.runs_needed()
