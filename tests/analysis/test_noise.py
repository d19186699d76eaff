from __future__ import annotations

import math
import random
import statistics

import pytest

from analysis import noise


def test_paired_ratio_sees_a_steady_change_through_a_drifting_machine() -> None:
    # The machine slows by 30 % over the repeats; B is 20 % faster than A in every repeat.
    a = [10.0, 12.0, 13.0]
    b = [12.0, 14.4, 15.6]
    r = noise.paired_ratio(a, b)
    assert r.estimate == pytest.approx(1.2)
    assert r.judge() == noise.HIGHER and r.called()
    # The same figures taken as independent runs: the drift hides the change.
    assert noise.independent_ratio(a, b).judge() == noise.UNDECIDED


def test_one_run_is_untested_and_never_called() -> None:
    r = noise.paired_ratio([10.0], [20.0])
    assert r.estimate == pytest.approx(2.0)
    assert r.judge() == noise.NOT_TESTED and not r.called() and not r.tied()
    assert r.interval_text() == "untested: 1 run" and r.runs_needed() is None


def test_under_five_runs_the_interval_is_welchs_half_width_around_hodges_lehmann() -> None:
    """Nothing to trim: the half-width is Welch's, computed here from its textbook formula,
    around the median of the nine differences of the logs (Hodges-Lehmann)."""
    a, b = [100.0, 104.0, 97.0], [110.0, 108.0, 115.0]
    la, lb = [math.log(x) for x in a], [math.log(y) for y in b]
    va, vb = statistics.variance(la) / 3, statistics.variance(lb) / 3
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    half = noise.t_quantile(df) * math.sqrt(va + vb)
    center = statistics.median(y - x for x in la for y in lb)
    assert center == pytest.approx(math.log(115 / 104))  # the middle of the nine ratios
    r = noise.independent_ratio(a, b)
    assert (r.low, r.estimate, r.high) == pytest.approx(
        (math.exp(center - half), math.exp(center), math.exp(center + half))
    )


def test_one_slow_run_of_three_moves_the_estimate_less_than_the_mean() -> None:
    """Issue 19's best point: runs 222.6, 222.7 and 204.5, against 191, 190 and 192."""
    r = noise.independent_ratio([222.6, 222.7, 204.5], [191.0, 190.0, 192.0])
    assert f"{r.change:+.1%}" == "-13.8%"  # 192 / 222.7: the runs that agree
    means = statistics.geometric_mean([191.0, 190.0, 192.0]) / statistics.geometric_mean(
        [222.6, 222.7, 204.5]
    )
    assert f"{means - 1:+.1%}" == "-11.7%"  # what Welch's t centres on


def test_from_five_runs_one_stall_neither_moves_the_estimate_nor_widens_the_interval_much() -> None:
    """Yuen's 20 % trimming: the lowest and highest run of five are set aside for the mean and
    winsorized for the spread. A 40 % stall in one run of B leaves B tied with A, where
    Welch's t (the stall in the mean and the variance) leaves it undecided."""
    a = [100.0, 101.0, 99.0, 100.5, 99.5]
    b = [100.2, 100.8, 99.4, 60.0, 99.8]
    r = noise.independent_ratio(a, b)
    assert r.judge() == noise.WITHIN and r.estimate == pytest.approx(1.0, abs=0.01)
    la, lb = [math.log(x) for x in a], [math.log(y) for y in b]
    se = math.sqrt(statistics.variance(la) / 5 + statistics.variance(lb) / 5)
    assert se * noise.t_quantile(4) > noise.MARGIN  # Welch's half-width alone exceeds the margin


def test_three_ways_against_the_margin() -> None:
    same = noise.independent_ratio([100, 101, 99], [100.5, 99.5, 100.2])
    slower = noise.independent_ratio([100, 101, 99], [80, 81, 79])
    faster = noise.independent_ratio([100, 101, 99], [120, 121, 119])
    wide = noise.independent_ratio([100, 130, 80], [100, 101, 99])
    assert [same.judge(), slower.judge(), faster.judge(), wide.judge()] == [
        noise.WITHIN,
        noise.LOWER,
        noise.HIGHER,
        noise.UNDECIDED,
    ]
    # A change beyond the noise but inside the margin is a tie, not a call.
    small = noise.paired_ratio([10.0, 10.0, 10.0, 10.0], [10.2, 10.21, 10.19, 10.2])
    assert small.low is not None and small.low > 1 and small.tied() and not small.called()


