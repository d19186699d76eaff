"""Following a sweep: the progress word of each point, the counts line, the wait loop."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backends import follow
from harness.backends.status import PointStatus
from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from tests.conftest import TINY_WORKLOAD


@pytest.fixture(scope="module")
def point() -> Point:
    return expand(parse_spec("name: t\n" + TINY_WORKLOAD)).points[0]


def status(point: Point, state: str, done: int = 0, total: int = 2, failed: int = 0) -> PointStatus:
    return PointStatus(
        point=point,
        job_id="7_0",
        state=state,
        units_done=done,
        units_total=total,
        failed_units=failed,
        error="",
    )


@pytest.mark.parametrize(
    ("state", "done", "failed", "progress", "active", "resubmit"),
    [
        ("PENDING", 0, 0, "pending", True, False),
        ("RUNNING", 1, 0, "running", True, False),
        ("TIMEOUT", 1, 0, "timed-out", False, True),
        ("CANCELLED", 0, 0, "cancelled", False, True),
        ("NEVER_STARTED", 0, 0, "cancelled", False, True),
        ("COMPLETED", 2, 0, "completed", False, False),
        ("COMPLETED", 2, 1, "failed", False, False),  # complete results, some rungs failed
        ("-", 1, 0, "partial", False, True),
        ("-", 0, 0, "not run", False, True),
    ],
)
def test_the_progress_word_says_what_to_do(
    point: Point, state: str, done: int, failed: int, progress: str, active: bool, resubmit: bool
) -> None:
    st = status(point, state, done=done, failed=failed)
    assert (st.progress, st.active, st.needs_resubmit) == (progress, active, resubmit)


def test_the_status_table_and_the_counts_line(point: Point) -> None:
    statuses = [status(point, "RUNNING", 1), status(point, "COMPLETED", 2), status(point, "COMPLETED", 2)]
    assert follow.counts(statuses) == "2 completed, 1 running"
    header, _, first, *_ = follow.status_table(statuses).splitlines()
    assert header.split() == ["#", "point", "job", "slurm", "state", "status", "results", "error"]
    assert first.split() == ["0", point.id, "7_0", "RUNNING", "running", "1/2"]


def test_waiting_ends_when_no_job_is_left_and_logs_each_change(
    point: Point, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    polls: Iterator[list[PointStatus]] = iter(
        [
            [status(point, "PENDING"), status(point, "PENDING")],
            [status(point, "PENDING"), status(point, "PENDING")],  # unchanged: no new line
            [status(point, "RUNNING", 1), status(point, "PENDING")],
            [status(point, "COMPLETED", 2), status(point, "TIMEOUT", 1)],
        ]  # a fifth poll would raise StopIteration: waiting must end at the fourth
    )
    monkeypatch.setattr(follow, "sweep_status", lambda sweep_dir: next(polls))
    with caplog.at_level(logging.INFO, logger=follow.__name__):
        last = follow.wait_for_sweep(Path("unused"), poll_s=0)
    assert [st.progress for st in last] == ["completed", "timed-out"]
    assert [r.getMessage() for r in caplog.records] == [
        "2 pending",
        "1 pending, 1 running",
        "1 completed, 1 timed-out",
    ]
