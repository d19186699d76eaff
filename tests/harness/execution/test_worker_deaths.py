"""A DataLoader worker that dies (a segfault in a decoder's C code) fails its rung with a row, and
the sweep goes on: PyTorch's SIGCHLD handler, which raises at whatever bytecode the rank is at,
never raises in the harness's own handling of the failure (before: in about half the runs, a
traceback, no row, and the next point not run; issue 37)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import termination, worker_deaths
from harness.execution.runner import run_point
from harness_schema import rows as results

SPEC = """\
name: deaths
workload:
  dataset: tests.fixtures.workloads:{dataset}
  dataset_args: {args}
  model: linear
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 2, repeats: 1}}
rungs: [full]
loader: {{num_workers: [2, 0]}}
"""


def _points(dataset: str, args: str):  # type: ignore[no-untyped-def]
    return expand(parse_spec(SPEC.format(dataset=dataset, args=args))).points


def _rows(sweep: Path, point_id: str) -> list[dict[str, str]]:
    return results.read_rows(sweep / "points" / point_id / "rank0.csv")


# Serial: in a pytest-xdist process the loop ended that process with a KeyboardInterrupt
# ("node down: keyboard-interrupt", CI-equivalent run of session 14); alone it passes 10 of 10.
@pytest.mark.serial
@pytest.mark.alone  # a pytest-xdist process is what it ended: run with no xdist
def test_a_worker_that_segfaults_fails_its_point_with_a_row_and_the_next_point_runs_every_time(
    tmp_path: Path,
) -> None:
    for attempt in range(10):
        sweep = tmp_path / str(attempt)
        crashing, plain = _points("segfaulting_dataset", "{size: 32, index: 3}")
        outcomes = [run_point(crashing, sweep), run_point(plain, sweep)]
        assert [(o.ok, o.failed) for o in outcomes] == [(0, 1), (1, 0)], f"attempt {attempt}"
        (row,) = _rows(sweep, crashing.id)
        assert row["status"] == "failed"
        assert re.match(
            r"RuntimeError: DataLoader worker \(pids?(\(s\))? \d+\) (is killed by signal: Segmentation fault|"
            r"exited unexpectedly)",
            row["error"],
        ), row["error"]
        assert [r["status"] for r in _rows(sweep, plain.id)] == ["ok"]


def _dead_child(deadline_s: float = 20.0) -> None:
    """Until a child of this process has died (and is not reaped yet: its SIGCHLD is sent)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if any(_zombie(c) for c in psutil.Process().children()):
            return
        time.sleep(0.01)
    raise AssertionError("no DataLoader worker died")


def _zombie(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_worker_death_that_comes_while_the_rank_records_another_failure_raises_nothing_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker 0 raises; worker 1 segfaults while the rank is in the rung's error path (held
    there until the death, as termination.GRACE_S holds it for real): the row says the first
    error, and the next point runs."""
    flag = tmp_path / "die-now"
    handled = termination.reraise_if_terminated

    def in_the_error_path(e: Exception) -> None:
        flag.touch()
        _dead_child()
        time.sleep(0.2)  # the SIGCHLD's handler runs here, at the next bytecodes
        handled(e)

    monkeypatch.setattr(termination, "reraise_if_terminated", in_the_error_path)
    crashing, plain = _points("failing_then_dying_dataset", f"{{size: 32, flag: {flag}}}")
    sweep = tmp_path / "sweep"
    outcomes = [run_point(crashing, sweep), run_point(plain, sweep)]
    assert [(o.ok, o.failed) for o in outcomes] == [(0, 1), (1, 0)]
    (row,) = _rows(sweep, crashing.id)
    assert row["error"].startswith("OSError: Caught OSError in DataLoader worker process 0")


def test_a_death_seen_between_asks_is_raised_at_the_next_ask_and_only_there() -> None:
    """The guard over a handler that raises as PyTorch's does: nothing raises outside an ask;
    the next ask raises it, once."""
    deaths: list[str] = []

    def torch_like(signum: int, frame: object) -> None:
        if deaths:
            raise RuntimeError(deaths.pop())

    previous = signal.signal(signal.SIGCHLD, torch_like)
    monkey = pytest.MonkeyPatch()
    monkey.setattr(worker_deaths, "_install_torch_handler", lambda: None)
    try:
        with worker_deaths.watched():
            deaths.append("DataLoader worker (pid 7) is killed by signal: Segmentation fault.")
            os.kill(os.getpid(), signal.SIGCHLD)
            time.sleep(0.05)  # the handler ran here: nothing raised
            with pytest.raises(RuntimeError, match="pid 7"):
                worker_deaths.asked(lambda: 1)
            assert worker_deaths.asked(lambda: 2) == 2
            deaths.append("DataLoader worker (pid 8) is killed by signal: Aborted.")

            def waiting() -> int:
                os.kill(os.getpid(), signal.SIGCHLD)
                time.sleep(0.05)
                return 3

            with pytest.raises(RuntimeError, match="pid 8"):  # seen during the ask: raised in it
                worker_deaths.asked(waiting)
        assert signal.getsignal(signal.SIGCHLD) is torch_like
        assert worker_deaths.asked(lambda: 4) == 4  # no guard: a plain call
    finally:
        monkey.undo()
        signal.signal(signal.SIGCHLD, previous)


def test_a_queue_torn_by_a_dying_worker_is_named_as_the_death(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that died as it sent leaves the rank a ConnectionResetError; its SIGCHLD comes
    a moment later: the rung's error is the death, which says what happened."""
    deaths = ["DataLoader worker (pid 9) is killed by signal: Segmentation fault."]

    def torch_like(signum: int, frame: object) -> None:
        if deaths:
            raise RuntimeError(deaths.pop())

    previous = signal.signal(signal.SIGCHLD, torch_like)
    monkeypatch.setattr(worker_deaths, "_install_torch_handler", lambda: None)
    try:
        with worker_deaths.watched():
            threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGCHLD)).start()
            failure = worker_deaths.cause(ConnectionResetError(104, "Connection reset by peer"))
            assert worker_deaths.is_death(failure) and "pid 9" in str(failure)
            assert worker_deaths.asked(lambda: 1) == 1  # said: not raised again
            other = ValueError("a bad sample")
            assert worker_deaths.cause(other) is other
    finally:
        signal.signal(signal.SIGCHLD, previous)
