"""Following a sweep: the progress word of each point, the advice, the counts and progress
lines, the wait loop (its backoff, and the results read between the scheduler's answers)."""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.backends import follow
from harness.backends.inline import InlineBackend
from harness.backends.local import LocalBackend
from harness.backends.slurm.backend import SlurmBackend
from harness.backends.slurm.states import JobState
from harness.backends.status import PointStatus, advice, sweep_status
from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.storage.sweep import (
    OWNER_FILE,
    create_sweep,
    live_owner,
    load_points,
    owned,
    process_stamp,
    record_jobs,
)
from harness_schema import layout
from tests.conftest import TINY_WORKLOAD


@pytest.fixture(scope="module")
def point() -> Point:
    return expand(parse_spec("name: t\n" + TINY_WORKLOAD)).points[0]


def status(
    point: Point,
    state: str,
    done: int = 0,
    total: int = 2,
    failed: int = 0,
    reason: str = "",
    job: str = "7_0",
) -> PointStatus:
    return PointStatus(
        point=point,
        job_id=job,
        state=state,
        reason=reason,
        units_done=done,
        units_total=total,
        failed_units=failed,
        error="",
    )


@pytest.mark.parametrize(
    ("state", "reason", "done", "failed", "progress", "active", "resubmit"),
    [
        ("PENDING", "Resources", 0, 0, "pending", True, False),
        ("REQUEUED", "", 0, 0, "pending", True, False),
        ("PENDING", "JobHeldUser", 0, 0, "held", True, False),  # scontrol hold
        ("REQUEUE_HOLD", "", 1, 0, "held", True, False),
        ("SPECIAL_EXIT", "", 0, 0, "held", True, False),
        ("RUNNING", "None", 1, 0, "running", True, False),
        ("RESIZING", "", 1, 0, "running", True, False),
        ("SUSPENDED", "", 1, 0, "suspended", True, False),  # scontrol suspend
        ("STOPPED", "", 1, 0, "suspended", True, False),
        ("A_STATE_OF_SLURM_26", "", 0, 0, "unknown", True, False),  # never run twice
        ("TIMEOUT", "", 1, 0, "timed-out", False, True),
        ("DEADLINE", "", 0, 0, "timed-out", False, True),
        ("PREEMPTED", "", 1, 0, "preempted", False, True),
        ("OUT_OF_MEMORY", "", 0, 0, "failed", False, True),
        ("CANCELLED by 0", "", 0, 0, "cancelled", False, True),
        ("NEVER_STARTED", "", 0, 0, "cancelled", False, True),
        ("COMPLETED", "", 2, 0, "completed", False, False),
        ("COMPLETED", "", 2, 1, "failed", False, False),  # complete results, some rungs failed
        ("COMPLETED", "", 1, 0, "partial", False, True),  # ended well, results missing
        ("-", "", 1, 0, "partial", False, True),
        ("-", "", 0, 0, "not run", False, True),
    ],
)
def test_the_progress_word_says_what_to_do(
    point: Point, state: str, reason: str, done: int, failed: int, progress: str, active: bool, resubmit: bool
) -> None:
    st = status(point, state, done=done, failed=failed, reason=reason)
    assert (st.progress, st.active, st.needs_resubmit) == (progress, active, resubmit)


def test_the_status_table_and_the_counts_line(point: Point) -> None:
    statuses = [status(point, "RUNNING", 1), status(point, "COMPLETED", 2), status(point, "COMPLETED", 2)]
    assert follow.counts(statuses) == "2 completed, 1 running"
    header, _, first, *_ = follow.status_table(statuses, wide=True).splitlines()
    assert header.split() == ["#", "point", "job", "slurm", "state", "status", "results", "error"]
    assert first.split() == ["0", point.id, "7_0", "RUNNING", "running", "1/2"]
    held = follow.status_table([status(point, "PENDING", reason="JobHeldUser")]).splitlines()[2]
    assert "PENDING (JobHeldUser)" in held and " held " in held


def test_the_status_table_says_once_what_every_point_shares(point: Point) -> None:
    """By default, a column the same in every row is said above the table, a blank one not at
    all, and the settings that vary between the points follow the point."""
    two = dataclasses.replace(
        point, index=1, id="b" * 10, loader=dataclasses.replace(point.loader, num_workers=4)
    )
    statuses = [status(point, "COMPLETED", 2, job="7_0"), status(two, "COMPLETED", 2, job="7_1")]
    above, header, _, first, second = follow.status_table(statuses).splitlines()
    assert above == "same in every row: slurm state COMPLETED, status completed, results 2/2"
    assert header.split() == ["#", "point", "num_workers", "job"]
    assert first.split() == ["0", point.id, str(point.loader.num_workers), "7_0"]
    assert second.split() == ["1", "b" * 10, "4", "7_1"]


