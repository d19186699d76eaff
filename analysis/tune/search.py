"""What `harness tune` measures after the profile, and when it stops: the confirmation search.

Start from the model's choice (analysis/tune/model.py: the cheapest configuration predicted
within the margin of the best) and measure it with its neighbours on each axis of the grid
(one value down and one up of num_workers, prefetch_factor, persistent_workers, pin_memory
and non_blocking, the others held), `repeats` runs each, but those the model's intervals
already put well under the choice (`separated`: a 1-worker neighbour of a 4-worker choice,
persistent_workers=false where every epoch restarts the workers): measuring them would
confirm what the profile settled, and they are the grid's slowest runs; nor the dearer ones
the intervals cap at the choice (`no_gain`: at most its samples/s under every profile they
allow). Then judge the measurements as the
recommendation does
(analysis/grid/recommend.py's rule on analysis/noise.py's estimates: the best is the highest median;
a configuration is tied with it only when the 95 % interval of its ratio lies inside ±MARGIN;
the cheapest tied is the answer). Where the measured answer is not the model's choice, or the
best has a neighbour above it not yet measured, the model was wrong there: measure the
measured answer's neighbours on one axis at a time, num_workers first (a walk along the axis
the model got wrong), then the next num_workers above the best where the model is contradicted
there, and judge again after each.
When the answer's neighbourhood is measured, the cheaper configurations left undecided against
the best are measured again, with the best, one run of each at a time (a pass: the k-th
run of every one before any (k+1)-th), judged again after each pass, toward the runs that
would likely decide them (`Estimate.runs_needed`, at most MAX_RUNS): a comparison decided
stops confirming there; the walk goes on if the answer moves. The
search stops when nothing is left to measure, or at `budget` point-runs (then it says so).
What stays undecided is named with the runs that would decide it, as the recommendation does.

Torch-free and backend-free: `measure` is a callable (the real driver runs points through the
inline or local backend; benchmarks/tune_truth.py simulates them from known costs).

The search's parts are modules of their own: the judgement of the runs (analysis/tune/judge.py),
a configuration's neighbours (analysis/tune/neighbours.py), and what the model's intervals settle
and where the runs contradict it (analysis/tune/trust.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from analysis import noise
from analysis.tune import trust
from analysis.tune.judge import Judged, Runs, judge, split
from analysis.tune.model import Config, Prediction, cheapest_meeting
from analysis.tune.neighbours import AXES, adjacent, neighbours

Measure = Callable[[Sequence[Config], int], Mapping[Config, "Sequence[float] | Runs"]]
"""Bring these configurations to `runs` runs each in all (measuring only the runs each lacks):
config → samples/s of each of its runs, bare (judged as independent runs) or with their
passes (`Runs`: paired by pass)."""
MAX_RUNS = 6
"""The most runs a configuration gets to decide it against the best (noise.runs_needed says how
many would): beyond, it stays undecided and is named, as the recommendation names it."""


ROUND_WHY = {
    "first": "the model's choice, its neighbours and the configurations its intervals keep in reach",
    "walk": "neighbours of an answer the runs put where the model did not",
    "decide": "a cheaper configuration undecided against the best, one pass more of each",
    "contend": "a dearer configuration the model puts above the best, its runs undecided, toward "
    f"{MAX_RUNS} runs",
}
"""Why the search measures a round (SearchResult.why)."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    judged: Judged
    runs: dict[Config, tuple[float, ...]]
    predicted: dict[Config, float]
    model_choice: Config
    rounds: list[list[Config]]
    """The configurations measured in each round (the first: the choice and its neighbours)."""
    point_runs: int
    budget_spent: bool = False
    widened: tuple[Config, ...] = ()
    """Measured in the first round because the profile's intervals put them within reach of
    the answer, beyond the choice's neighbours (`plausible`)."""
    passes: dict[Config, tuple[noise.Pass, ...]] = field(default_factory=dict)
    """The pass of each run (None where the measure gave none): the judgement's pairs."""
    why: tuple[str, ...] = ()
    """Why each round was measured (ROUND_WHY's keys), one a round: where the device time went."""

    def errors(self) -> dict[Config, float]:
        """Per measured configuration: (predicted − measured median) / measured median."""
        return {c: self.predicted[c] / statistics.median(r) - 1 for c, r in self.runs.items() if r}

    def median_error(self) -> float:
        """The median absolute relative error of the prediction on the measured points."""
        return statistics.median(abs(e) for e in self.errors().values())


