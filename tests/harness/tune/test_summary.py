"""harness/tune/summary.py: the pricing of the grid's unmeasured runs."""

from __future__ import annotations

import pytest

from harness.tune.summary import overhead_s, window_s


def test_a_runs_overhead_leaves_out_the_capacity_phase_of_the_profile() -> None:
    """50 steps at 20 steps/s: 2.5 s of stepping. A plain run of 3.5 s: 1 s of overhead. A
    profile run that then timed the loader (40 batches at 20/s: 2 s, held to the window's
    2.5 s) in 6 s: the same 1 s. Plain runs are preferred where there are any."""
    import pandas as pd

    def row(seconds: float, capacity: float) -> dict[str, object]:
        return {
            "started_at": "2026-11-23T10:00:00",
            "finished_at": f"2026-11-23T10:00:{seconds:04.1f}",
            "warmup_steps": 10,
            "steps": 40,
            "steps_per_s": 20.0,
            "loader_capacity": capacity,
        }

    nan = float("nan")
    assert overhead_s(pd.DataFrame([row(3.5, nan)])) == pytest.approx(1.0)
    assert overhead_s(pd.DataFrame([row(6.0, 20.0)])) == pytest.approx(1.0)
    assert overhead_s(pd.DataFrame([row(3.5, nan), row(9.0, 20.0)])) == pytest.approx(1.0)
    assert overhead_s(pd.DataFrame([row(2.0, nan)])) == 0.0  # never below nothing


def test_a_window_is_priced_in_steps_or_in_the_seconds_it_lasts() -> None:
    """The grid's unmeasured runs are priced by what their window lasts: 40 steps at 20
    steps/s are 2 s; with measure.seconds: 5, at least 5 s; an auto window (40 steps at
    least, 1 to 10 s) as long as the confirmations' windows lasted (3 s), within its least
    and most, and never under its least steps (at 2 steps/s, 20 s)."""
    from harness_schema.settings import Measure

    assert window_s(Measure(steps=40), 20.0) == pytest.approx(2.0)
    assert window_s(Measure(steps=40, seconds=5.0), 20.0) == pytest.approx(5.0)
    auto = Measure(steps=40, seconds=1.0, max_seconds=10.0)
    assert window_s(auto, 20.0, lasted=3.0) == pytest.approx(3.0)
    assert window_s(auto, 20.0, lasted=None) == pytest.approx(2.0)  # its 40 steps: none measured
    assert window_s(auto, 100.0, lasted=None) == pytest.approx(1.0)  # its least seconds
    assert window_s(auto, 100.0, lasted=60.0) == pytest.approx(10.0)  # its most
    assert window_s(auto, 2.0, lasted=3.0) == pytest.approx(20.0)
