"""The inline backend: points in this process, with a progress line per point."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from harness.backends import inline
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness_schema import rows as results
from tests.conftest import TINY_WORKLOAD


def test_each_point_says_how_many_are_done_and_the_time_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plan = expand(parse_spec("name: t\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1, 2]}\n"))
    with caplog.at_level(logging.INFO, logger=inline.__name__):
        outcomes = inline.run_inline(plan.points, tmp_path)
    assert [o.ok for o in outcomes] == [1, 1, 1]
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith(f"[1/3] point {plan.points[0].id} batch_size=8, num_workers=0")
    assert lines[0].endswith("(0/3 done)")  # no pace yet, no estimate
    assert re.search(r"^\[2/3\] point .* \(1/3 done, about \d+ s left\)$", lines[1])
    assert re.search(r"^\[3/3\] point .* \(2/3 done, about \d+ s left\)$", lines[2])
    for point in plan.points:
        assert len(results.read_rows(tmp_path / "points" / point.id / "rank0.csv")) == 1


def test_a_script_points_line_names_the_scripts_own_settings_without_guessing_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = Path(__file__).resolve().parents[2] / "fixtures" / "probe_script.py"
    spec = (
        f"name: s\nworkload: {{script: {script}}}\nmeasure: {{warmup_steps: 1, steps: 2, repeats: 1}}\n"
        "rungs: [host_batch]\nloader: {num_workers: 1}\n"
    )
    plan = expand(parse_spec(spec))
    with caplog.at_level(logging.INFO, logger=inline.__name__):
        inline.run_inline(plan.points, tmp_path)
    line = caplog.records[0].getMessage()
    # The spec names num_workers; the script's batch size and the rest are its own, which
    # the probe says (and the rows record) once the script runs: no "batch_size=None" here.
    assert line.startswith(
        f"[1/1] point {plan.points[0].id} num_workers=1, the script's own batch_size, "
        "persistent_workers, pin_memory, non_blocking, prefetch_factor, drop_last"
    )


def test_a_loader_factorys_point_gives_no_value_to_the_settings_its_loader_sets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # fixed_workers takes batch_size alone: its DataLoader sets num_workers and the rest, so
    # the line may not say the spec's values as if they ran (the rows leave them to the loader).
    spec = (
        "name: f\nworkload: {loader: tests.fixtures.loaders:fixed_workers, model: linear, batch_size: 4}\n"
        "measure: {warmup_steps: 1, steps: 2, repeats: 1}\nrungs: [host_batch]\n"
    )
    plan = expand(parse_spec(spec))
    with caplog.at_level(logging.INFO, logger=inline.__name__):
        inline.run_inline(plan.points, tmp_path)
    line = caplog.records[0].getMessage()
    assert line.startswith(
        f"[1/1] point {plan.points[0].id} batch_size=4, non_blocking=False, the loader's own "
        "num_workers, persistent_workers, pin_memory, prefetch_factor, drop_last"
    )
