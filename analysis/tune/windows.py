"""The profile of `harness tune` over repeated windows: a robust figure with an interval for
every quantity the model takes from a window, and the prediction's interval that follows.

A shared machine slows a window now and then: on this session's 2-core VM a step read 40.7 ms
in one `host_batch` window where it is 28 ms, and the model fitted from that one window put the
plateau 30 % low. So each profile point runs `WINDOWS` windows, interleaved with the other
points' (the passes ABC ABC ABC of harness/sweeps.run_points: a slow spell lands on one pass,
not on one point), the model is fitted pass by pass (a pass's windows were measured side by
side: the step and the loader's rate of one pass share its spell), and each quantity is:

- **the median over the passes**: one slow pass of three moves it not at all (the
  Hodges-Lehmann estimate of analysis/noise.py moves by a quarter of the outlier at three
  values: the median's breakdown point, a third, is what a profile of three windows needs);
- **its interval**: the windows analysis/noise.py's `outliers` flags set aside (a slow spell's
  window: modified z-score over 3.5 and at least half the margin from the median), then
  noise's `location` on the rest where three or more remain (its 95 % interval: the log
  scale, Yuen's trimmed t, Welch's at three, wide where they disagree), else the range of the
  two that remain (two windows agreed within the margin, or a third was taken and outvoted
  one); widened to include the median.

Where the profile sees stalls, the main thread's load and the worker's rate are taken without
each window's own count of them (`_without_stalls`: the unstalled load and worker period, plus
the stall share pooled over every window that counts stalls, `_stalls`), and the passes'
agreement compares those: a 50-step window's count of rare stalls moves its mean by more than
the margin, and a third pass would only draw another count.

The model's prediction of each configuration then carries an interval (`with_intervals`):
the lowest and the highest samples/s over the profiles with each uncertain quantity at either
end of its interval (every combination: 2^k profiles, k <= 5). analysis/tune/search.py widens
its first round where those intervals say another configuration may be the answer.

Torch-free, as the whole of analysis/.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from analysis import noise
from analysis.tune.fit import fit_profile, with_plateau
from analysis.tune.model import Config, Prediction, Profile, predict, samples_per_s

WINDOWS = 3
"""Windows of each profile point where its first ones disagree: the fewest in which one slow
window is outvoted."""
FIRST_WINDOWS = 2
"""Windows of each profile point to begin with: where they agree (`agree`), a third could not
move the figure beyond the margin, and the profile stops there."""
PROFILE_SHARE = 4
"""A profile window is the spec's window over PROFILE_SHARE: the profile's windows at
num_workers=0 and 1 are the grid's slowest (each step waits for the whole load), and at the
spec's full length they alone cost 23-50 % of a 20-40-point grid's device time
(benchmarks/tune_truth.py); a quarter costs 7-15 %, and the figures the model takes from
them (a mean wait, a rate) hold within a few percent over 50 steps (the stall share, a rare
event, is pooled over the windows: `_stalls`)."""
MIN_PROFILE_STEPS = 20
"""The shortest profile window (never longer than the spec's own)."""
UNCERTAIN = ("step_s", "main_load_s", "efficiency", "stall_share", "handoff_s")
"""The quantities taken from windows that get an interval: the step, the worker's rate (the
main thread's load and a worker's efficiency), the stall share and the hand-off."""
_BOUNDS = {"efficiency": (1e-6, 1.0), "stall_share": (0.0, 1.0)}
_POSITIVE = ("step_s", "main_load_s", "efficiency")


@dataclass(frozen=True, slots=True)
class Figure:
    """One quantity over the windows: the median and its 95 % interval (the value itself,
    twice, under two windows or where the windows agree exactly)."""

    value: float
    low: float
    high: float
    n: int

    def relative_width(self) -> float:
        """Half the interval's width over the value (0 where the value is 0)."""
        return (self.high - self.low) / 2 / self.value if self.value else 0.0


def figure(values: Sequence[float]) -> Figure:
    """The median of the windows' values and its interval (the module docstring)."""
    clean = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not clean:
        raise ValueError("figure: no finite value among the windows")
    mid = statistics.median(clean)
    if min(clean) <= 0:  # a share or a hand-off that may be 0: no log scale; the windows' range
        return Figure(mid, min(clean), max(clean), len(clean))
    flagged = set(noise.outliers(clean))
    kept = [v for i, v in enumerate(clean) if i not in flagged]
    if len(kept) >= 3:
        est = noise.location(kept)
        assert est.low is not None and est.high is not None
        low, high = est.low, est.high
    else:
        low, high = min(kept), max(kept)
    return Figure(mid, min(low, mid), max(high, mid), len(clean))


def fit_windows(
    zeros: Sequence[Mapping[str, float]],
    somes: Sequence[Mapping[str, float]],
    *,
    workers: int,
    batch_size: int,
    ranks: int = 1,
) -> Profile:
    """The profile from `WINDOWS` passes of the two profile points (tune.fit.fit_profile's
    figures, one mapping a pass and a point): fitted pass by pass, each number the median over
    the passes, with the intervals of the UNCERTAIN quantities (`Profile.intervals`)."""
    if not zeros or len(zeros) != len(somes):
        raise ValueError(f"fit_windows: one figure of each point a pass (got {len(zeros)} and {len(somes)})")
    fits = [
        fit_profile(z, s, workers=workers, batch_size=batch_size, ranks=ranks)
        for z, s in zip(zeros, somes, strict=True)
    ]
    first = fits[0]
    numbers = {
        f.name: statistics.median(getattr(p, f.name) for p in fits)
        for f in fields(Profile)
        if isinstance(getattr(first, f.name), float)
    }
    stall_s, shares = _stalls(zeros, [p.stall_s for p in fits], somes, fits)
    numbers["stall_s"] = stall_s
    per_pass = {name: [getattr(p, name) for p in fits] for name in UNCERTAIN}
    if stall_s > 0:
        per_pass.update(_without_stalls(zeros, somes, fits, stall_s, statistics.fmean(shares), workers))
    intervals = {}
    for name in UNCERTAIN:
        fig = figure(shares if name == "stall_share" else per_pass[name])
        # The stall share is a rate of rare events: the windows (of equal length) pooled, the
        # mean of their shares, counts every stall seen; their median drops the window that
        # saw the most (on short windows, two stalls or none: the median halves it).
        value = statistics.fmean(shares) if name == "stall_share" else fig.value
        intervals[name] = (min(fig.low, value), max(fig.high, value))
        numbers[name] = value
    epochs = [p.epoch_steps for p in fits if p.epoch_steps]
    return replace(
        first,
        **numbers,
        epoch_steps=int(statistics.median(epochs)) if epochs else None,
        windows=len(fits),
        intervals=intervals,
    )


def _stalls(
    zeros: Sequence[Mapping[str, float]],
    lengths: Sequence[float],
    somes: Sequence[Mapping[str, float]] = (),
    fits: Sequence[Profile] = (),
) -> tuple[float, list[float]]:
    """The stall's length and each window's stall share. A stall is a rare event: a window of
    200 steps on a reader that stalls 2 % of the time holds about 4, and its p99 wait (what the
    length is read from) misses them where it holds 2 or fewer, so that window reads "no
    stall" (0) where the reader stalls as often. The median over windows would halve both
    figures; so the length is the median of the windows that saw one, and each window's share
    is its mean wait's excess over its p50 (which every stall adds to) over that length.

    The worker point's windows count too where its one worker bounds the step (`_worker_bound`:
    each step waits for the worker, no stock absorbs anything, so a stall adds its whole
    length to one step's wait, as at num_workers=0): a profile of two passes then counts the
    stalls of four windows, not two (50-step windows on a reader stalling 5 % of its reads
    hold 0 to 5 each: the share from two reads ±45 %, from four ±32 %); and their p99 over
    their p50 gives the stall's length where the num_workers=0 windows saw none (a reader
    stalling on 2 % of its reads leaves two 50-step windows without a stall one time in
    eight, four one time in fifty: the model then predicts no stall and puts the 193-point
    grid's answer at prefetch_factor=1, 30 % under the best)."""
    # A window that crossed an epoch's end holds its workers' restart among its waits: its tail
    # (p99: the longest waits) is the restart's, not a stall's (the 193-point grid's epochs of
    # 20 steps put two restarts of 355 ms in every 50-step window), so it gives no length; but
    # its mean less the restarting steps (the row's epoch_restart_time) still counts its stalls.
    # Leaving such windows out left only the two num_workers=0 windows to count: one profile
    # in eight then saw no stall, and put the 193-point grid's answer at 69 % of the best.
    bound = [s for s, fit in zip(somes, fits, strict=True) if _worker_bound(s, fit)]
    clean = [s for s in bound if not s.get("epoch_restarts")]
    restarted = [s for s in bound if s.get("epoch_restarts") and _unrestarted(s) is not None]
    seen = [v for v in (*lengths, *(_tail(s) for s in clean)) if v > 0]
    if not seen:  # no clean tail saw one: a restarted window's stalled seconds bound its length
        seen = (
            [min(v for v in (_stalled_s(s) for s in restarted) if v > 0)]
            if any(map(_stalled_s, restarted))
            else []
        )
    if not seen:
        return 0.0, [0.0] * len(zeros)
    length = statistics.median(seen)
    shares = []
    for z in [*zeros, *clean, *restarted]:
        mean = _unrestarted(z)
        p50 = z.get("loading_time_p50")
        excess = mean - p50 if mean is not None and p50 is not None and math.isfinite(mean - p50) else 0.0
        shares.append(min(1.0, max(0.0, excess / length)))
    return length, shares


def _unrestarted(figures: Mapping[str, float]) -> float | None:
    """A window's mean wait without its steps that started an epoch (the one home of a
    restarted window's accounting, `_restarted`); a window without restarts, its mean wait;
    None where the row lacks a figure this needs."""
    if not figures.get("epoch_restarts"):
        mean = figures.get("loading_time")
        return float(mean) if isinstance(mean, (int, float)) and math.isfinite(mean) else None
    restarted = _restarted(figures)
    return None if restarted is None else restarted[0]


def _restarted(figures: Mapping[str, float]) -> tuple[float, float, float] | None:
    """A window that crossed an epoch's end (new workers: the row's epoch_restart_time holds
    the restarting steps' whole time): its mean wait outside those steps, the steps outside
    them, and the restarting steps' own compute taken off (each the median step less the
    median wait); None where the row lacks a figure this needs or every step restarted."""
    n, r = figures.get("steps"), figures.get("epoch_restarts") or 0.0
    mean, p50, median = (figures.get(k) for k in ("loading_time", "loading_time_p50", "step_time_median"))
    restart = figures.get("epoch_restart_time")
    if not (_finite(n) and _finite(mean) and _finite(median) and _finite(restart)) or p50 is None:
        return None
    if n <= r:  # type: ignore[operator]
        return None
    own = r * max(0.0, median - p50)  # type: ignore[operator]
    outside = n - r  # type: ignore[operator]
    return max(0.0, (mean * n - (restart - own)) / outside), outside, own  # type: ignore[operator]


def _stalled_s(figures: Mapping[str, float]) -> float:
    """A worker-bound window's stalled seconds outside its restarts (its mean excess over its
    median wait, times its steps): one stall adds its whole length to one step's wait there,
    so this is the stall's length where the window held one, and a bound above it where it
    held more; 0 within what the restarts' accounting may leave (each restarting step's own
    compute, taken off, is the median step less the median wait: a 2 % slower run leaves a
    millisecond of it a restart) and the waits' own jitter (the margin of the median step)."""
    restarted, p50 = _restarted(figures), figures.get("loading_time_p50")
    if restarted is None or not _finite(p50):
        return 0.0
    mean, outside, own = restarted
    total = (mean - p50) * outside  # type: ignore[operator]
    doubt = own + noise.MARGIN * figures["step_time_median"]
    return total if total > doubt else 0.0


def _tail(figures: Mapping[str, float]) -> float:
    """A worker window's p99 wait over its p50: the stall's length where it holds one; 0
    without, or where it is within the margin of the window's median step (the waits' own
    jitter: no stall the step would notice)."""
    p50, p99 = figures.get("loading_time_p50"), figures.get("loading_time_p99")
    if not (_finite(p50) and _finite(p99)):
        return 0.0
    tail = p99 - p50  # type: ignore[operator]
    return tail if tail > noise.MARGIN * figures["step_time_median"] else 0.0


def _worker_bound(some: Mapping[str, float], fit: Profile) -> bool:
    """Whether the worker point's steps waited for its workers (its median step beyond the
    margin of the step's demand): its median step is then the workers' unstalled period."""
    median = some.get("step_time_median")
    return _finite(median) and median > (1 + noise.MARGIN) * fit.step_s  # type: ignore[operator]


def _without_stalls(
    zeros: Sequence[Mapping[str, float]],
    somes: Sequence[Mapping[str, float]],
    fits: Sequence[Profile],
    stall_s: float,
    share: float,
    workers: int,
) -> dict[str, list[float]]:
    """Each pass's main thread's load and worker's efficiency, their stalls counted at the
    pooled `share` rather than at the window's own count. A profile window of 50 steps on a
    reader that stalls 300 ms on 5 % of its reads holds 0 to 5 stalls: the window's mean
    load then moves by ±40 %, and the worker's rate (its loader's capacity over that mean,
    from another window with its own count) by more, though neither the read nor the worker
    changed. So the load is the window's unstalled one (its p50, which a stall leaves alone)
    plus the pooled share of the stall; the worker's unstalled period is its point's median
    step where the worker bounds it (one worker slower than the step: each step waits for it),
    else the capacity window's period less the pooled stalls; the efficiency is the load over
    that period plus the same pooled stalls."""
    stalls = share * stall_s
    loads, efficiencies = [], []
    for zero, some, fit in zip(zeros, somes, fits, strict=True):
        p50 = zero.get("loading_time_p50")
        load = (p50 if _finite(p50) else fit.main_load_s - stalls) + stalls  # type: ignore[operator]
        capacity_period = workers / some["loader_capacity"]
        if _worker_bound(some, fit):
            unstalled = workers * some["step_time_median"]
        else:
            unstalled = max(capacity_period - stalls, capacity_period / 2)
        loads.append(load)
        efficiencies.append(min(1.0, load / (unstalled + stalls)))
    return {"main_load_s": loads, "efficiency": efficiencies}


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def profile_steps(steps: int) -> int:
    """Steps of a profile window for a spec that measures `steps` (PROFILE_SHARE)."""
    return min(steps, max(MIN_PROFILE_STEPS, steps // PROFILE_SHARE))


def agree(values: Sequence[float], margin: float = noise.MARGIN) -> bool:
    """Whether two windows of a quantity agree closely enough that a third could not move
    their figure beyond the margin: the median of three lies between the two, so it is at most
    half their gap from their midpoint; the highest within 1 + 2 × margin of the lowest."""
    clean = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    return len(clean) < 2 or max(clean) <= (1 + 2 * margin) * min(clean)


def passes_agree(
    zeros: Sequence[Mapping[str, float]],
    somes: Sequence[Mapping[str, float]],
    plateau_rates: Sequence[float] = (),
    *,
    workers: int,
    batch_size: int,
    margin: float = noise.MARGIN,
) -> bool:
    """Whether the passes so far agree on the step, the main thread's load, the worker's rate
    and the plateau's rate (the hand-off): else a third pass is wanted. The stall share is
    left out: on an erratic reader it differs between windows by nature, and the median of
    three would not settle it either; so where a pass saw stalls, the load and the worker's
    rate compared are those with the stalls pooled (`_without_stalls`: a window's own count
    of rare stalls moves its mean load by more than the margin, and a third window would
    only draw another count)."""
    fits = [
        fit_profile(z, s, workers=workers, batch_size=batch_size) for z, s in zip(zeros, somes, strict=True)
    ]
    loads = [p.main_load_s for p in fits]
    rates = [p.efficiency / p.main_load_s for p in fits]
    stall_s, shares = _stalls(zeros, [p.stall_s for p in fits], somes, fits)
    if stall_s > 0:
        pooled = _without_stalls(zeros, somes, fits, stall_s, statistics.fmean(shares), workers)
        loads = pooled["main_load_s"]
        rates = [e / m for e, m in zip(pooled["efficiency"], loads, strict=True)]
    return (
        agree([p.step_s for p in fits], margin)
        and agree(loads, margin)
        and agree(rates, margin)
        and agree(plateau_rates, margin)
    )


def plateau_windows(p: Profile, top: Config, rates: Sequence[float]) -> Profile:
    """The hand-off from the plateau point's windows (tune.fit.with_plateau at their median
    rate), with its interval: the hand-off at either end of the rates' interval."""
    if not rates:
        return p
    rate = figure(rates)
    mid = with_plateau(p, top, rate.value)
    ends = [with_plateau(p, top, r).handoff_s for r in (rate.low, rate.high)]
    low, high = min(*ends, mid.handoff_s), max(*ends, mid.handoff_s)
    return replace(mid, intervals={**p.intervals, "handoff_s": (low, high)})


def corners(p: Profile) -> list[Profile]:
    """The profile with each uncertain quantity at either end of its interval, every
    combination (the profile itself where nothing is uncertain)."""
    spans = [(k, v) for k, v in p.intervals.items() if v[0] != v[1] and k in UNCERTAIN]
    out = []
    for ends in itertools.product(*(v for _, v in spans)):
        values: dict[str, Any] = {k: _clamp(k, e) for (k, _), e in zip(spans, ends, strict=True)}
        out.append(replace(p, **values))
    return out or [p]


def _clamp(name: str, value: float) -> float:
    low, high = _BOUNDS.get(name, (0.0, math.inf))
    if name in _POSITIVE:
        low = max(low, 1e-9)
    return min(high, max(low, value))


def with_intervals(p: Profile, predictions: Sequence[Prediction]) -> list[Prediction]:
    """The predictions with their interval filled in (`Prediction.low`, `.high`)."""
    ends = corners(p)
    out = []
    for x in predictions:
        values = [samples_per_s(q, x.config) for q in ends]
        low, high = min(*values, x.samples_per_s), max(*values, x.samples_per_s)
        out.append(replace(x, low=low, high=high, corners=tuple(values)))
    return out


def predict_with_intervals(p: Profile, grid: Iterable[Config]) -> list[Prediction]:
    """tune.model.predict, each prediction with its interval."""
    return with_intervals(p, predict(p, grid))
