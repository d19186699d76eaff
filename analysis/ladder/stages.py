"""The ladder's stages, judged: each stage's cost between neighbouring rungs, from the paired
ratio of their per-repeat figures (analysis.noise, ±5 % margin; with one repeat,
UNTESTED_FLOOR stands in), and the loader's capacity rung by rung against the device's demand
(a `Capacity`: the stages of the loader's time, which rung first falls short, which stage only
tipped it over).

Loader time per batch is 1/capacity and adds up along the ladder: a stage costs
1/cap(rung below) − 1/cap(rung above), named when its drop lies wholly beyond the margin, and
at a share of the loader's time a user would act on.

Apart from the verdict (analysis/ladder/verdict.py), which turns these into a state, a headline
and a sentence: here is only what each pair of rungs says.
"""

from __future__ import annotations

from itertools import pairwise

import pandas as pd

from analysis import noise
from analysis.ladder import headline
from analysis.ladder.figures import Capacity, Ladder, Stage
from analysis.ladder.verdict_text import stage_between
from harness_schema import rungs as rung_names


def paired(above: pd.Series, below: pd.Series) -> noise.Estimate | None:
    """Below over above, from the repeats in which both were measured."""
    both = pd.concat([above, below], axis=1, keys=["a", "b"]).dropna()
    both = both[(both["a"] > 0) & (both["b"] > 0)]
    if both.empty:
        return None
    return noise.paired_ratio(list(both["a"]), list(both["b"]))


def judge(ratio: noise.Estimate | None) -> str:
    """The three-way judgement of a paired ratio; with one repeat (no interval), beyond
    UNTESTED_FLOOR stands in for beyond the margin."""
    if ratio is None:
        return noise.UNDECIDED
    if ratio.tested:
        return ratio.judge()
    if ratio.estimate < 1 - noise.UNTESTED_FLOOR:
        return noise.LOWER
    return noise.HIGHER if ratio.estimate > 1 + noise.UNTESTED_FLOOR else noise.WITHIN


def lower(ratio: noise.Estimate | None) -> bool:
    """Below by more than the margin, interval and all (one repeat: by UNTESTED_FLOOR)."""
    return ratio is not None and judge(ratio) == noise.LOWER


def higher(ratio: noise.Estimate | None) -> bool:
    return ratio is not None and judge(ratio) == noise.HIGHER


def walk(
    rates: pd.DataFrame,
    names: list[str],
    *,
    top: str | None = None,
    on_cpu: bool = False,
    given: bool = False,
) -> list[Stage]:
    """The stages between neighbouring rungs (columns of `rates`, top first). With `top`, the
    first rung's whole time is a stage too (loader time: a cached batch costs none); it is
    named when its share of the last rung's time is one a user would act on."""
    rungs = list(rates.columns)
    median = {r: float(rates[r].median()) for r in rungs}
    stages = []
    if top is not None and rungs:
        first, tested = rungs[0], int(rates[rungs[0]].notna().sum()) > 1
        cost = 1 / median[first]
        floor = noise.MARGIN if tested else noise.UNTESTED_FLOOR
        named = cost * median[rungs[-1]] >= floor
        stages.append(Stage(stage_between(top, first, names, given=given), None, first, None, cost, named))
    for above, below in pairwise(rungs):
        ratio = paired(rates[above], rates[below])
        judged = not (on_cpu and below == "host_batch")  # no copy on a CPU device: noise only
        stages.append(
            Stage(
                stage_between(above, below, names, given=given),
                above,
                below,
                ratio,
                1 / median[below] - 1 / median[above],
                named=judged and lower(ratio),
                faster=judged and higher(ratio),
            )
        )
    return stages


def transform_group(rates: pd.DataFrame, stages: list[Stage]) -> Stage | None:
    """With transform:<k> cuts, each cut may sit under the noise while the transforms together
    clearly do not: then name them together, with their costliest step."""
    rungs = list(rates.columns)
    if "processed_sample" not in rungs or "raw_sample" not in rungs:
        return None
    top, bottom = rungs.index("processed_sample"), rungs.index("raw_sample")
    if bottom - top < 2 or any(s.named and s.label.startswith("transform") for s in stages):
        return None  # no cuts between them, or a single transform already named
    ratio = paired(rates["processed_sample"], rates["raw_sample"])
    if not lower(ratio):
        return None
    cuts = [s for s in stages if s.above in rungs[top:bottom]]
    cost = 1 / float(rates["raw_sample"].median()) - 1 / float(rates["processed_sample"].median())
    worst = max(cuts, key=lambda s: s.cost)
    return Stage("transforms", "processed_sample", "raw_sample", ratio, cost, True, worst=worst)


def capacity(lad: Ladder) -> Capacity | None:
    """None where there is nothing to compare: no capacity, or no bound rung for the demand."""
    rungs = [r for r in lad.rungs if rung_names.is_sample_level(r) and lad.capacity[r].notna().any()]
    if not rungs or not lad.has_bound:
        return None
    rates = lad.capacity[rungs]
    stages = walk(rates, lad.names, top="host_batch", given=lad.given)
    group = transform_group(rates, stages)
    if group is not None:
        stages.append(group)  # its cuts stay: each has a row in the table
    ref = rungs[-1]
    floor = noise.MARGIN if lad.repeats > 1 else noise.UNTESTED_FLOOR
    for stage in stages:
        # High up the ladder (thousands of batches/s) a drop can be large as a ratio and
        # nothing in seconds: a stage is named only at a share of the loader's time at ref
        # that a user would act on.
        stage.named = stage.named and stage.cost * float(rates[ref].median()) >= floor
    demand = lad.steps[lad.bound]
    vs = {r: paired(demand, rates[r]) for r in rungs}
    short = {r: lower(vs[r]) for r in rungs}
    tip = None
    first_short = next((i for i, r in enumerate(rungs) if short[r]), None)
    if first_short:  # not None and not the top rung: the rung above it keeps up
        tip = next(s for s in stages if s.below == rungs[first_short] and s.above == rungs[first_short - 1])
    return Capacity(
        stages=stages,
        ref=ref,
        demand=float(demand.median()),
        capacity=float(rates[ref].median()),
        short=short,
        vs_demand=vs[ref],
        reach=paired(demand, lad.steps[ref]),
        tip=tip,
        room=headline.room(demand, rates[ref]),
    )
