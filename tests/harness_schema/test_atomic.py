from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness_schema import atomic
from harness_schema.atomic import atomic_write_text


def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a" / "rank0.csv"
    atomic_write_text(target, "one\n")
    atomic_write_text(target, "two\n")
    assert target.read_text() == "two\n"
    assert os.listdir(target.parent) == ["rank0.csv"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "rank0.csv"
    atomic_write_text(target, "old\n")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["rank0.csv"]


def test_result_files_get_the_mode_the_umask_gives(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "rank0.csv", "x\n")
    finally:
        os.umask(old)
    assert (tmp_path / "rank0.csv").stat().st_mode & 0o777 == 0o644


def test_a_full_disk_names_the_file_keeps_the_old_one_and_leaves_no_temporary(tmpfs: Path) -> None:
    from tests.fixtures.workloads import fill_disk

    target = tmpfs / "rank0.csv"
    atomic_write_text(target, "old\n")
    fill_disk(tmpfs / "ballast")
    with pytest.raises(atomic.CannotWrite) as raised:
        atomic_write_text(target, "new\n" * 100_000)
    assert str(raised.value) == f"cannot write {target}: No space left on device"
    assert raised.value.path == target
    assert target.read_text() == "old\n"
    assert sorted(os.listdir(tmpfs)) == ["ballast", "rank0.csv"]


def test_temporary_files_of_dead_writers_are_cleaned_and_a_live_writers_kept(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys
    import time

    host = socket.gethostname().split(".")[0]
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    stray = tmp_path / f".rank1.csv.w{dead_pid}@{host}.k2j4_x.tmp"
    live = tmp_path / f".rank0.csv.w{os.getpid()}@{host}.a8b1cd.tmp"  # another rank writing now
    old = tmp_path / ".samples-rank0.csv.3f8a9b.tmp"  # a writer of before the pid was in the name
    for path in (stray, live, old):
        path.write_text("half a file")
    hours_ago = time.time() - 2 * atomic.STALE_S
    os.utime(old, (hours_ago, hours_ago))
    assert atomic.clean_temporaries(tmp_path) == 2
    assert sorted(os.listdir(tmp_path)) == [live.name]


def test_a_point_opened_again_cleans_what_a_killed_rank_left(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    from harness.config.plan import expand
    from harness.config.spec import parse_spec
    from harness.execution.dist import DistEnv
    from harness.execution.point import open_point
    from tests.conftest import TINY_WORKLOAD

    (point,) = expand(parse_spec("name: t\n" + TINY_WORKLOAD)).points
    folder = tmp_path / "points" / point.id
    folder.mkdir(parents=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stray = folder / f".rank0.csv.w{int(dead.stdout)}@{socket.gethostname().split('.')[0]}.zz9_ab.tmp"
    stray.write_text("half a row")
    open_point(point, tmp_path, DistEnv())
    assert not stray.exists()


def test_a_storage_fault_another_process_died_of_is_read_from_its_log_even_cut() -> None:
    """A local job's rank that could not write: its log's end, itself cut by the full disk,
    still gives the file and the system's whole words."""
    log = (
        '[rank0]:   File "harness_schema/atomic.py", line 57, in atomic_write_bytes\n'
        "[rank0]: harness_schema.atomic.CannotWrite: cannot write /r/x: y/meta-rank0.json: No s"
    )
    fault = atomic.CannotWrite.in_text(log)
    assert fault is not None
    assert str(fault) == "cannot write /r/x: y/meta-rank0.json: No space left on device"
    assert atomic.CannotWrite.in_text("RuntimeError: Connection closed by peer") is None
