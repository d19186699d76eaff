from __future__ import annotations

from pathlib import Path

import pytest

from analysis.load import load_results
from analysis.recommend import recommend
from analysis.report import build_report
from analysis.tables import summarize
from tests.analysis.conftest import synthetic_row, write_rows

SAMPLES = 80


def point(
    index: int, workers: int, rates: list[float], persistent: bool = False, memory: float = 1.0, **kw: object
):
    """Rows of one point with chosen samples/s per repeat (samples / training_time)."""
    return [
        synthetic_row(
            point_id=f"p{index}",
            point_index=index,
            num_workers=workers,
            persistent_workers=persistent,
            prefetch_factor=2 if workers else None,
            repeat=repeat,
            samples=SAMPLES,
            training_time=SAMPLES / rate,
            cpu_memory_gb=memory,
            **kw,
        )
        for repeat, rate in enumerate(rates)
    ]


def test_best_and_cheapest_within_5_percent_with_speedups_over_point_0(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        *point(0, 0, [100.0]),
        *point(1, 2, [200.0], memory=1.5),
        *point(2, 4, [205.0], memory=2.0),
        *point(3, 8, [210.0], persistent=True, memory=3.0),
        *point(4, 2, [150.0], persistent=True),
    )
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.best.point_id == "p3" and rec.cheapest.point_id == "p1"
    assert rec.baseline is not None and rec.baseline.point_id == "p0"
    assert rec.speedup(rec.best) == pytest.approx(2.1) and rec.speedup(rec.cheapest) == pytest.approx(2.0)
    lines = rec.lines()
    assert (
        lines[0]
        == "best: p3 num_workers=8 persistent_workers=True: 210.00 samples/s, 2.10× the baseline (untested: 1 run each)"
    )
    assert lines[1].startswith(
        "cheapest within 5% of the best: p1 num_workers=2 persistent_workers=False: 200.00 samples/s (-4.8%), 1.50 GB host memory, 2.00× the baseline"
    )
    assert lines[2] == "baseline (point 0): p0 num_workers=0 persistent_workers=False: 100.00 samples/s"
    assert (
        lines[3]
        == "one run per point: no spread to judge a difference against; set measure.repeats to 3 or more to know"
    )


def test_among_equal_workers_no_persistent_workers_then_least_memory(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        *point(0, 2, [100.0], persistent=True, memory=1.0),
        *point(1, 2, [99.0], memory=2.0),
        *point(2, 2, [98.0], memory=1.2),
    )
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.best.point_id == "p0" and rec.cheapest.point_id == "p2"


def test_a_gain_within_the_spread_over_repeats_is_not_called_a_win(tmp_path: Path) -> None:
    write_rows(tmp_path, *point(0, 0, [100.0, 120.0, 110.0]), *point(1, 2, [115.0, 116.0, 114.0]))
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.best.point_id == "p1"
    assert rec.against_baseline(rec.best) == (
        "1.05× the baseline, within the spread over repeats (±20.00 samples/s): not a measurable change"
    )


def test_a_gain_beyond_the_spread_is(tmp_path: Path) -> None:
    write_rows(tmp_path, *point(0, 0, [100.0, 102.0, 101.0]), *point(1, 2, [150.0, 151.0, 149.0]))
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert (
        rec.against_baseline(rec.best)
        == "1.49× the baseline, beyond the spread over repeats (±2.00 samples/s)"
    )


def test_one_recommendation_per_node_and_sweep_in_the_report(real_sweep: Path) -> None:
    text = build_report([real_sweep]).text
    for host in ("node-a", "node-b"):
        assert f"recommendation for {host} (grid/{real_sweep.name}):\n  best: " in text
    assert text.count("baseline (point 0): ") == 2


def test_point_0_measured_on_another_node_is_the_baseline_and_says_so(tmp_path: Path) -> None:
    write_rows(tmp_path, *point(0, 0, [100.0], hostname="n1"), *point(1, 2, [150.0], hostname="n2"))
    recs = {r.group: r for r in recommend(summarize(load_results([tmp_path]).rows))}
    assert recs["n2"].baseline_elsewhere and recs["n2"].speedup(recs["n2"].best) == pytest.approx(1.5)
    assert "baseline (point 0) (measured on another node or node type): p0" in "\n".join(recs["n2"].lines())
