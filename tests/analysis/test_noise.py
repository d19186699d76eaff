from __future__ import annotations

import pytest

from analysis import noise


def test_paired_ratio_sees_a_steady_change_through_a_drifting_machine() -> None:
    # The machine slows by 30 % over the repeats; B is 20 % faster than A in every repeat.
    a = [10.0, 12.0, 13.0]
    b = [12.0, 14.4, 15.6]
    r = noise.paired_ratio(a, b)
    assert r.estimate == pytest.approx(1.2)
    assert r.called()
    # The same figures taken as independent runs: the drift hides the change.
    assert not noise.independent_ratio(a, b).called()


def test_one_run_is_untested_and_never_called() -> None:
    r = noise.paired_ratio([10.0], [20.0])
    assert r.estimate == pytest.approx(2.0)
    assert not r.tested and not r.called() and not r.tied()
    assert r.interval_text() == "untested: 1 run"


def test_intervals_narrow_with_more_repeats() -> None:
    few = noise.independent_ratio([10, 11, 9], [10.5, 11.5, 9.5])
    many = noise.independent_ratio([10, 11, 9] * 4, [10.5, 11.5, 9.5] * 4)
    assert few.low is not None and many.low is not None and few.high is not None and many.high is not None
    assert many.high - many.low < (few.high - few.low) / 2


def test_a_change_under_the_practical_threshold_is_not_called() -> None:
    r = noise.paired_ratio([10.0, 10.0, 10.0, 10.0], [10.2, 10.21, 10.19, 10.2])
    assert r.low is not None and r.low > 1  # significant...
    assert not r.called() and r.tied()  # ...but 2 % is under PRACTICAL


def test_relative_spread_is_robust_to_one_outlier() -> None:
    assert noise.relative_spread([10, 10.1, 9.9, 10, 30]) == pytest.approx(0.01 * 1.4826, rel=0.01)
    assert noise.relative_spread([10]) is None


def test_t_quantile_of_small_samples() -> None:
    assert noise.t_quantile(2) == pytest.approx(4.303)
    assert noise.t_quantile(100) == pytest.approx(1.96)
    with pytest.raises(ValueError, match="degrees of freedom must be >= 1"):
        noise.t_quantile(0)
