"""The recommendation's `to decide:` line: the cheapest contender, the cost, the command."""

from __future__ import annotations

from pathlib import Path

from analysis.aggregate import summarize
from analysis.grid.recommend import recommend
from analysis.load import load_results
from tests.analysis.conftest import write_rows
from tests.analysis.grid.test_recommend import BEST_RUNS, CLOSE_RUNS, point

TIMED = {"started_at": "2026-01-01T10:00:00+00:00", "finished_at": "2026-01-01T10:00:05+00:00"}
"""Each run took 5 s, warmup and all."""


def to_decide_line(rec) -> str:  # type: ignore[no-untyped-def]
    (line,) = [line for line in rec.lines() if line.startswith("to decide")]
    return line


def test_an_open_candidate_is_named_with_the_repeats_the_seconds_and_the_command(tmp_path: Path) -> None:
    write_rows(tmp_path, *point(0, 6, BEST_RUNS, **TIMED), *point(1, 4, CLOSE_RUNS, **TIMED))
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert to_decide_line(rec) == (
        "to decide: the cheapest contender is p1 num_workers=4; about 35 more repeats of 2 points "
        f"(p1, p0), 6 min: harness resume {tmp_path} --more-repeats 35"
    )
    assert rec.to_decide is not None and rec.to_decide.point_ids == ("p1", "p0")


def test_without_the_runs_timings_the_line_leaves_the_seconds_out(tmp_path: Path) -> None:
    write_rows(tmp_path, *point(0, 6, [240.0, 236.0, 243.0]), *point(1, 4, [238.0, 222.0, 241.0]))
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    line = to_decide_line(rec)
    assert line.startswith("to decide: the cheapest contender is p1 num_workers=4; about ")
    assert f"more repeats of 2 points (p1, p0): harness resume {tmp_path} --more-repeats " in line


def test_a_decided_recommendation_has_no_line_to_decide(tmp_path: Path) -> None:
    write_rows(tmp_path, *point(0, 4, [240.0, 241.0, 239.5]), *point(1, 8, [241.0, 240.0, 241.5]))
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.to_decide is None
    assert not any(line.startswith("to decide") for line in rec.lines())


def test_a_dearer_challenger_alone_is_not_called_the_cheapest_contender(tmp_path: Path) -> None:
    """1 worker is the best; 2 workers, dearer, read 1.8 % below it but their interval reaches
    beyond +5 %: the answer stays 1 worker if they tie, so the line asks whether 2 workers beat
    the best, not which contender is cheapest (seen on the shipped stream's sweep)."""
    write_rows(
        tmp_path,
        *point(0, 1, [237.6, 240.1, 221.0, 239.5, 236.0], **TIMED),
        *point(1, 2, [233.8, 246.0, 229.0, 250.5, 231.0], **TIMED),
    )
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    line = to_decide_line(rec)
    assert line.startswith(
        "to decide: whether p1 num_workers=2 beats the best by more than the margin; about "
    )
    assert "cheapest contender" not in line
