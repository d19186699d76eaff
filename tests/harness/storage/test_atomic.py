from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.storage import atomic
from harness.storage.atomic import atomic_write_text


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
