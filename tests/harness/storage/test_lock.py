from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.storage.lock import LOCK_FILE, SweepHeld, sweep_lock
from harness.storage.sweep import process_stamp


def test_a_held_sweep_is_refused_with_who_holds_it(tmp_path: Path) -> None:
    with sweep_lock(tmp_path, "harness run"):
        held = json.loads((tmp_path / LOCK_FILE).read_text())
        with pytest.raises(SweepHeld) as refused, sweep_lock(tmp_path, "harness resume"):
            pass
    line = str(refused.value)
    since = held["since"].replace("T", " ")
    assert line == (
        f"{tmp_path} is held by harness run (pid {os.getpid()} on {socket.gethostname()}, since {since}): "
        "one run or resume of a sweep at a time"
    )
    assert "\n" not in line
    assert not (tmp_path / LOCK_FILE).exists()  # released by its holder alone


def test_the_lock_of_a_process_gone_from_this_host_is_taken_over(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stamp = {**process_stamp(gone.pid), "since": "2026-01-01T00:00:00", "verb": "harness resume"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(stamp))
    with sweep_lock(tmp_path, "harness resume"):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_pid_reused_by_another_process_does_not_hold_the_lock(tmp_path: Path) -> None:
    # This process's pid, but another start time: the holder died and its pid was reused.
    stamp = {**process_stamp(os.getpid()), "started": 12.5, "since": "2026-01-01T00:00:00"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(stamp))
    with sweep_lock(tmp_path, "harness run"):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["started"] != 12.5


def test_a_lock_of_another_host_is_never_taken_over(tmp_path: Path) -> None:
    stamp = {
        "host": "node-17",
        "pid": 4242,
        "started": 1.0,
        "since": "2026-01-01T10:00:00",
        "verb": "harness run",
    }
    (tmp_path / LOCK_FILE).write_text(json.dumps(stamp))
    with pytest.raises(SweepHeld) as refused, sweep_lock(tmp_path, "harness resume"):
        pass
    assert str(refused.value) == (
        f"{tmp_path} is held by harness run (pid 4242 on node-17, since 2026-01-01 10:00:00): one run or "
        f"resume of a sweep at a time; if that run is gone, remove {tmp_path / LOCK_FILE}"
    )
    assert json.loads((tmp_path / LOCK_FILE).read_text()) == stamp  # left as it was


def test_two_processes_taking_a_stale_lock_at_once_get_it_one_at_a_time(tmp_path: Path) -> None:
    """Both find the same stale lock; the takeover is serialised, so exactly one holds it."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / LOCK_FILE).write_text(json.dumps({**process_stamp(gone.pid), "since": "x"}))
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from harness.storage.lock import SweepHeld, sweep_lock\n"
        "try:\n"
        "    with sweep_lock(Path(sys.argv[1]), 'harness resume'):\n"
        "        print('held', flush=True); sys.stdin.read()  # held until the test lets go\n"
        "except SweepHeld as e:\n"
        "    print('refused', flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    takers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    assert takers[0].stdout is not None and takers[1].stdout is not None
    said = sorted(t.stdout.readline().strip() for t in takers)  # both have answered, one holds it
    for t in takers:
        t.communicate(timeout=60)
    assert said == ["held", "refused"]


@pytest.mark.parametrize("torn", ["", 'garbage{"pid": 1'])
def test_a_torn_lock_is_never_taken_over_and_the_line_says_how_to_clear_it(tmp_path: Path, torn: str) -> None:
    """A lock whose holder is unreadable (a node that crashed between its create and its write,
    on a shared file system): held, as before, but the line now says how to get out of it
    (before: the sweep was held for good, and the line said nothing to do)."""
    (tmp_path / LOCK_FILE).write_text(torn)
    with pytest.raises(SweepHeld) as refused, sweep_lock(tmp_path, "harness resume"):
        pass
    assert str(refused.value) == (
        f"{tmp_path} is held by a process that did not write its name: one run or resume of a sweep "
        f"at a time; its file says nothing readable: if no run works on the sweep, remove {tmp_path / LOCK_FILE}"
    )
    assert (tmp_path / LOCK_FILE).read_text() == torn  # left as it was
