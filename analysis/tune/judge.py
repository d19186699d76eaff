"""How the confirmation search judges measured runs: as the recommendation does
(analysis/grid/recommend.py's rule on analysis/noise.py's estimates: the best is the highest
median; a configuration is tied with it only when the 95 % interval of its ratio lies inside
±MARGIN; the cheapest tied is the answer), each against the best paired by pass where the runs
carry their passes.

Apart from the search (analysis/tune/search.py), which decides what to measure next: the
judgement of what was measured is the same whoever measured it (the search, the exhaustive
grid it is checked against).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from analysis import noise
from analysis.tune.model import Config


@dataclass(frozen=True, slots=True)
class Runs:
    """A configuration's runs and the pass each was measured in (the rows' run_pass, labelled
    as analysis.aggregate's `run_passes`): runs of one pass took turns on one machine (ABC ABC,
    harness/sweeps.run_points), so the judgement pairs them by pass, as the recommendation
    does (noise.ratio_by_pass: a slow spell of the machine shared by a pass cancels in its
    pair's ratio)."""

    values: tuple[float, ...]
    passes: tuple[noise.Pass, ...]


@dataclass(frozen=True, slots=True)
class Judged:
    """The measured configurations judged against the best, as the recommendation does."""

    best: Config
    answer: Config
    """The cheapest configuration tied with the best (the best itself when none is)."""
    verdicts: dict[Config, str]
    """noise's judgement of each configuration's samples/s over the best's (the best: within)."""
    undecided: dict[Config, int | None] = field(default_factory=dict)
    """Cheaper than the answer and undecided: the runs per point that would likely decide."""
    contenders: tuple[Config, ...] = ()
    """Dearer than the answer, undecided against the best, and predicted above the best by
    more than the margin (where predictions are given): the model and the runs disagree on
    which is the best."""


def split(measured: Sequence[float] | Runs) -> tuple[tuple[float, ...], tuple[noise.Pass, ...]]:
    """A configuration's runs and their passes (None each where the measure gave none)."""
    if isinstance(measured, Runs):
        return measured.values, measured.passes
    values = tuple(measured)
    return values, (None,) * len(values)


def judge(
    runs: Mapping[Config, Sequence[float]],
    margin: float = noise.MARGIN,
    passes: Mapping[Config, Sequence[noise.Pass]] | None = None,
    predicted: Mapping[Config, float] | None = None,
) -> Judged:
    """The recommendation's rule on the runs of each configuration (see the module docstring),
    each against the best paired by pass where `passes` allow it (noise.ratio_by_pass), else
    as independent runs."""
    best = max(runs, key=lambda c: statistics.median(runs[c]))
    verdicts = {best: noise.WITHIN}
    ratios: dict[Config, noise.Estimate] = {}
    passes = passes or {}
    for c, r in runs.items():
        if c != best:
            ratios[c] = noise.ratio_by_pass(runs[best], r, passes.get(best, ()), passes.get(c, ()))
            verdict = ratios[c].judge(margin)
            if verdict == noise.NOT_TESTED:  # one run: the recommendation's untested stand-in
                close = statistics.median(r) >= (1 - margin) * statistics.median(runs[best])
                verdict = noise.WITHIN if close else noise.LOWER
            verdicts[c] = verdict
    answer = min((c for c, v in verdicts.items() if v == noise.WITHIN), key=Config.cost)
    undecided = {
        c: ratios[c].runs_needed(margin)
        for c, v in verdicts.items()
        if v == noise.UNDECIDED and c.cost() < answer.cost()
    }
    predicted = predicted or {}
    contenders = tuple(
        c
        for c, v in verdicts.items()
        if v == noise.UNDECIDED
        and c.cost() > answer.cost()
        and predicted.get(c, 0.0) > (1 + margin) * predicted.get(best, math.inf)
    )
    return Judged(best, answer, verdicts, undecided, contenders)
