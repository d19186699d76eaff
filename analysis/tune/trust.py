"""How far the confirmation search trusts the model: what the profile's intervals already
settle before anything is measured (`separated`, `no_gain`: a neighbour left out; `plausible`:
one taken in), and how far the runs contradict the model where it put the answer (`error`,
`errors`, `beyond_error`, `gains_where_measured`).

Apart from the search (analysis/tune/search.py), which acts on these answers: each is a
judgement of predictions (and their intervals, analysis/tune/windows.py) against the choice or
the runs, with its own evidence from benchmarks/tune_truth.py's grids.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from analysis import noise
from analysis.tune.model import Config, Prediction

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
    choice's own runs fall off its prediction, and the search walks (search.py's `_wanted`). A
    dearer neighbour that gains under some profile (a stall share at its interval's high end
    that the choice's prefetch does not absorb) is measured."""
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


def errors(
    runs: Mapping[Config, Sequence[float]], predictions: Mapping[Config, Prediction], margin: float
) -> list[float]:
    """The model's errors on the measured configurations it predicted within the margin of its
    best: where it placed the answer (the configurations it puts far under are often right,
    and would dilute the error where it matters); their median beyond SEPARATION margins, the
    model is contradicted there. Each error one-sided (`error`): a profile read on a slow spell,
    every prediction low together, is not a model wrong where it put the answer (the shared
    22-point grid: a step read 9 % slow walked the whole neighbourhood of a plateau it had
    right, 34 % of the grid's device time)."""
    top = max(x.samples_per_s for x in predictions.values())
    errors = [
        error(statistics.median(r), predictions[c])
        for c, r in runs.items()
        if r and predictions[c].samples_per_s >= (1 - margin) * top
    ]
    return errors


def beyond_error(x: Prediction, here: float, error: float, margin: float) -> bool:
    """Whether a neighbour of a contradicted answer is out of reach of the answer's measured
    median `here` even where the model errs by `error` (the largest of its errors where it
    put the best, `errors`): its highest prediction (`Prediction.high`), raised by that error,
    under SEPARATION margins below the answer's median, as `separated` judges a neighbour
    against the choice. The walk after a contradiction is for the axis the model got wrong;
    such a neighbour cannot be the answer, and measuring it confirms nothing the answer needs
    (on the 193-point grid a profile that saw no stall walked prefetch_factor from 1 to 8 with
    every answer's whole neighbourhood, persistent_workers=false among it at 28 % of the
    best, predicted and measured there: its runs are the grid's longest, and that draw took
    12 % of the grid's device time against a budget of 5 %)."""
    high = x.samples_per_s if x.high is None else max(x.high, x.samples_per_s)
    return high * (1 + error) < (1 - SEPARATION * margin) * here


def error(measured: float, x: Prediction) -> float:
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


def gains_where_measured(x: Prediction, ref: Prediction, measured: float, margin: float) -> bool:
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
