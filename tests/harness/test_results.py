from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import results


def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a" / "rank0.csv"
    results.atomic_write_text(target, "one\n")
    results.atomic_write_text(target, "two\n")
    assert target.read_text() == "two\n"
    assert os.listdir(target.parent) == ["rank0.csv"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "rank0.csv"
    results.atomic_write_text(target, "old\n")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        results.atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["rank0.csv"]


def row(rung: str, repeat: int, rank: int = 0, status: str = "ok") -> results.RungRow:
    values = {c: "" for c in results.ROW_COLUMNS}
    values.update(rung=rung, repeat=repeat, rank=rank, status=status)
    return results.RungRow(**values)


def test_rank_writer_appends_rows_with_the_schema_header(tmp_path: Path) -> None:
    writer = results.RankWriter(tmp_path, rank=1)
    writer.append(row("full", 0, rank=1))
    writer.append(row("full", 1, rank=1, status="failed"))
    lines = (tmp_path / "rank1.csv").read_text().splitlines()
    assert lines[0] == ",".join(results.ROW_COLUMNS)
    assert [r["status"] for r in results.read_rows(tmp_path / "rank1.csv")] == ["ok", "failed"]


def test_point_complete_needs_every_rank_and_every_repeat(tmp_path: Path) -> None:
    r0 = results.RankWriter(tmp_path, 0)
    r0.append(row("full", 0))
    r0.append(row("full", 1))
    assert not results.point_complete(tmp_path, ["full"], repeats=2, world_size=2)  # rank 1 missing
    r1 = results.RankWriter(tmp_path, 1)
    r1.append(row("full", 0, rank=1))
    assert results.completed_units(tmp_path, 2) == {("full", 0)}
    r1.append(row("full", 1, rank=1, status="failed"))
    assert results.point_complete(tmp_path, ["full"], repeats=2, world_size=2)


def test_result_files_get_the_mode_the_umask_gives(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        results.atomic_write_text(tmp_path / "rank0.csv", "x\n")
    finally:
        os.umask(old)
    assert (tmp_path / "rank0.csv").stat().st_mode & 0o777 == 0o644
