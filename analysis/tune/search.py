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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from analysis import noise
from analysis.tune.model import COPY, MODELLED, Config, Prediction, cheapest_meeting

AXES = (*MODELLED, *COPY)


@dataclass(frozen=True, slots=True)
class Runs:
    """A configuration's runs and the pass each was measured in (the rows' run_pass, labelled
    as analysis.aggregate's `run_passes`): runs of one pass took turns on one machine (ABC ABC,
    harness/sweeps.run_points), so the judgement pairs them by pass, as the recommendation
    does (noise.ratio_by_pass: a slow spell of the machine shared by a pass cancels in its
    pair's ratio)."""

    values: tuple[float, ...]
    passes: tuple[noise.Pass, ...]


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


def neighbours(config: Config, grid: Sequence[Config]) -> list[Config]:
    """The grid's configurations one value away on one axis, the others held."""
    out: list[Config] = []
    for axis in AXES:
        for other in _adjacent(config, grid, axis):
            if other not in out:
                out.append(other)
    return out


def _adjacent(config: Config, grid: Sequence[Config], axis: str) -> list[Config]:
    here = getattr(config, axis)
    same = [c for c in grid if _held(c, config, axis)]
    values = sorted({getattr(c, axis) for c in same}, key=_order)
    if here not in values:
        return []
    i = values.index(here)
    picked = [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]
    return [c for c in same if getattr(c, axis) in picked]


def _held(c: Config, ref: Config, axis: str) -> bool:
    """c equals ref on every axis but `axis`; num_workers=0 has no worker settings to hold
    (its copy settings it has)."""
    if axis == "num_workers":
        held: tuple[str, ...] = COPY if 0 in (c.num_workers, ref.num_workers) else AXES
    elif axis in COPY:
        held = AXES
    elif c.num_workers != ref.num_workers or ref.num_workers == 0:
        return False
    else:
        held = AXES[1:]
    return all(getattr(c, other) == getattr(ref, other) for other in held if other != axis)


def _order(value: object) -> tuple[int, float]:
    return (0, float(value)) if isinstance(value, (int, float)) else (1, 0.0)  # bools are ints


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
            if not separated(by_config, c, choice, margin) and not no_gain(by_config, c, choice)
        ),
    ]
    return first, tuple(c for c in plausible(predictions, choice, margin) if c not in first)


SEPARATION = 2.0
"""How far under the choice the model's intervals must put a neighbour for the first round to
leave it out: twice the margin (once, on benchmarks/tune_truth.py, saved no more and lost an
answer on the erratic reader, whose stalls the model gets wrong by up to 10-20 %)."""


def separated(
    predictions: Mapping[Config, Prediction], c: Config, choice: Config, margin: float = noise.MARGIN
) -> bool:
    """Whether the model's intervals already decide `c` against the choice: its highest
    prediction under the choice's lowest by SEPARATION margins."""
    x, ref = predictions.get(c), predictions.get(choice)
    if x is None or ref is None:
        return False
    floor = 1 - SEPARATION * margin
    if x.corners and len(x.corners) == len(ref.corners):
        # Both under the same profile, corner by corner: an erratic reader's stall share moves
        # every prediction together, and one's high against the other's low (two different
        # profiles) would keep a neighbour the model puts far under the choice under every
        # profile it allows.
        return all(v < floor * r for v, r in zip(x.corners, ref.corners, strict=True))
    if x.high is None or ref.low is None:
        return False
    return x.high < floor * ref.low


def no_gain(predictions: Mapping[Config, Prediction], c: Config, choice: Config) -> bool:
    """Whether the model's intervals already say a dearer neighbour `c` cannot beat the choice:
    under every profile the windows allow (corner by corner, as `separated`), it is predicted
    at most the choice's samples/s. Where the choice sits at the step's bound with its stalls
    absorbed, more workers or prefetch cannot add to it; where the model is wrong there, the
    choice's own runs fall off its prediction, and the search walks (`_wanted`). A dearer
    neighbour that gains under some profile (a stall share at its interval's high end that
    the choice's prefetch does not absorb) is measured."""
    x, ref = predictions.get(c), predictions.get(choice)
    if x is None or ref is None or c.cost() <= choice.cost():
        return False
    if not x.corners or len(x.corners) != len(ref.corners):
        return False
    return all(v <= r * (1 + 1e-9) for v, r in zip(x.corners, ref.corners, strict=True))