def test_the_advice_names_what_to_run_for_each_point_not_done(point: Point) -> None:
    statuses = [
        status(point, "SUSPENDED", 1, job="7_0"),
        status(point, "PENDING", reason="JobHeldUser", job="7_1"),
        status(point, "REQUEUE_HOLD", job="7_2"),
        status(point, "CANCELLED", job="7_3"),
        status(point, "RUNNING", 1, job="7_4"),
    ]
    assert advice(statuses, Path("results/t/1"), SlurmBackend) == [
        "2 point(s) held: release them with: scontrol release 7_[1-2] (harness resume leaves them alone)",
        "1 point(s) suspended: let them go on with: scontrol resume 7_0 (harness resume leaves them alone)",
        "resubmit the 1 point(s) without complete results: harness resume results/t/1",
    ]
    here = [status(point, "-", 1, job=""), status(point, "-", 2, job="")]
    assert advice(here, Path("results/t/2"), InlineBackend) == [
        "run here the 1 point(s) without complete results: harness resume results/t/2"
    ]


def test_time_left_follows_the_pace_so_far() -> None:
    assert follow.time_left(0, 10, 30.0) == ""  # nothing done yet: no estimate
    assert follow.time_left(5, 10, 30.0) == "about 30 s left"
    assert follow.time_left(1, 10, 60.0) == "about 9 min left"
    assert follow.time_left(1, 10, 3600.0) == "about 9 h 0 min left"


class Clock:
    """A fake clock that sleeping advances; each sleep may run the test's next step first."""

    def __init__(self, steps: dict[int, Callable[[], None]] | None = None) -> None:
        self.now, self.sleeps, self.steps = 1000.0, 0, steps or {}

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if self.sleeps in self.steps:
            self.steps[self.sleeps]()
        self.now += seconds


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    plan = expand(parse_spec("name: t\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1]}\n"))
    sweep_dir = create_sweep(plan, tmp_path, backend="slurm")
    record_jobs(sweep_dir, list(plan.points), ["7_0", "7_1"], "slurm")
    return sweep_dir


def finish(sweep_dir: Path, index: int) -> None:
    """The results of point `index`, as its rank would write them."""
    point = load_points(sweep_dir)[index]
    path = layout.point_dir(sweep_dir, point.id)
    path.mkdir(parents=True, exist_ok=True)
    header = "point_id,point_index,rung,repeat,status,training_time"
    (path / "rank0.csv").write_text(f"{header}\n{point.id},{point.index},full,0,ok,1.0\n")


def test_waiting_asks_the_scheduler_less_and_less_often(sweep: Path) -> None:
    clock, asked = Clock(), []

    def ask(sweep_dir: Path) -> dict[str, JobState]:
        asked.append(clock.now)
        state = "RUNNING" if len(asked) < 12 else "CANCELLED"
        return {job: JobState(state, "", "n1") for job in ("7_0", "7_1")}

    last = follow.wait_for_sweep(
        sweep, SlurmBackend, ask=ask, clock=clock, sleep=clock.sleep, stream=io.StringIO()
    )
    assert [st.progress for st in last] == ["cancelled", "cancelled"]
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(asked)]
    assert gaps[:4] == [3.0, 4.5, 6.75, 10.12]
    assert max(gaps) == 60.0 and gaps[-1] == 60.0
    assert clock.sleeps > 2 * len(asked)  # the results were read between two questions