def search(
    grid: Sequence[Config],
    predictions: Sequence[Prediction],
    measure: Measure,
    *,
    repeats: int = 3,
    budget: int | None = None,
    margin: float = noise.MARGIN,
    max_runs: int = MAX_RUNS,
) -> SearchResult:
    """The confirmation search (module docstring). `budget`: the most point-runs (one run of
    one configuration) it may spend; None: no limit but the grid; below `repeats`, nothing is
    measured and the answer is the model's choice, unconfirmed (no verdicts, budget spent).
    `max_runs`: the most runs a configuration gets to decide it against the best."""
    predicted = {x.config: x.samples_per_s for x in predictions}
    choice = cheapest_meeting(list(predictions), margin).config
    runs: dict[Config, tuple[float, ...]] = {}
    passes: dict[Config, tuple[noise.Pass, ...]] = {}
    rounds: list[list[Config]] = []
    by_config = {x.config: x for x in predictions}
    first, widened = _first_round(grid, predictions, choice, margin)
    todo, target, why = [*first, *widened], repeats, "first"
    whys: list[str] = []
    spent, capped = 0, False
    goals: dict[Config, int] = {}
    while todo:
        cost = {c: target - len(runs.get(c, ())) for c in todo}
        if budget is not None:
            keep = _within(todo, cost, budget - spent)
            capped = capped or len(keep) < len(todo)
            todo = keep
            if not todo:
                break
        measured = measure(todo, target)
        for c in todo:
            runs[c], passes[c] = split(measured[c])
        spent += sum(cost[c] for c in todo)
        rounds.append(list(todo))
        whys.append(why)
        judged = judge(runs, margin, passes, predicted)
        todo, target, why = _wanted(judged, grid, runs, by_config, margin), repeats, "walk"
        if not todo:
            todo, target = _to_decide(judged, runs, max_runs, goals)
            why = "decide" if any(c in judged.undecided for c in todo) else "contend"
    if not runs:  # a budget below one configuration's runs: the model's choice, unconfirmed
        return SearchResult(Judged(choice, choice, {}), runs, predicted, choice, rounds, spent, True, widened)
    return SearchResult(
        judge(runs, margin, passes),
        runs,
        predicted,
        choice,
        rounds,
        spent,
        capped,
        widened,
        passes,
        tuple(whys),
    )


def _first_round(
    grid: Sequence[Config], predictions: Sequence[Prediction], choice: Config, margin: float
) -> tuple[list[Config], tuple[Config, ...]]:
    """The first round: the choice and its neighbours but those the model's intervals settle
    (`separated`, `no_gain`), and the configurations they keep in reach beyond (`plausible`)."""
    by_config = {x.config: x for x in predictions}
    first = [
        choice,
        *(
            c
            for c in neighbours(choice, grid)
            if not trust.separated(by_config, c, choice, margin) and not trust.no_gain(by_config, c, choice)
        ),
    ]
    return first, tuple(c for c in trust.plausible(predictions, choice, margin) if c not in first)


def _within(todo: Sequence[Config], cost: Mapping[Config, int], left: int) -> list[Config]:
    """The first configurations whose runs fit in what is left of the budget."""
    keep = []
    for c in todo:
        if cost[c] <= left:
            keep.append(c)
            left -= cost[c]
    return keep


def _to_decide(
    judged: Judged, runs: Mapping[Config, Sequence[float]], max_runs: int, goals: dict[Config, int]
) -> tuple[list[Config], int]:
    """The cheaper configurations left undecided against the best, with the best, one run
    more each (a pass), toward the runs that would likely decide them (noise's runs_needed)
    where that is at most `max_runs`: Stein's two stages, as the adaptive repeats do, judged
    after each pass so that a comparison decided early stops there. `goals` keeps each one's
    first projection: one pass's noise moving it beyond `max_runs` does not stop a comparison
    half-way (the projection at 3 runs is the one the search committed to)."""
    for c, n in judged.undecided.items():
        if n is not None and len(runs[c]) < n <= max_runs:
            goals[c] = max(goals.get(c, 0), n)
    # The dearer ones the model puts above the best by more than the margin, their runs
    # undecided under it, are brought to `max_runs` beside it: on a reader whose stalls the
    # prefetch does not absorb, a 200-step run reads 5-10 % off its long-run rate (its own
    # count of stalls), and three lucky runs of a cheaper configuration may top the model's
    # choice (the erratic reader: prefetch 4 read 399, 356 and 414 samples/s, true 361, over
    # prefetch 8's 390, 396 and 435, true 397). Their projection is no guide: the estimate
    # sits anywhere in a wide interval.
    for c in judged.contenders:
        goals[c] = max(goals.get(c, 0), max_runs)
    needed = [c for c in (*judged.undecided, *judged.contenders) if len(runs[c]) < goals.get(c, 0)]
    if not needed:
        return [], 0
    # One pass at a time (the k-th run of each before any (k+1)-th), judged after each.
    target = 1 + min(len(runs[c]) for c in needed)
    todo = [c for c in needed if len(runs[c]) < target]
    todo += [judged.best] if len(runs[judged.best]) < target else []
    return todo, target