def plausible(
    predictions: Sequence[Prediction], choice: Config, margin: float = noise.MARGIN
) -> list[Config]:
    """Where the profile is uncertain: the cheapest configuration of the choice's copy mode
    that its prediction's interval keeps within reach of the best (its high within the margin
    of the highest low). Nothing where the predictions carry no interval (copy modes are
    measured, not modelled: their own plateau points stand for them). The search measures it
    in its first round with the choice's neighbours: a profile whose windows disagreed may
    have put the choice a step too high or too low, and this is the cheaper end of what it
    allows."""
    mode = choice.copy_mode()
    shared = {len(x.corners) for x in predictions}
    if len(shared) == 1 and 0 not in shared:
        # Corner by corner (`separated`): within the margin of the best under some profile
        # the windows allow, that profile's best, not the best's low under another.
        tops = [max(x.corners[k] for x in predictions) for k in range(shared.pop())]
        reach = [
            x.config
            for x in predictions
            if x.config.copy_mode() == mode
            and any(v >= (1 - margin) * top for v, top in zip(x.corners, tops, strict=True))
        ]
        return [min(reach, key=Config.cost)] if reach else []
    known = [(x.config, x.low, x.high) for x in predictions if x.low is not None and x.high is not None]
    if not known:
        return []
    floor = (1 - margin) * max(low for _, low, _ in known)
    reach = [c for c, _, high in known if high >= floor and c.copy_mode() == mode]
    return [min(reach, key=Config.cost)] if reach else []


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
    (`_error`), or predicted to gain more than the margin above it, by the model or under a
    corner profile the best's runs agree with (`_gains_where_measured`); on a plateau the
    model called right, the noise would otherwise walk the best up the plateau one point at a
    time. Measured off: under the prediction, or above its interval's high (`_error`)."""
    predicted = {c: x.samples_per_s for c, x in predictions.items()}
    top = max(predicted.values())
    answer = judged.answer

    def off(c: Config) -> bool:
        return _error(statistics.median(runs[c]), predictions[c]) > margin

    # A model the measurements contradict where it put the best (its median error beyond
    # SEPARATION margins on the measured configurations it predicted within the margin of
    # the best) does not confirm an answer by agreeing with it there: the answer's whole
    # neighbourhood is measured, every axis at once. On the 193-point grid a profile that saw
    # no stall put the answer at prefetch_factor=1 (measured 20-47 % under its predictions
    # there), and a walk along num_workers stopped at a noisy run that read its prediction,
    # where prefetch was the axis that mattered.
    # Not those the model puts under the answer's runs by more than SEPARATION margins even
    # wrong by the most it was found wrong there (`_beyond_error`).
    errors = _errors(runs, predictions, margin)
    if errors and statistics.median(errors) > SEPARATION * margin:
        here = statistics.median(runs[answer])
        wanted = [
            c
            for c in neighbours(answer, grid)
            if c not in runs and not _beyond_error(predictions[c], here, max(errors), margin)
        ]
        if wanted:
            return wanted
    # An answer the model also placed within the margin of the best, measured where the
    # model or its profile's interval put it, confirms the model there: no walk (the noise
    # would move it among ties).
    if off(answer) or predicted[answer] < (1 - margin) * top:
        for axis in AXES:
            wanted = [c for c in _adjacent(answer, grid, axis) if c not in runs]
            if wanted:
                return wanted
    best = judged.best
    above = [c for c in _adjacent(best, grid, "num_workers") if c.num_workers > best.num_workers]
    gains = [
        c
        for c in above
        if predicted[c] > (1 + margin) * predicted[best]
        or _gains_where_measured(predictions[c], predictions[best], statistics.median(runs[best]), margin)
    ]
    return [c for c in above if c not in runs and (off(best) or c in gains)]