def test_runs_needed_follow_the_precision_formula() -> None:
    """Issue 19's best point (222.6, 222.7, 204.5) against a configuration 14 % below it: the
    runs per side n' with (t(df') + z0.8) * SE * sqrt(3/n') within the distance from the
    estimate (192 / 222.7, Hodges-Lehmann) to -5 %, where SE is today's standard error and df'
    Yuen's at n'."""
    best, other = [222.6, 222.7, 204.5], [191.0, 190.0, 192.0]
    r = noise.independent_ratio(best, other)
    assert r.judge() == noise.UNDECIDED
    lb, lo = [math.log(x) for x in best], [math.log(y) for y in other]
    se = math.sqrt(statistics.variance(lb) / 3 + statistics.variance(lo) / 3)
    distance = abs(math.log(192 / 222.7) - math.log(0.95))
    # n' = 6: 20 % trimming sets 1 run a side apart, 3 df a side; the best's spread dominates.
    assert (noise.t_quantile(3) + noise.POWER_Z) * se * math.sqrt(3 / 6) <= distance
    assert (noise.t_quantile(2) + noise.POWER_Z) * se * math.sqrt(3 / 5) > distance
    assert r.runs_needed() == 6
    # Decided already: its own count; on the margin's edge: None.
    assert noise.independent_ratio([100, 101, 99], [80, 81, 79]).runs_needed() == 3
    assert noise.independent_ratio([100, 101, 99], [95.0, 96.0, 94.0]).runs_needed() is None


def test_runs_needed_starts_its_search_where_nothing_below_can_pass() -> None:
    """runs_needed skips the counts that t's floor (1.96) rules out (issue #36: 20,000
    undecided points a report): the count is the one a search from n + 1 finds, for one
    side or two, trimmed or not, and None past MAX_RUNS."""
    import random

    def counted_from_n(r: noise.Estimate) -> int | None:
        center, se = r._center_se()
        edges = (math.log1p(-noise.MARGIN), math.log1p(noise.MARGIN))
        distance = min(abs(center - e) for e in edges)
        n = min(side.n for side in r.sides)
        for runs in range(n + 1, noise.MAX_RUNS + 1):
            projected = [noise._project(side, runs) for side in r.sides]
            df = noise._welch_df(projected)
            if (noise.t_quantile(max(1.0, df)) + noise.POWER_Z) * se * math.sqrt(n / runs) <= distance:
                return runs
        return None

    pick = random.Random(19)
    found = set()
    for _ in range(400):
        a = [pick.lognormvariate(5, 0.05) for _ in range(pick.randint(2, 7))]
        b = [pick.lognormvariate(5, 0.05) * pick.uniform(0.85, 1.1) for _ in range(pick.randint(2, 7))]
        r = noise.independent_ratio(a, b) if pick.random() < 0.7 else noise.paired_ratio(a[:2] * 2, b[:2] * 2)
        if r.judge() != noise.UNDECIDED:
            continue
        expected = counted_from_n(r)
        assert r.runs_needed() == expected
        found.add(expected is None)
    assert found == {True, False}  # both kinds were met


def test_a_shift_is_judged_on_its_own_scale() -> None:
    """Waits for data (which may be zero) as a share of a 100 ms step."""
    longer = noise.independent_shift([0.001, 0.002, 0.0015], [0.021, 0.022, 0.020], scale=0.1)
    assert longer.estimate == pytest.approx(0.195) and longer.judge() == noise.HIGHER
    assert longer.interval_text().startswith("95% CI +1")
    same = noise.independent_shift([0.0, 0.002, 0.001], [0.003, 0.002, 0.004], scale=0.1)
    assert same.judge() == noise.WITHIN
    with pytest.raises(ValueError, match="the scale of a shift must be positive"):
        noise.independent_shift([0.1], [0.2], scale=0.0)


def test_the_tables_half_width_is_the_points_own_interval() -> None:
    runs = [222.6, 222.7, 204.5]
    own = noise.location(runs)
    assert own.low is not None and own.high is not None
    assert noise.relative_half_width(runs) == pytest.approx((own.high - own.low) / 2 / own.estimate)
    assert noise.relative_half_width([10.0]) is None


