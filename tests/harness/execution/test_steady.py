"""The loader's delivery read off the per-step waits: periodic bursts told from a loader that
keeps up, a smooth one and an erratic one; whole periods; the too-short line."""

from __future__ import annotations

import pytest

from harness.execution import steady

STEP = 0.005


def _waits(pattern: list[float], periods: int) -> tuple[list[float], list[float]]:
    """next() times (seconds) repeating `pattern`, and the steps' totals (the wait + STEP)."""
    waits = pattern * periods
    return waits, [w + STEP for w in waits]


def test_bursts_of_four_are_a_period_of_four_steps() -> None:
    # Four workers in step: a 60 ms wait, then three batches already there (IPC: ~0.3 ms).
    assert steady.delivery(*_waits([0.060, 0.0003, 0.0002, 0.0003], 4), 8) == steady.Delivery("periodic", 4)


def test_a_burst_arriving_in_two_parts_is_one_period_not_two() -> None:
    # Seen on a busy 2-core machine: 8 workers, the burst's second half 18 ms after its first.
    # The shorter wait halfway recurs too, but a period of 4 would pair a 45 ms wait with it.
    pattern = [0.045, 0.0, 0.0, 0.018, 0.0, 0.0, 0.001, 0.0]
    assert steady.delivery(*_waits(pattern, 4), 16) == steady.Delivery("periodic", 8)


def test_a_hiccup_does_not_hide_the_period() -> None:
    waits, totals = _waits([0.060, 0.0003, 0.0002, 0.0003], 6)
    waits[5] = 0.020  # one batch late, in the second period: the latest three are clean
    assert steady.delivery(waits, totals, 8) == steady.Delivery("periodic", 4)
    waits[21] = 0.020  # ... and in the last one: the three before it are
    assert steady.delivery(waits, totals, 8) == steady.Delivery("periodic", 4)


@pytest.mark.parametrize(
    ("waits", "kind"),
    [
        ([0.0003] * 24, "keeps up"),  # no step waits: nothing to align
        ([0.015, 0.016, 0.015, 0.014] * 6, "smooth"),  # every step waits alike: one-step periods
        (
            [0.06, 0, 0, 0.05, 0, 0, 0, 0, 0, 0.07, 0, 0.03, 0, 0, 0, 0, 0.08, 0, 0, 0, 0, 0.05, 0, 0],
            "irregular",
        ),
        ([0.06, 0, 0, 0, 0, 0, 0, 0, 0.06, 0, 0], "unsettled"),  # one gap: could be a coincidence
    ],
)
def test_what_is_not_periodic_is_named(waits: list[float], kind: str) -> None:
    found = steady.delivery(waits, [w + STEP for w in waits], 8)
    assert found.kind == kind and found.period == 1
    assert found.settled is (kind != "unsettled")


def test_a_period_longer_than_the_stock_is_not_a_burst_of_the_workers() -> None:
    assert steady.delivery(*_waits([0.06] + [0.0] * 7, 4), 4).kind != "periodic"


def test_a_window_is_rounded_up_to_whole_periods() -> None:
    assert [steady.whole_periods(n, 4) for n in (1, 4, 10, 12)] == [4, 4, 12, 12]
    assert steady.whole_periods(10, 1) == 10  # no period: the spec's steps


def test_a_window_under_three_periods_is_said_to_be_too_short_with_the_setting_to_change() -> None:
    assert steady.too_short(8, 4, 3) == (
        "the window of 8 steps covers 2 period(s) of the loader's delivery (bursts of 4 batches, a wait "
        "every 4 steps): too short to read its steady rate; set measure.steps: 12 or more, or measure.seconds"
    )
    assert steady.too_short(12, 4, 3) is None
    assert steady.too_short(5, None, 3) is None


def test_an_auto_windows_blocks_are_whole_periods_of_at_least_a_tenth_of_a_second() -> None:
    assert steady.block_steps(4, 0.002) == 52  # 50 steps of 2 ms, rounded up to periods of 4
    assert steady.block_steps(3) == 9 and steady.block_steps(1, 0.5) == 8
    assert steady.auto_least(1) == 40


def test_the_rate_s_standard_error_is_taken_over_blocks_of_a_tenth_of_a_second() -> None:
    assert steady.block_rse([0.1] * 4) is None  # too few blocks to tell
    assert steady.block_rse([0.1] * 5) == 0.0
    # Blocks foretold at 0.1 s that last 0.01 s: merged ten by ten, a hiccup of one weighs a tenth.
    merged = steady.block_rse([0.01] * 49 + [0.02])
    assert merged == pytest.approx(0.0196, rel=0.01)  # batches of 0.1, 0.1, 0.1, 0.1, 0.11 s


def test_past_thirty_blocks_neighbours_are_merged_into_thirty_batches() -> None:
    # Blocks that alternate slow and fast (a pattern longer than a block): taken one by one they
    # scatter by a third; merged pairwise (60 blocks into 30 batches) they last alike.
    assert steady.block_rse([0.1, 0.2] * 30) == 0.0
    assert steady.block_rse([0.1, 0.2] * 14) == pytest.approx(0.0642, rel=0.01)  # 28: one by one