def _errors(
    runs: Mapping[Config, Sequence[float]], predictions: Mapping[Config, Prediction], margin: float
) -> list[float]:
    """The model's errors on the measured configurations it predicted within the margin of its
    best: where it placed the answer (the configurations it puts far under are often right,
    and would dilute the error where it matters); their median beyond SEPARATION margins, the
    model is contradicted there. Each error one-sided (`_error`): a profile read on a slow spell,
    every prediction low together, is not a model wrong where it put the answer (the shared
    22-point grid: a step read 9 % slow walked the whole neighbourhood of a plateau it had
    right, 34 % of the grid's device time)."""
    top = max(x.samples_per_s for x in predictions.values())
    errors = [
        _error(statistics.median(r), predictions[c])
        for c, r in runs.items()
        if r and predictions[c].samples_per_s >= (1 - margin) * top
    ]
    return errors


def _beyond_error(x: Prediction, here: float, error: float, margin: float) -> bool:
    """Whether a neighbour of a contradicted answer is out of reach of the answer's measured
    median `here` even where the model errs by `error` (the largest of its errors where it
    put the best, `_errors`): its highest prediction (`Prediction.high`), raised by that error,
    under SEPARATION margins below the answer's median, as `separated` judges a neighbour
    against the choice. The walk after a contradiction is for the axis the model got wrong;
    such a neighbour cannot be the answer, and measuring it confirms nothing the answer needs
    (on the 193-point grid a profile that saw no stall walked prefetch_factor from 1 to 8 with
    every answer's whole neighbourhood, persistent_workers=false among it at 28 % of the
    best, predicted and measured there: its runs are the grid's longest, and that draw took
    12 % of the grid's device time against a budget of 5 %)."""
    high = x.samples_per_s if x.high is None else max(x.high, x.samples_per_s)
    return high * (1 + error) < (1 - SEPARATION * margin) * here


def _error(measured: float, x: Prediction) -> float:
    """How far a configuration's measured median lies from what the profile allows, relative:
    above its prediction, beyond the prediction's interval's high (`Prediction.high`; 0 inside
    it); under it, from the prediction itself, as before intervals were taken in.
    One-sided because a machine's spells are: a machine busy with other work slows a window,
    it never speeds one (the issue's shared VM read a 28 ms step at 40.7 ms), so a profile
    read on a slow spell predicts every configuration low together, and its interval
    (windows.py: each quantity over its windows, by analysis/noise.py's rule) reaches up to
    what its quiet windows read; a median inside it says the profile's figure was slow, not
    that the model is wrong where it put the answer: the answer moves with every prediction.
    A walk on such a median measured a plateau the model had right, point by point (the
    drifting 22-point grid: eight configurations of its plateau on a profile that read the
    step 6 % slow, 27 % of the grid's device time where the median draw takes 10 %). A median
    under its prediction is what no slow profile explains (the profile flattered the
    configuration: stalls the prefetch does not absorb, too few workers)."""
    if measured >= x.samples_per_s:
        high = x.samples_per_s if x.high is None else max(x.high, x.samples_per_s)
        return max(0.0, measured / high - 1)
    return 1 - measured / x.samples_per_s


def _gains_where_measured(x: Prediction, ref: Prediction, measured: float, margin: float) -> bool:
    """Whether `x` is predicted above `ref` by more than the margin under some corner profile
    (windows.corners) that `ref`'s runs agree with: its corner within the margin of its
    measured median. A best measured above its prediction, inside the interval, is measured
    where the profile read the machine slow; under the profile its runs agree with, the
    plateau is higher and a dearer neighbour may reach further (the shared 193-point grid:
    eight workers read 984 where the model said 875, and nine, 880 by the model, 1154-1202
    under the corners eight's runs agree with, is 2 % better)."""
    if not x.corners or len(x.corners) != len(ref.corners):
        return False
    return any(
        abs(r / measured - 1) <= margin and v > (1 + margin) * r
        for v, r in zip(x.corners, ref.corners, strict=True)
    )


def exhaustive(grid: Sequence[Config], measure: Measure, *, repeats: int = 3) -> Judged:
    """The whole grid measured and judged: the truth tune is checked against."""
    measured = {c: split(v) for c, v in measure(list(grid), repeats).items()}
    return judge({c: measured[c][0] for c in grid}, passes={c: measured[c][1] for c in grid})


def same_answer(tuned: Config, truth: Mapping[Config, float], margin: float = noise.MARGIN) -> bool:
    """Whether `tuned` is as good as the true best within the margin (true samples/s given)."""
    return truth[tuned] >= (1 - margin) * max(truth.values())