def test_the_tables_half_width_is_the_intervals_whatever_the_runs() -> None:
    """relative_half_width skips location()'s center (issue #36): it must stay the half-width
    of location()'s interval for any count of runs, trimmed (5 or more) or not, bad runs too."""
    import math
    import random

    pick = random.Random(36)
    for _ in range(300):
        runs = [pick.lognormvariate(5, pick.choice((0.01, 0.1, 0.5))) for _ in range(pick.randint(2, 12))]
        runs += [0.0] * pick.randint(0, 1)  # a run that measured nothing is left out of both
        own = noise.location(runs)
        assert own.low is not None and own.high is not None
        expected = math.sinh(math.log(own.high / own.low) / 2)
        assert noise.relative_half_width(runs) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_a_run_that_stands_out_is_flagged_and_a_spread_is_not() -> None:
    assert noise.outliers([222.6, 222.7, 204.5]) == [2]  # 8 % off, the others agree
    assert noise.outliers([80.0, 26.7, 66.7]) == []  # a spread: no run stands out from the others
    assert noise.outliers([100.0, 100.0, 101.0]) == []  # 1 %: under half the margin
    assert noise.outliers([100.0, 120.0]) == []  # two runs: no telling which


def test_t_quantile_of_small_samples() -> None:
    assert noise.t_quantile(2) == pytest.approx(4.303)
    assert noise.t_quantile(100) == pytest.approx(1.96)
    with pytest.raises(ValueError, match="degrees of freedom must be >= 1"):
        noise.t_quantile(0)


DRIFTING_A = [10.0, 12.0, 13.0, 11.0]
DRIFTING_B = [12.0, 14.4, 15.6, 13.2]  # 20 % above A in each pass; the passes drift by 30 %


def test_two_points_runs_are_paired_by_the_pass_they_shared_in_whatever_order() -> None:
    """Runs listed in another order on each side are paired by their pass, not by position."""
    passes = ["s#0", "s#1", "s#2", "s#3"]
    r = noise.ratio_by_pass(DRIFTING_A, DRIFTING_B[::-1], passes, passes[::-1])
    assert r.paired and r.estimate == pytest.approx(1.2) and r.judge() == noise.HIGHER
    assert not noise.independent_ratio(DRIFTING_A, DRIFTING_B).called()


@pytest.mark.parametrize(
    ("a_passes", "b_passes", "why"),
    [
        ((None, None, None, None), (None, None, None, None), "no pass: repeats run back to back"),
        (("s#0", "s#1", "s#2", "s#3"), ("t#0", "t#1", "t#2", "t#3"), "two sweeps' passes"),
        (("s#0", "s#0", "s#2", "s#3"), ("s#0", "s#1", "s#2", "s#3"), "two runs of A in one pass (pooled)"),
        (("s#0", "s#1", "s#2", "s#3"), ("s#0", "s#1", "s#7", "s#8"), "two of B's runs without a partner"),
    ],
)
def test_runs_not_all_measured_side_by_side_are_compared_as_independent(
    a_passes: tuple[str | None, ...], b_passes: tuple[str | None, ...], why: str
) -> None:
    r = noise.ratio_by_pass(DRIFTING_A, DRIFTING_B, a_passes, b_passes)
    assert not r.paired, why
    assert r == noise.independent_ratio(DRIFTING_A, DRIFTING_B)


def test_a_side_with_more_runs_is_paired_on_the_passes_of_the_other() -> None:
    """B was measured in 3 of A's 4 passes (A had an extra repeat): the 3 pairs decide."""
    r = noise.ratio_by_pass(DRIFTING_A, DRIFTING_B[:3], ["s#0", "s#1", "s#2", "s#3"], ["s#0", "s#1", "s#2"])
    assert r.paired and r.n == 3 and r.estimate == pytest.approx(1.2)


def test_a_wait_is_paired_by_pass_as_a_share_of_the_step() -> None:
    waits_a, waits_b = [0.010, 0.030, 0.020], [0.015, 0.035, 0.025]  # B waits 5 ms more each pass
    passes = ["s#0", "s#1", "s#2"]
    r = noise.shift_by_pass(waits_a, waits_b, 0.1, passes, passes)
    assert r.paired and r.estimate == pytest.approx(0.05)
    assert noise.independent_shift(waits_a, waits_b, 0.1).judge() == noise.UNDECIDED


