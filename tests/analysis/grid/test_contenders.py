"""The contenders of the best: which points the default's follow-up measures again."""

from __future__ import annotations

from pathlib import Path

from analysis.aggregate import summarize
from analysis.grid.contenders import contenders
from analysis.grid.recommend import recommend
from analysis.load import load_results
from tests.analysis.conftest import write_rows
from tests.analysis.grid.test_recommend import BEST_RUNS, CLOSE_RUNS, point


def judged(tmp_path: Path, *rows: list) -> dict[str, int]:
    write_rows(tmp_path, *(r for point_rows in rows for r in point_rows))
    return contenders(summarize(load_results([tmp_path]).rows))


def test_after_one_run_a_point_within_four_times_the_margin_and_the_best_get_three_runs(
    tmp_path: Path,
) -> None:
    """Issue 39's grid after the default's first round: 4 and 8 workers read within 1 % of each
    other, 2 workers 27 % below: only 4 and 8 are measured again, to three runs each."""
    asked = judged(tmp_path, point(0, 2, [178.0]), point(1, 4, [241.0]), point(2, 8, [243.5]))
    assert asked == {"p1": 3, "p2": 3}


def test_a_run_19_percent_below_is_a_contender_and_one_21_percent_below_is_not(tmp_path: Path) -> None:
    asked = judged(tmp_path, point(0, 2, [158.0]), point(1, 4, [162.0]), point(2, 8, [200.0]))
    assert asked == {"p1": 3, "p2": 3}  # -19 %: a busy machine's run may read a tie that low
    assert "p0" not in asked


def test_a_close_cheaper_point_left_undecided_asks_for_the_runs_that_would_decide(tmp_path: Path) -> None:
    """Issue 30's pair: num_workers=4 1.6 % below the best, its interval past the margin: both
    are asked for the runs analysis.noise says would decide (41 in all, the best's side too)."""
    asked = judged(tmp_path, point(0, 6, BEST_RUNS), point(1, 4, CLOSE_RUNS))
    assert asked == {"p1": 41, "p0": 41}


def test_nothing_is_asked_once_a_cheaper_point_is_proven_tied_or_one_is_far_below(tmp_path: Path) -> None:
    tied = judged(tmp_path, point(0, 4, [240.0, 241.0, 239.5]), point(1, 8, [241.0, 240.0, 241.5]))
    assert tied == {}
    # 13.8 % below with an interval that reaches the margin: undecided, but no tie is in sight.
    far = judged(tmp_path / "far", point(0, 2, [191.0, 190.0, 192.0]), point(1, 4, [222.6, 222.7, 204.5]))
    assert far == {}


def test_a_dearer_point_undecided_against_a_cheaper_best_is_not_measured_again(tmp_path: Path) -> None:
    """4 workers are the best: whatever 8 turn out to be within the margin, 4 stays the answer,
    unless 8 may beat it by more than the margin (then it is a challenger, asked for)."""
    asked = judged(tmp_path, point(0, 4, [241.0, 243.0, 242.0]), point(1, 8, [240.0, 230.0, 236.0]))
    assert asked == {}


def test_a_point_far_below_whose_interval_reaches_past_the_best_is_measured_again(tmp_path: Path) -> None:
    """Runs of 2 workers scattered by a busy machine: 12 % below the best, but its interval
    reaches more than the margin above it. The recommendation calls the best provisional
    ("the best is undecided"): the follow-up measures what it turns on, so the sweep does
    not end on an answer it says is open."""
    rows = (point(0, 2, [211.0, 140.0, 262.0]), point(1, 4, [240.0, 241.0, 239.0]))
    write_rows(tmp_path / "rec", *(r for point_rows in rows for r in point_rows))
    (rec,) = recommend(summarize(load_results([tmp_path / "rec"]).rows))
    assert rec.provisional and rec.best.point_id == "p1"
    asked = judged(tmp_path, *rows)
    assert set(asked) == {"p0", "p1"} and asked["p0"] > 3


def test_a_cheaper_point_whose_one_run_was_not_clean_is_a_contender_whatever_its_gap(tmp_path: Path) -> None:
    """decide_truth beside a busy loop: one run of num_workers=4 read 24 % below 8 (its tie)
    while other processes held 99 % of the CPU, and the 20 % screen hid the answer. A run on a
    shared machine, or whose window was not steady, screens nothing out: every cheaper point is
    asked for three runs; on a quiet, steady run the screen holds (the test above)."""
    shared = {"foreign_cpu_share": 0.99}
    asked = judged(
        tmp_path,
        point(0, 2, [149.0], **shared),
        point(1, 4, [179.0], **shared),
        point(2, 8, [235.0], **shared),
    )
    assert asked == {"p0": 3, "p1": 3, "p2": 3}
    drifted = judged(
        tmp_path / "drift",
        point(0, 2, [149.0]),
        point(1, 4, [179.0], window_steady=False),
        point(2, 8, [235.0]),
    )
    assert drifted == {"p1": 3, "p2": 3}  # 2 workers' clean run, 37 % below, stays screened out


def test_a_cheaper_point_whose_one_run_caught_a_stall_is_a_contender(tmp_path: Path) -> None:
    """decide_truth's erratic grid on a quiet machine: a 300 ms stall landed in num_workers=4's
    one window (p99 wait 209 ms over a 0.3 ms median) and it read 31 % below 8. A heavy-tailed
    run is no run to screen on: 4 is measured again; 2 workers' clean run stays screened out."""
    tail = {"loading_time_p50": 0.0003, "loading_time_p99": 0.209, "step_time": 0.030, "steps": 20}
    calm = {"loading_time_p50": 0.0003, "loading_time_p99": 0.0006, "step_time": 0.030, "steps": 20}
    asked = judged(
        tmp_path, point(0, 2, [138.0], **calm), point(1, 4, [181.0], **tail), point(2, 8, [261.0], **calm)
    )
    assert asked == {"p1": 3, "p2": 3}
