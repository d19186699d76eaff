"""One noise model for every judgement of a difference: the ladder's verdict, `compare`, the
stragglers and the recommendation all ask it the same question — is B different from A, beyond
what the repeats say the noise is?

The method, in a few lines (the README repeats them):

- Figures are compared as ratios, on a log scale (a 2× gain and a 2× loss weigh the same).
- **Paired** where the two were measured in turn in the same process (the rungs of a point:
  repeats run ABC ABC): the per-repeat ratios b_i / a_i cancel what a slow spell of the
  machine did to both. **Independent** otherwise (two points, two sweeps): Welch's t on the
  logs of each side's repeats.
- The interval is Student's t at 95 % on the mean log-ratio: it narrows as 1/√n, so more
  repeats see smaller differences (a max − min spread does the opposite: it only grows).
- A difference is **called** when its interval excludes no-change *and* it is at least
  PRACTICAL (3 %): below that, machines jitter run to run and no user would act on it.
- With one run on either side there is no interval: the ratio is shown, marked **untested**,
  and never called. Where a verdict must still point somewhere (the ladder's one-repeat
  sentence), only drops beyond UNTESTED_FLOOR (10 %) are named, and always as untested.

The same bar as pyperf's `compare_to` (a t-test before "faster") and criterion.rs (an
interval, and a noise threshold under which a change is not reported).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
PRACTICAL = 0.03
"""Differences under 3 % are never called, whatever the interval says."""
UNTESTED_FLOOR = 0.10
"""With one repeat, a drop must exceed 10 % to be named at all (and is named as untested)."""
STRAGGLER_SHARE = 0.10
"""A rank straggles when it waits for data (or steps) 10 % of a step longer than its peers."""
UNTESTED = "untested: 1 run"

# Student's t, two-sided 95 % (0.975 quantile), by degrees of freedom; 1.96 beyond 30.
_T975: tuple[float, ...] = (
    *(12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228),
    *(2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086),
    *(2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
)


def t_quantile(df: float) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (df rounded down)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1 (got {df})")
    return _T975[int(df) - 1] if df <= len(_T975) else 1.96


@dataclass(frozen=True, slots=True)
class Ratio:
    """B over A: the estimate and its 95 % interval (None when untested)."""

    estimate: float
    low: float | None
    high: float | None
    n: int
    """Pairs (paired) or the smaller side's runs (independent)."""

    @property
    def tested(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def change(self) -> float:
        """estimate − 1: +0.25 is 25 % more."""
        return self.estimate - 1

    def called(self) -> bool:
        """Beyond the noise and beyond PRACTICAL: a difference a user may act on."""
        if self.low is None or self.high is None:
            return False
        outside = self.low > 1 or self.high < 1
        return outside and abs(math.log(self.estimate)) >= math.log1p(PRACTICAL)

    def tied(self) -> bool:
        """Tested and not called: the same, as far as the repeats can tell."""
        return self.tested and not self.called()

    def interval_text(self) -> str:
        if self.low is None or self.high is None:
            return UNTESTED
        return f"95% CI {self.low - 1:+.1%} .. {self.high - 1:+.1%}, n={self.n}"


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> Ratio:
    """B over A from runs measured in turn: a[i] and b[i] belong to the same repeat."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if _positive(x) and _positive(y)]
    logs = [math.log(y / x) for x, y in pairs]
    return _interval(logs, len(logs) - 1)


def independent_ratio(a: Sequence[float], b: Sequence[float]) -> Ratio:
    """B over A from independent runs (Welch's t on the logs)."""
    la = [math.log(x) for x in a if _positive(x)]
    lb = [math.log(y) for y in b if _positive(y)]
    if not la or not lb:
        raise ValueError("independent_ratio needs at least one positive value on each side")
    center = statistics.fmean(lb) - statistics.fmean(la)
    n = min(len(la), len(lb))
    if n < 2:
        return Ratio(math.exp(center), None, None, n)
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    se = math.sqrt(va + vb)
    if se == 0:
        return Ratio(math.exp(center), math.exp(center), math.exp(center), n)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1)) if va and vb else n - 1
    half = t_quantile(max(1.0, df)) * se
    return Ratio(math.exp(center), math.exp(center - half), math.exp(center + half), n)


def _interval(logs: Sequence[float], df: int) -> Ratio:
    if not logs:
        raise ValueError("no pair of positive values to compare")
    center = statistics.fmean(logs)
    if len(logs) < 2:
        return Ratio(math.exp(center), None, None, len(logs))
    half = t_quantile(df) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Ratio(math.exp(center), math.exp(center - half), math.exp(center + half), len(logs))


def relative_spread(values: Sequence[float]) -> float | None:
    """A robust dispersion, relative to the median: the median absolute deviation, scaled to
    estimate a standard deviation (× 1.4826), over the median. None with fewer than 2 values."""
    clean = [v for v in values if v == v]
    if len(clean) < 2:
        return None
    center = statistics.median(clean)
    if center == 0:
        return None
    mad = statistics.median(abs(v - center) for v in clean)
    return 1.4826 * mad / abs(center)


def _positive(x: float) -> bool:
    return x == x and x > 0