def test_the_variance_is_statistics_variance_to_the_last_bit() -> None:
    """noise.variance (integers) against statistics.variance (Fractions) on awkward floats."""
    rng = random.Random(0)
    for _ in range(2000):
        n = rng.choice([2, 3, 4, 5, 10])
        scale = rng.choice([1e-9, 1.0, 5.7, 1e6])
        values = [rng.gauss(rng.choice([0.0, 5.7]), rng.choice([1e-6, 0.01, 1.0])) * scale for _ in range(n)]
        assert noise.variance(values) == statistics.variance(values)
    assert noise.variance([1.0, 1.0]) == 0.0 and noise.variance([2, 4]) == statistics.variance([2, 4])


def test_the_variance_of_two_is_statistics_variance_to_the_last_bit() -> None:
    """The shortcut for two runs (an exact difference, squared and halved) against Fractions,
    on the logs of runs, on differences that are not exact, and on the extremes."""
    rng = random.Random(1)
    for _ in range(5000):
        center = rng.choice([math.log(rng.uniform(1, 5000)), 1e-300, 1e300, 0.0, 3.0])
        a = center + rng.gauss(0, rng.choice([1e-9, 0.01, 1.0, 100.0]))
        b = rng.choice([center, -center, a, a * (1 + 2**-52)]) + rng.gauss(0, 0.01)
        _assert_same_variance(a, b)
    for a, b in [(5e-324, 0.0), (1e308, -1e308), (1.5e-154, 0.0), (0.1, 0.3), (-0.0, 0.0), (1e16, 1.0)]:
        _assert_same_variance(a, b)


def _assert_same_variance(a: float, b: float) -> None:
    try:
        expected = statistics.variance([a, b])
    except OverflowError:  # beyond a float: both say so
        with pytest.raises(OverflowError):
            noise.variance([a, b])
        return
    assert noise.variance([a, b]) == expected, (a, b)


def test_ratios_against_one_side_are_ratio_by_pass_to_the_bit() -> None:
    """ratios_by_pass (the best's runs prepared once, as the recommendation judges a group)
    gives ratio_by_pass's Estimates, equal field by field: paired, independent, one run,
    a side with passes of its own, and the error of a side with no positive run."""
    rng = random.Random(2)
    kinds = set()
    passes = [None, "s#0", "s#1", "s#2", "s#3"]
    for _ in range(300):
        n = rng.choice([1, 2, 3, 5])
        a = [rng.uniform(90, 110) for _ in range(n)]
        a_passes = rng.choice([(), tuple(passes[1 : n + 1]), (None,) * n])
        others = []
        for _ in range(20):
            m = rng.choice([1, 2, 3, 4, 6])
            b = [rng.uniform(80, 120) * rng.choice([1, 1, 0.5]) for _ in range(m)]
            b_passes = rng.choice([(), tuple(rng.sample(passes[1:], min(m, 4)))[:m], (None,) * m])
            others.append((tuple(b), b_passes))
        got = list(noise.ratios_by_pass(a, a_passes, others))
        assert got == [noise.ratio_by_pass(a, b, a_passes, bp) for b, bp in others]
        kinds |= {(r.paired, r.tested) for r in got}
    assert kinds == {(True, True), (False, True), (False, False)}
    with pytest.raises(ValueError, match="at least one positive value on each side"):
        list(noise.ratios_by_pass([1.0, 2.0], (), [((0.0, -1.0), ())]))


def test_the_half_widths_of_many_points_are_each_points_to_the_bit() -> None:
    """relative_half_widths (a report's ci95 column in one loop) against relative_half_width,
    with runs of none, one, a zero, a NaN, two and more."""
    rng = random.Random(3)
    runs = [[rng.uniform(50, 150) for _ in range(rng.choice([0, 1, 2, 2, 3, 5, 8]))] for _ in range(500)]
    runs += [[0.0, 100.0], [float("nan"), 100.0, 101.0], [100.0, 100.0]]
    assert noise.relative_half_widths(runs) == [noise.relative_half_width(r) for r in runs]