def test_results_end_the_wait_without_asking_the_scheduler_again(sweep: Path) -> None:
    clock = Clock({1: lambda: finish(sweep, 0), 2: lambda: finish(sweep, 1)})
    asked: list[float] = []

    def ask(sweep_dir: Path) -> dict[str, JobState]:
        asked.append(clock.now)
        return {job: JobState("RUNNING", "", "n1") for job in ("7_0", "7_1")}

    last = follow.wait_for_sweep(
        sweep,
        SlurmBackend,
        ask=ask,
        clock=clock,
        sleep=clock.sleep,
        stream=io.StringIO(),
        first_s=30,
        look_s=5,
    )
    assert [st.progress for st in last] == ["completed", "completed"]
    assert asked == [1000.0]  # 10 s later, every point had its results


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_live_line_on_a_terminal_and_log_lines_elsewhere(
    sweep: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def ask(sweep_dir: Path) -> dict[str, JobState]:
        return {job: JobState("RUNNING", "", "n1") for job in ("7_0", "7_1")}

    terminal = Terminal()
    looks = {"first_s": 100.0, "look_s": 5.0}  # a look every 5 s, one question only
    clock = Clock({2: lambda: finish(sweep, 0), 4: lambda: finish(sweep, 1)})
    follow.wait_for_sweep(
        sweep, SlurmBackend, ask=ask, clock=clock, sleep=clock.sleep, stream=terminal, **looks
    )
    assert terminal.getvalue().split("\r")[1:4] == [
        "0/2 points done: 2 running\033[K",
        "0/2 points done: 2 running\033[K",
        "1/2 points done: 1 completed, 1 running; about 10 s left\033[K",  # 1 unit in 10 s
    ]
    assert terminal.getvalue().endswith("2/2 points done: 2 completed\033[K\n")

    for point_dir in (sweep / "points").iterdir():
        (point_dir / "rank0.csv").unlink()
    clock = Clock({2: lambda: finish(sweep, 0), 4: lambda: finish(sweep, 1)})
    with caplog.at_level(logging.INFO, logger=follow.__name__):
        follow.wait_for_sweep(
            sweep, SlurmBackend, ask=ask, clock=clock, sleep=clock.sleep, stream=io.StringIO(), **looks
        )
    assert [r.getMessage() for r in caplog.records] == [
        "0/2 points done: 2 running",  # one line per change, however often it looks
        "1/2 points done: 1 completed, 1 running; about 10 s left",
        "2/2 points done: 2 completed",
    ]


def test_a_sweep_run_here_is_running_while_its_process_lives(tmp_path: Path) -> None:
    plan = expand(parse_spec("name: t\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1]}\n"))
    sweep_dir = create_sweep(plan, tmp_path, backend="inline")
    finish(sweep_dir, 0)
    with owned(sweep_dir):
        statuses = sweep_status(sweep_dir, {})
        assert [st.progress for st in statuses] == ["completed", "running"]
        assert statuses[1].state_text == f"RUNNING (pid {os.getpid()} on {socket.gethostname()})"
        assert advice(statuses, sweep_dir, InlineBackend) == []  # resume would run nothing
    assert [st.progress for st in sweep_status(sweep_dir, {})] == ["completed", "not run"]
    # A process that died without cleaning up (killed): its pid is gone, or is another process.
    dead = {"host": socket.gethostname(), "pid": os.getpid(), "started": 12.5}
    (sweep_dir / OWNER_FILE).write_text(json.dumps(dead))
    assert live_owner(sweep_dir) == ""
    assert [st.needs_resubmit for st in sweep_status(sweep_dir, {})] == [False, True]
    # Stamped after it had ended: no start time, and nothing of it can be alive.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (sweep_dir / OWNER_FILE).write_text(json.dumps(process_stamp(gone.pid)))
    assert json.loads((sweep_dir / OWNER_FILE).read_text())["started"] is None
    assert live_owner(sweep_dir) == ""


def test_a_local_job_is_running_while_its_own_process_lives_and_resume_waits_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The local backend's job is a process of its own, which outlives a `harness run` killed
    alone: its point is running while that process lives, whoever owns the sweep."""
    plan = expand(parse_spec("name: t\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1]}\n"))
    sweep_dir = create_sweep(plan, tmp_path, backend="local")
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    record_jobs(sweep_dir, [plan.points[0]], [str(job.pid)], "local", process=True)
    statuses = sweep_status(sweep_dir, {})
    assert [st.progress for st in statuses] == ["running", "not run"]
    assert statuses[0].state_text == f"RUNNING (pid {job.pid} on {socket.gethostname()})"

    after = follow.wait_for_orphaned_jobs(statuses, sweep_dir, LocalBackend)  # returns once the job has ended
    assert job.poll() is not None
    assert capsys.readouterr().out == (
        f"waiting for 1 point(s) whose local job outlived its harness run ({plan.points[0].id}: "
        f"pid {job.pid} on {socket.gethostname()}): points run here one at a time\n"
    )
    assert [st.progress for st in after] == ["not run", "not run"]  # it ended without rows
    assert follow.wait_for_orphaned_jobs(after, sweep_dir, LocalBackend) == after  # nothing to wait for
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    record_jobs(sweep_dir, [plan.points[0]], [str(job.pid)], "local", process=True)
    try:
        with owned(sweep_dir):  # a live harness run owns the sweep: it runs the rest itself
            follow.wait_for_orphaned_jobs(sweep_status(sweep_dir, {}), sweep_dir, LocalBackend)
            assert job.poll() is None  # it returned at once
    finally:
        job.kill()
        job.wait()
