"""One noise model for every judgement of a difference: the recommendation, `compare`, the
stragglers, the ladder's verdict and the expectations all ask it the same question, and the
tables show its figures: how far apart are B and A, and what do the repeats allow us to say?

The method (docs/concepts/noise.md repeats it in a few lines):

- **Scale.** Throughputs and times are compared as ratios, on a log scale (a 2× gain and a 2×
  loss weigh the same). Waits that may be zero (a rank's wait for data) are compared as
  differences in seconds, as a share of the step they delay.
- **Estimate: Hodges-Lehmann** on the logs (Hodges & Lehmann 1963): of B against A, the median
  of all the differences between a run of B and a run of A; of one sample (a point, or paired
  per-repeat ratios), the median of its Walsh averages. It follows the runs that agree: one
  slow run out of three moves it far less than it moves a mean (runs 222.6, 222.7, 204.5
  against 191, 190, 192: -13.8 %, where the means say -11.7 %).
- **Interval: Yuen's trimmed t** around it (Yuen 1974; Wilcox, *Introduction to Robust
  Estimation and Hypothesis Testing*, ch. 4-5): the standard error of the 20 % trimmed mean
  from the winsorized variance, Student's t with Welch's degrees of freedom. From 5 runs on,
  the lowest and the highest run of a side are winsorized, so one stalled run does not widen
  the interval much; under 5 runs nothing can be trimmed and it is Welch's: with 3 runs no
  estimator can tell an outlier from the spread (a 33 % contamination), so the interval stays
  honest and wide rather than confidently wrong, and the run is flagged. (Simulated on 4,000
  A/A pairs, 1 % gaussian noise or that and a 10-50 % stall in 15 % of runs, n = 3, 5, 10,
  the interval covered no change 95-99 % of the time.) Paired
  where two figures were measured in turn in the same process (the rungs of a point, ABC ABC;
  the ranks of a repeat): the one-sample version on the per-repeat log-ratios, which cancels a
  slow spell of the machine. Two points are paired the same way **by pass** where their
  runs took turns on one machine (inline, local: passes ABC ABC, each row's `run_pass`):
  `ratio_by_pass` pairs the i-th run of A with the run of B of the same pass, where every run
  of the side with fewer runs has its partner; the drift a pass shares cancels in the pair's
  ratio. Independent otherwise (points run back to back on Slurm, two sweeps, two nodes).
  Outliers are not discounted at 3-4 runs on purpose: on erratic storage a slow run is most
  often the configuration's own stall, and discounting it would flatter exactly the
  configurations that erratic reads hurt.
- **One picture.** A point's own interval (`location`, the same estimate and interval on its
  runs) is what the table shows as `ci95` (± half its width); the differences the sentences
  judge come from the same runs and formulas.
- **Three-way judgement with a practical margin** (MARGIN, ±5 %), as criterion.rs judges a
  change against its noise threshold: WITHIN (tied) only when the whole 95 % interval lies
  inside the margin; LOWER or HIGHER when it lies wholly beyond it; UNDECIDED otherwise. A
  wide interval is never a tie. With one run there is no interval: UNTESTED, never called.
- **Repeats that would decide** (`Estimate.runs_needed`): for an undecided difference, the
  runs per side after which the interval would likely (80 % power) clear the margin, if the
  estimate stays where it is and the standard error shrinks as √(n/n′): the smallest n′ with
  (t₀.₉₇₅(df′) + z₀.₈) · SE · √(n/n′) ≤ the distance from the estimate to the boundary it must
  clear (the nearer edge of the margin when inside it, the edge it lies beyond otherwise).
- **A run that stands out** (`outliers`): modified z-score above 3.5 (Iglewicz & Hoaglin 1993:
  0.6745 × distance from the median over the MAD) and at least MARGIN/2 from the median (a
  smaller deviation cannot move a judgement). It is kept in every figure and named in the
  report, never dropped.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
MARGIN = 0.05
"""The practical margin: differences within ±5 % are ties; a call needs its interval beyond."""
TRIM = 0.2
"""Yuen's trimming: the lowest and highest 20 % of a side's runs (none below 5 runs)."""
POWER_Z = 0.8416
"""z₀.₈: the repeats named for an undecided difference decide it with about 80 % probability."""
MAX_RUNS = 100
"""Beyond this, runs_needed says None (a difference on the margin's edge, or a wide spread)."""
OUTLIER_Z = 3.5
"""Iglewicz & Hoaglin's cut-off for the modified z-score."""
UNTESTED_FLOOR = 0.10
"""With one repeat, a drop must exceed 10 % to be named at all (and is named as untested)."""
STRAGGLER_SHARE = 0.10
"""A rank straggles when it waits for data 10 % of a step longer than its peers (the margin of
the stragglers' judgement); a node when its training_time is 10 % longer."""
UNTESTED = "untested: 1 run"

LOWER, WITHIN, HIGHER, UNDECIDED, NOT_TESTED = "lower", "within", "higher", "undecided", "untested"
"""The judgements: wholly below −margin, wholly inside ±margin, wholly above +margin, none of
these, no interval."""

# Student's t, two-sided 95 % (0.975 quantile), by degrees of freedom; 1.96 beyond 30.
_T975: tuple[float, ...] = (
    *(12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228),
    *(2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086),
    *(2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
)


_T_LIMIT = 1.96
"""Student's t quantile beyond 30 degrees of freedom, and the least it ever is."""


def t_quantile(df: float) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (df rounded down)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1 (got {df})")
    return _T975[int(df) - 1] if df <= len(_T975) else _T_LIMIT


@dataclass(frozen=True, slots=True)
class _Side:
    """One sample's squared standard error (of its trimmed mean) and Yuen's degrees of freedom."""

    var: float  # the squared standard error of the trimmed mean
    df: int  # h − 1: the runs left after trimming, less one
    n: int


def _side(values: Sequence[float]) -> _Side:
    """The side of these runs, computed once per set of runs: a report computes a point's side
    for its ci95 and again for each judgement against it (10,000 of them against a group's best)."""
    return _side_of(tuple(values))


def clear_cache() -> None:
    """Forget the sides computed (benchmarks/analysis_scale.py times each report from empty)."""
    _side_of.cache_clear()


@functools.lru_cache(maxsize=1 << 17)
def _side_of(values: tuple[float, ...]) -> _Side:
    x = sorted(values)
    n = len(x)
    if n == 2:  # nothing trimmed: the general way below, without its lists (a point of 2 runs)
        return _Side((n - 1) * variance(x) / 2, 1, 2)
    g = int(TRIM * n)
    h = n - 2 * g
    if n < 2:
        return _Side(math.nan, 0, n)
    winsorized = [x[g]] * g + x[g : n - g] + [x[n - g - 1]] * g
    var = (n - 1) * variance(winsorized) / (h * (h - 1))
    return _Side(var, h - 1, n)


def variance(values: Sequence[float]) -> float:
    """statistics.variance to the last bit (the exact variance of the floats, rounded once),
    in integers rather than its Fractions: a report judges every point of a sweep with it,
    and Fractions took a third of the time of a report of 10,000 points."""
    if len(values) == 2:
        exact = _variance_of_two(*values)
        if exact is not None:
            return exact
    if len(values) < 2 or not all(type(v) is float and math.isfinite(v) for v in values):
        return statistics.variance(values)
    ratios = [v.as_integer_ratio() for v in values]  # each denominator a power of two
    shift = max(d for _, d in ratios).bit_length() - 1
    scaled = [m << (shift - d.bit_length() + 1) for m, d in ratios]  # each value × 2**shift
    n, total, squares = len(scaled), sum(scaled), sum(i * i for i in scaled)
    try:
        # (n Σx² − (Σx)²) / (n (n − 1)), scaled back; int / int is rounded once, correctly.
        return (n * squares - total * total) / ((n * (n - 1)) << (2 * shift))
    except OverflowError:  # beyond a float: statistics says so its own way
        return statistics.variance(values)


_SMALLEST_NORMAL = 2.2250738585072014e-308


def _variance_of_two(a: float, b: float) -> float | None:
    """The variance of two floats, (a − b)² / 2, rounded once as variance() rounds it, where
    a − b is exact (the runs of a point: their logs lie within a factor 2 of each other, and
    so their difference is exact); None where it is not, or the square is not normal. A
    report computes it for every point of 2 runs (100,000 in issue #36's), and the integers
    cost ten times more."""
    if type(a) is not float or type(b) is not float:
        return None
    d = a - b
    # Knuth's TwoSum: the rounding error of a − b, exactly; 0 when a − b is exact.
    back = d - a
    if (a - (d - back)) + (-b - back) != 0 or not math.isfinite(d):
        return None
    square = d * d  # d² rounded once; halving it is exact while it stays normal
    if square == 0:
        return 0.0
    if not 2 * _SMALLEST_NORMAL <= square < math.inf:
        return None
    return square / 2


@dataclass(frozen=True, slots=True)
class Estimate:
    """B against A: the estimate and its 95 % interval (None when untested), as a ratio (log
    scale inside) or, with `shift`, as a difference (a share of a step)."""

    estimate: float
    low: float | None
    high: float | None
    n: int
    """Pairs (paired), or the smaller side's runs (independent)."""
    shift: bool = False
    """A difference (estimate − 0) rather than a ratio (estimate / 1)."""
    sides: tuple[_Side, ...] = ()
    paired: bool = False
    """From pairs of runs measured side by side (n pairs), not from two independent samples."""

    @property
    def tested(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def change(self) -> float:
        """A ratio's estimate − 1 (+0.25 is 25 % more); a shift's estimate."""
        return self.estimate if self.shift else self.estimate - 1

    def judge(self, margin: float = MARGIN) -> str:
        """LOWER, WITHIN, HIGHER (the interval wholly below, inside, above ±margin),
        UNDECIDED, or NOT_TESTED (one run: no interval)."""
        if self.low is None or self.high is None:
            return NOT_TESTED
        zero = 0.0 if self.shift else 1.0
        if self.high < zero - margin:
            return LOWER
        if self.low > zero + margin:
            return HIGHER
        if self.low >= zero - margin and self.high <= zero + margin:
            return WITHIN
        return UNDECIDED

    def called(self, margin: float = MARGIN) -> bool:
        """Beyond the margin, interval and all: a difference a user may act on."""
        return self.judge(margin) in (LOWER, HIGHER)

    def tied(self, margin: float = MARGIN) -> bool:
        """Inside the margin, interval and all: the same, as far as anyone would act on."""
        return self.judge(margin) == WITHIN

    def runs_needed(self, margin: float = MARGIN, *, edge: float | None = None) -> int | None:
        """Runs per side after which an undecided difference would likely be decided (the
        module's formula); the current count where it is decided already; None where it
        cannot be told (one run, no spread) or would take more than MAX_RUNS. `edge`: the one
        boundary a one-sided judgement must clear (an expectation's bound with its margin),
        on the estimate's scale, instead of the nearer edge of ±margin."""
        verdict = self.judge(margin)
        if verdict == NOT_TESTED or not self.sides:
            return None
        n = min(side.n for side in self.sides)
        if verdict != UNDECIDED:
            return n
        center, se = self._center_se()
        edges: tuple[float, ...] = (
            (-margin, margin) if self.shift else (math.log1p(-margin), math.log1p(margin))
        )
        if edge is not None:
            edges = (edge,) if self.shift else (math.log(edge),)
        # Inside the margin the interval must clear both edges, beyond it the edge it lies
        # beyond: either way, the nearer edge decides.
        distance = min(abs(center - e) for e in edges)
        if distance <= 0 or se <= 0:
            return None
        # _welch_df of the sides projected to `runs` (_project), inline: the same operations
        # in the same order (so the same df to the bit), without two sides made per count
        # (a report on 100,000 points asks this of ~20,000 undecided points).
        spreads = [side.var * side.n for side in self.sides]
        # t is never below its limit 1.96, so no count under n·((1.96 + z)·se / distance)² can
        # pass the test below: the search starts there (one less, for the float's rounding),
        # and a difference that needs more than MAX_RUNS is told without counting up to it.
        fewest = n * ((_T_LIMIT + POWER_Z) * se / distance) ** 2
        if fewest > MAX_RUNS + 1:
            return None
        for runs in range(max(n + 1, math.floor(fewest) - 1), MAX_RUNS + 1):
            projected_df = runs - 2 * int(TRIM * runs) - 1  # every projected side's
            if len(spreads) == 1:
                df = float(projected_df)
            else:
                variances = [spread / runs for spread in spreads]
                total = sum(variances)
                parts = sum(v**2 / projected_df for v in variances) if projected_df > 0 else 0
                df = float(projected_df) if total == 0 or parts == 0 else total**2 / parts
            if (t_quantile(max(1.0, df)) + POWER_Z) * se * math.sqrt(n / runs) <= distance:
                return runs
        return None

    def _center_se(self) -> tuple[float, float]:
        """The estimate on the analysis scale (a log-ratio or a shift) and its standard error."""
        sides = self.sides
        center = self.estimate if self.shift else math.log(self.estimate)
        return center, math.sqrt(sum(s.var for s in sides))

    def interval_text(self) -> str:
        if self.low is None or self.high is None:
            return UNTESTED
        if self.shift:
            return f"95% CI {self.low:+.1%} .. {self.high:+.1%}, n={self.n}"
        return f"95% CI {self.low - 1:+.1%} .. {self.high - 1:+.1%}, n={self.n}"


def _project(side: _Side, runs: int) -> _Side:
    """The side as it would be with `runs` runs: the same spread, Yuen's df for that count."""
    g = int(TRIM * runs)
    return _Side(side.var * side.n / runs, runs - 2 * g - 1, runs)


def _welch_df(sides: Sequence[_Side]) -> float:
    if len(sides) == 1:
        return float(sides[0].df)
    total = sum(s.var for s in sides)
    parts = sum(s.var**2 / s.df for s in sides if s.df > 0)
    if total == 0 or parts == 0:
        return float(min(s.df for s in sides))
    return total**2 / parts


def _hodges_lehmann(b: Sequence[float], a: Sequence[float] | None = None) -> float:
    """The Hodges-Lehmann estimate: of one sample, the median of its Walsh averages (every
    pair's mean, each value with itself included); of B against A, the median of all the
    differences b_j - a_i. One run out of three moves it less than it moves the mean, and it
    equals the plain difference when the runs agree."""
    if a is None:
        return statistics.median((x + y) / 2 for i, x in enumerate(b) for y in b[i:])
    return statistics.median(y - x for x in a for y in b)


def _estimate(sides: tuple[_Side, ...], center: float, *, shift: bool, paired: bool = False) -> Estimate:
    """The interval of `center` from the sides' trimmed means and squared standard errors."""
    n = min(s.n for s in sides)
    back = (lambda v: v) if shift else math.exp
    if n < 2:
        return Estimate(back(center), None, None, n, shift, sides, paired)
    se = math.sqrt(sum(s.var for s in sides))
    half = t_quantile(max(1.0, _welch_df(sides))) * se
    return Estimate(back(center), back(center - half), back(center + half), n, shift, sides, paired)


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """B over A from runs measured in turn: a[i] and b[i] belong to the same repeat."""
    logs = [math.log(y / x) for x, y in zip(a, b, strict=True) if _positive(x) and _positive(y)]
    if not logs:
        raise ValueError("no pair of positive values to compare")
    return _estimate((_side(logs),), _hodges_lehmann(logs), shift=False, paired=True)


Pass = str | None
"""A run's pass (a sweep and its run_pass, as analysis.aggregate labels it), or None where the
run was not measured in an interleaved pass."""


def ratio_by_pass(
    a: Sequence[float], b: Sequence[float], a_passes: Sequence[Pass] = (), b_passes: Sequence[Pass] = ()
) -> Estimate:
    """B over A, paired by pass where the runs allow it (`pairs_by_pass`), else independent:
    the runs of one point that took turns with the other's on one machine share its drift."""
    pairs = pairs_by_pass(a, b, a_passes, b_passes)
    if pairs is None:
        return independent_ratio(a, b)
    return paired_ratio([x for x, _ in pairs], [y for _, y in pairs])


def ratios_by_pass(
    a: Sequence[float], a_passes: Sequence[Pass], others: Iterable[tuple[Sequence[float], Sequence[Pass]]]
) -> Iterator[Estimate]:
    """ratio_by_pass(a, b, a_passes, b_passes) for each (b, b_passes) of `others`, the same
    Estimates to the bit, with A's runs prepared once: a report judges every point of a group
    against its best (100,000 points in issue #36's), and A's logs, side and passes were most
    of the time of each judgement."""
    a_by = _one_per_pass(a, a_passes, True) if len(a_passes) == len(a) else None
    la = [math.log(x) for x in a if _positive(x)]
    side_a = _side(la) if la else None
    log = math.log
    for b, b_passes in others:
        if a_by is not None and len(b_passes) == len(b):
            pairs = _shared_passes(a_by, _one_per_pass(b, b_passes, True), len(a), len(b))
            if pairs is not None:
                yield paired_ratio([x for x, _ in pairs], [y for _, y in pairs])
                continue
        lb = [log(y) for y in b if y == y and y > 0]  # _positive, inline
        if side_a is None or not lb:
            raise ValueError("independent_ratio needs at least one positive value on each side")
        # _hodges_lehmann(lb, la): statistics.median of the differences, as it computes it.
        differences = sorted([y - x for x in la for y in lb])
        half = len(differences) // 2
        odd = len(differences) % 2
        center = differences[half] if odd else (differences[half - 1] + differences[half]) / 2
        yield _ratio_estimate(side_a, _side_of(tuple(lb)), center)


def _ratio_estimate(a: _Side, b: _Side, center: float) -> Estimate:
    """_estimate((a, b), center, shift=False), inline for two sides: the same operations in the
    same order (sum() over floats adds them to 0 one by one; _welch_df's terms likewise)."""
    n = min(a.n, b.n)
    if n < 2:
        return Estimate(math.exp(center), None, None, n, False, (a, b), False)
    total = 0 + a.var + b.var
    parts: float = 0
    if a.df > 0:
        parts = parts + a.var**2 / a.df
    if b.df > 0:
        parts = parts + b.var**2 / b.df
    df = float(min(a.df, b.df)) if total == 0 or parts == 0 else total**2 / parts
    half = t_quantile(max(1.0, df)) * math.sqrt(total)
    low, high = math.exp(center - half), math.exp(center + half)
    return Estimate(math.exp(center), low, high, n, False, (a, b), False)


def shift_by_pass(
    a: Sequence[float],
    b: Sequence[float],
    scale: float,
    a_passes: Sequence[Pass] = (),
    b_passes: Sequence[Pass] = (),
) -> Estimate:
    """B − A over `scale`, paired by pass where the runs allow it, else independent."""
    pairs = pairs_by_pass(a, b, a_passes, b_passes, positive=False)
    if pairs is None or not scale > 0:
        return independent_shift(a, b, scale)
    return paired_shift([(y - x) / scale for x, y in pairs])


def pairs_by_pass(
    a: Sequence[float],
    b: Sequence[float],
    a_passes: Sequence[Pass],
    b_passes: Sequence[Pass],
    *,
    positive: bool = True,
) -> list[tuple[float, float]] | None:
    """(a run of A, the run of B of the same pass) for every pass that holds one run of each;
    None unless there are two pairs or more and every run of the side with fewer runs is in
    one (a pair per pass: a side with two runs in one pass, pooled points, is not paired).
    Runs of the other side without a partner are left out of the paired judgement."""
    if len(a_passes) != len(a) or len(b_passes) != len(b):
        return None
    return _shared_passes(
        _one_per_pass(a, a_passes, positive), _one_per_pass(b, b_passes, positive), len(a), len(b)
    )


def _shared_passes(
    a_by: dict[str, float] | None, b_by: dict[str, float] | None, a_runs: int, b_runs: int
) -> list[tuple[float, float]] | None:
    """pairs_by_pass from each side's run per pass (_one_per_pass) and its count of runs."""
    if a_by is None or b_by is None:
        return None
    shared = [k for k in a_by if k in b_by]
    if len(shared) < 2 or len(shared) < min(a_runs, b_runs):
        return None
    return [(a_by[k], b_by[k]) for k in shared]


def _one_per_pass(values: Sequence[float], passes: Sequence[Pass], positive: bool) -> dict[str, float] | None:
    """Pass -> its run; None where a run has no pass, no figure, or shares its pass."""
    out: dict[str, float] = {}
    for value, label in zip(values, passes, strict=True):
        usable = _positive(value) if positive else value == value
        if label is None or label in out or not usable:
            return None
        out[label] = value
    return out


def paired_shift(differences: Sequence[float]) -> Estimate:
    """The typical value of per-repeat differences (already on their scale: a share of a step)."""
    clean = [d for d in differences if d == d]
    if not clean:
        raise ValueError("no difference to judge")
    return _estimate((_side(clean),), _hodges_lehmann(clean), shift=True, paired=True)


def independent_ratio(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """B over A from independent runs (Yuen's trimmed t on the logs; Welch's t under 5 runs)."""
    la = [math.log(x) for x in a if _positive(x)]
    lb = [math.log(y) for y in b if _positive(y)]
    if not la or not lb:
        raise ValueError("independent_ratio needs at least one positive value on each side")
    return _estimate((_side(la), _side(lb)), _hodges_lehmann(lb, la), shift=False)


def independent_shift(a: Sequence[float], b: Sequence[float], scale: float) -> Estimate:
    """B − A over `scale` (a step time) from independent runs: for figures that may be zero."""
    if not scale > 0:
        raise ValueError(f"the scale of a shift must be positive (got {scale})")
    xa = [x / scale for x in a if x == x]
    xb = [y / scale for y in b if y == y]
    if not xa or not xb:
        raise ValueError("independent_shift needs at least one value on each side")
    return _estimate((_side(xa), _side(xb)), _hodges_lehmann(xb, xa), shift=True)


def location(values: Sequence[float]) -> Estimate:
    """A point's own figure from its runs: the trimmed mean (log scale) and its 95 % interval.
    `relative_half_width` of it is the table's ci95."""
    logs = [math.log(v) for v in values if _positive(v)]
    if not logs:
        raise ValueError("location needs at least one positive value")
    return _estimate((_side(logs),), _hodges_lehmann(logs), shift=False)


def relative_half_width(values: Sequence[float]) -> float | None:
    """Half the width of a point's 95 % interval, relative to its estimate (the table's
    ci95: ±12 % reads "the point's throughput is known to about ±12 %"): sinh of the
    half-width on the log scale. None under 2 runs."""
    clean = [v for v in values if _positive(v)]
    if len(clean) < 2:
        return None
    # location(clean)'s interval is center ± t·se on the log scale, so its half-width on that
    # scale is t·se whatever the center: the Hodges-Lehmann center (every pair's mean) and the
    # Estimate are not made (a report computes this once per point: 100,000 in issue #36's).
    side = _side([math.log(v) for v in clean])
    return math.sinh(t_quantile(max(1.0, _welch_df((side,)))) * math.sqrt(side.var))


def relative_half_widths(runs: Iterable[Sequence[float]]) -> list[float | None]:
    """relative_half_width of each point's runs, the same floats, in one loop: a report asks it
    of every point (100,000 in issue #36's), and the calls were most of its cost."""
    log, sinh, sqrt = math.log, math.sinh, math.sqrt
    out: list[float | None] = []
    for values in runs:
        clean = [v for v in values if v == v and v > 0]  # _positive
        if len(clean) < 2:
            out.append(None)
            continue
        side = _side_of(tuple([log(v) for v in clean]))
        # _welch_df of one side is float(its df).
        out.append(sinh(t_quantile(max(1.0, float(side.df))) * sqrt(side.var)))
    return out


def outliers(values: Sequence[float], margin: float = MARGIN) -> list[int]:
    """Indexes of the runs that stand out (the module's rule); none under 3 runs."""
    logs = [math.log(v) if _positive(v) else math.nan for v in values]
    clean = [v for v in logs if v == v]
    if len(clean) < 3:
        return []
    center = statistics.median(clean)
    mad = statistics.median(abs(v - center) for v in clean)
    floor = math.log1p(margin / 2)
    out = []
    for i, v in enumerate(logs):
        distance = abs(v - center)
        if v == v and distance >= floor and (mad == 0 or 0.6745 * distance / mad > OUTLIER_Z):
            out.append(i)
    return out


def _positive(x: float) -> bool:
    return x == x and x > 0
