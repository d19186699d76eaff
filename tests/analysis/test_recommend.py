from __future__ import annotations

from pathlib import Path

import pytest

from analysis.aggregate import summarize
from analysis.load import load_results
from analysis.recommend import recommend
from analysis.report import build_report
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


def test_with_one_run_per_point_the_cheapest_within_5_percent_stands_in_untested(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        *point(0, 0, [100.0]),
        *point(1, 2, [200.0], memory=1.5),
        *point(2, 4, [205.0], memory=2.0),
        *point(3, 8, [210.0], persistent=True, memory=3.0),
        *point(4, 2, [150.0], persistent=True),
    )
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.best.point_id == "p3" and rec.cheapest.point_id == "p1" and not rec.tested
    assert rec.baseline is not None and rec.baseline.point_id == "p0"
    assert rec.speedup(rec.best) == pytest.approx(2.1) and rec.speedup(rec.cheapest) == pytest.approx(2.0)
    lines = rec.lines()
    assert (
        lines[0]
        == "best: p3 num_workers=8 persistent_workers=True: 210.00 samples/s, 2.10× the baseline (untested: 1 run)"
    )
    assert lines[1] == (
        "cheapest within 5% of the best (untested: 1 run): p1 num_workers=2 persistent_workers=False: "
        "200.00 samples/s (-4.8%), 1.50 GB host memory, 2.00× the baseline (untested: 1 run)"
    )
    assert lines[2] == "baseline (point 0): p0 num_workers=0 persistent_workers=False: 100.00 samples/s"
    assert lines[3] == (
        "one run per point: nothing is tested, ties are within 5%; set measure.repeats to 3 or more to know"
    )


def test_with_repeats_the_cheapest_of_the_configurations_tied_with_the_best(tmp_path: Path) -> None:
    """p3 has the highest median; p1 and p2 are within the noise of it: tied, and p1 is the
    cheapest of them. p4, with 1 worker, is 4.8 % below with tight runs: called slower, so it
    is out, where the untested 5 % rule would have recommended it."""
    write_rows(
        tmp_path,
        *point(0, 0, [100.0, 101.0, 99.0]),
        *point(1, 2, [205.0, 209.0, 207.0], memory=1.5),
        *point(2, 4, [206.0, 210.0, 208.0], memory=2.0),
        *point(3, 8, [208.0, 212.0, 210.0], persistent=True, memory=3.0),
        *point(4, 1, [199.5, 200.0, 200.5]),
    )
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.best.point_id == "p3" and rec.cheapest.point_id == "p1"
    assert rec.tested and rec.tied == 3
    lines = rec.lines()
    assert lines[1].startswith(
        "cheapest tied with the best: p1 num_workers=2 persistent_workers=False: 207.00 samples/s (-1.4%, 95% CI "
    )
    assert ", n=3), 1.50 GB host memory, 2.07× the baseline (95% CI +" in lines[1]
    assert not any(line.startswith("one run per point") for line in lines)


def test_among_equal_workers_no_persistent_workers_then_least_memory(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        *point(0, 2, [100.0], persistent=True, memory=1.0),
        *point(1, 2, [99.0], memory=2.0),
        *point(2, 2, [98.0], memory=1.2),
    )
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.best.point_id == "p0" and rec.cheapest.point_id == "p2"


def test_a_gain_the_runs_do_not_call_is_not_a_measurable_change(tmp_path: Path) -> None:
    write_rows(tmp_path, *point(0, 0, [100.0, 120.0, 110.0]), *point(1, 2, [115.0, 116.0, 114.0]))
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.best.point_id == "p1"
    assert rec.against_baseline(rec.best).startswith("1.05× the baseline, not a measurable change (95% CI ")
    # tied with the best, and cheaper: the baseline itself is the recommendation
    assert rec.cheapest.point_id == "p0"


def test_a_gain_the_runs_call_is_given_with_its_interval(tmp_path: Path) -> None:
    write_rows(tmp_path, *point(0, 0, [100.0, 102.0, 101.0]), *point(1, 2, [150.0, 151.0, 149.0]))
    (rec,) = recommend(summarize(load_results([tmp_path]).rows))
    assert rec.against_baseline(rec.best) == "1.49× the baseline (95% CI +45.3% .. +51.8%, n=3)"
    assert rec.lines()[1] == "cheapest tied with the best: the best itself"


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