def _wanted(
    judged: Judged,
    grid: Sequence[Config],
    runs: Mapping[Config, Sequence[float]],
    predictions: Mapping[Config, Prediction],
    margin: float,
) -> list[Config]:
    """Where the measured answer contradicts the model (measured off its prediction by more
    than the margin, or predicted short of the best), its neighbours on one axis at a time
    (num_workers first): a walk along the axis the model got wrong, not the whole
    neighbourhood at each step. Then the next num_workers above the best, where the model is
    contradicted there: the best measured off what its profile allows by more than the margin
    (`trust.error`), or predicted to gain more than the margin above it, by the model or under a
    corner profile the best's runs agree with (`trust.gains_where_measured`); on a plateau the
    model called right, the noise would otherwise walk the best up the plateau one point at a
    time. Measured off: under the prediction, or above its interval's high (`trust.error`)."""
    predicted = {c: x.samples_per_s for c, x in predictions.items()}
    top = max(predicted.values())
    answer = judged.answer

    def off(c: Config) -> bool:
        return trust.error(statistics.median(runs[c]), predictions[c]) > margin

    # A model the measurements contradict where it put the best (its median error beyond
    # SEPARATION margins on the measured configurations it predicted within the margin of
    # the best) does not confirm an answer by agreeing with it there: the answer's whole
    # neighbourhood is measured, every axis at once. On the 193-point grid a profile that saw
    # no stall put the answer at prefetch_factor=1 (measured 20-47 % under its predictions
    # there), and a walk along num_workers stopped at a noisy run that read its prediction,
    # where prefetch was the axis that mattered.
    # Not those the model puts under the answer's runs by more than SEPARATION margins even
    # wrong by the most it was found wrong there (`trust.beyond_error`).
    errors = trust.errors(runs, predictions, margin)
    if errors and statistics.median(errors) > trust.SEPARATION * margin:
        here = statistics.median(runs[answer])
        wanted = [
            c
            for c in neighbours(answer, grid)
            if c not in runs and not trust.beyond_error(predictions[c], here, max(errors), margin)
        ]
        if wanted:
            return wanted
    # An answer the model also placed within the margin of the best, measured where the
    # model or its profile's interval put it, confirms the model there: no walk (the noise
    # would move it among ties).
    if off(answer) or predicted[answer] < (1 - margin) * top:
        for axis in AXES:
            wanted = [c for c in adjacent(answer, grid, axis) if c not in runs]
            if wanted:
                return wanted
    best = judged.best
    best_median = statistics.median(runs[best])
    above = [c for c in adjacent(best, grid, "num_workers") if c.num_workers > best.num_workers]
    gains = [
        c
        for c in above
        if predicted[c] > (1 + margin) * predicted[best]
        or trust.gains_where_measured(predictions[c], predictions[best], best_median, margin)
    ]
    return [c for c in above if c not in runs and (off(best) or c in gains)]


def exhaustive(grid: Sequence[Config], measure: Measure, *, repeats: int = 3) -> Judged:
    """The whole grid measured and judged: the truth tune is checked against."""
    measured = {c: split(v) for c, v in measure(list(grid), repeats).items()}
    return judge({c: measured[c][0] for c in grid}, passes={c: measured[c][1] for c in grid})


def same_answer(tuned: Config, truth: Mapping[Config, float], margin: float = noise.MARGIN) -> bool:
    """Whether `tuned` is as good as the true best within the margin (true samples/s given)."""
    return truth[tuned] >= (1 - margin) * max(truth.values())
