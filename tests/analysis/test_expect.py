from __future__ import annotations

from pathlib import Path

import pytest

from analysis.expect import check_expectations, failed, read_expectations, render_expectations
from analysis.load import load_results
from analysis.render.report import build_report
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point
from harness.storage.sweep import create_sweep
from tests.analysis.conftest import UNSAMPLED, synthetic_row, write_rows
from tests.conftest import TINY_WORKLOAD

EXPECT = """\
rungs: [device_batch, full]
measure: {warmup_steps: 1, steps: 3, repeats: 2}
loader: {num_workers: [0, 1]}
expect:
  - {min_samples_per_s: 0.001}
  - {max_loading_time: 0.000000001, num_workers: 0}
  - {min_of_bound: 0.000001}
  - {min_gpu_util: 90}
  - {min_samples_per_s: 1, point: not-a-point}
"""


@pytest.fixture(scope="module")
def gated_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep of two points, the ladder's bound and full, two repeats, five expectations."""
    workload = TINY_WORKLOAD.replace("measure: {warmup_steps: 1, steps: 3, repeats: 1}\n", "")
    spec = parse_spec("name: gated\n" + workload + EXPECT + UNSAMPLED)
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path_factory.mktemp("results"))
    for point in plan.points:
        run_point(point, sweep, env=DistEnv(hostname="node-a"))
    return sweep


@pytest.mark.serial
def test_each_expectation_says_its_figure_bound_and_verdict(gated_sweep: Path) -> None:
    outcomes = check_expectations(load_results([gated_sweep]).rows, [gated_sweep])
    lines = render_expectations(outcomes).splitlines()
    assert len(lines) == 6
    assert lines[0].startswith("pass  min_samples_per_s >= 0.001: ")
    assert "samples/s (worst of 2 point(s): point " in lines[0] and "median over 2 runs" in lines[0]
    assert lines[1].startswith("FAIL  max_loading_time <= 1e-09 (num_workers=0): ")
    assert "s per step waiting for data (of 1 point(s)" in lines[1]
    assert lines[2].startswith("pass  min_of_bound >= 1e-06: ")
    # Not sampled: no GPU utilisation to judge, and a gate that cannot see fails.
    assert lines[3] == "FAIL  min_gpu_util >= 90: no data (no point matched, or the figure was not measured)"
    assert lines[4].startswith("FAIL  min_samples_per_s >= 1 (point=not-a-point): no data")
    assert lines[5] == "3 of 5 expectation(s) failed (exit status 3)"
    assert failed(outcomes) == 3


@pytest.mark.serial
def test_the_worst_point_decides_and_is_named(gated_sweep: Path) -> None:
    rows = load_results([gated_sweep]).rows
    (outcome, *_) = check_expectations(rows, [gated_sweep])
    full = rows[(rows["rung"] == "full") & (rows["status"] == "ok")]
    slowest_median = min(
        (r["samples"] / r["training_time"]).median() for _, r in full.groupby("point_id", sort=False)
    )
    assert outcome.figure == pytest.approx(slowest_median)
    assert outcome.points == 2 and outcome.runs == 2


@pytest.mark.serial
def test_the_report_prints_the_block_and_counts_the_failures(gated_sweep: Path) -> None:
    report = build_report([gated_sweep])
    assert "expectations (each sweep's expect:)\npass  min_samples_per_s >= 0.001:" in report.text
    assert report.expectations_failed == 3
    markdown = build_report([gated_sweep], "markdown").text
    assert "- FAIL  min_gpu_util >= 90: no data" in markdown


def test_a_sweep_without_expectations_reports_as_before(real_sweep: Path) -> None:
    assert read_expectations(real_sweep) == ()
    assert check_expectations(load_results([real_sweep]).rows, [real_sweep]) == []
    report = build_report([real_sweep])
    assert "expectation" not in report.text
    assert report.expectations_failed == 0


def judged_sweep(tmp_path: Path, bound: float, rates: list[float]) -> str:
    """A sweep of one point with chosen samples/s per repeat, gated at `bound`: its line."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "spec.yaml").write_text(f"name: g\nexpect:\n  - {{min_samples_per_s: {bound}}}\n")
    write_rows(
        tmp_path, *(synthetic_row(repeat=r, samples=80, training_time=80 / v) for r, v in enumerate(rates))
    )
    (outcome,) = check_expectations(load_results([tmp_path]).rows, [tmp_path])
    return render_expectations([outcome]).splitlines()[0]


def test_a_figure_within_the_margin_of_its_bound_meets_it(tmp_path: Path) -> None:
    """The median 97 is under 100, but the runs put it within 5 % of it, interval and all: a
    tie with the bound, as everywhere in the harness."""
    assert judged_sweep(tmp_path, 100, [97.0, 97.5, 96.5]) == (
        "pass  min_samples_per_s >= 100: 97 samples/s (of 1 point(s): point p1 on n1, median over 3 runs; "
        "95% CI 95.77 .. 98.25, above 95: within the 5% margin of the bound)"
    )


def test_a_figure_wholly_below_the_margin_fails_and_one_across_it_is_undecided(tmp_path: Path) -> None:
    assert judged_sweep(tmp_path / "low", 100, [90.0, 90.5, 89.5]).startswith(
        "FAIL  min_samples_per_s >= 100: 90 samples/s (of 1 point(s): point p1 on n1, median over 3 runs; "
        "95% CI 88.77 .. 91.25)"
    )
    # A median above the bound does not pass when the runs reach well below it.
    line = judged_sweep(tmp_path / "wide", 100, [112.0, 95.0, 118.0])
    assert line == (
        "undecided  min_samples_per_s >= 100: 112 samples/s (of 1 point(s): point p1 on n1, median over "
        "3 runs; 95% CI 82.21 .. 144.2 across 95, the bound with the 5% margin: about 9 runs would decide)"
    )
    outcomes = check_expectations(load_results([tmp_path / "wide"]).rows, [tmp_path / "wide"])
    assert failed(outcomes) == 1  # a gate that cannot see does not pass
