"""The sweep's consolidated file (analysis/consolidated.py): the rows read through it are the
rows read file by file, however the rank files changed after it was written."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pandas as pd
import pytest

from analysis import consolidated
from analysis.load import load_results
from analysis.meta import load_meta
from analysis.render.report import build_report
from harness_schema import rows as results
from harness_schema.atomic import CannotWrite, atomic_write_text
from tests.analysis.conftest import synthetic_row, write_node_meta, write_rows


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Four points, two ranks, two repeats, consolidated however small (MIN_FILES is 1000)."""
    monkeypatch.setattr(consolidated, "MIN_FILES", 1)
    sweep = tmp_path / "grid" / "20260101-000000"
    for index in range(4):
        for rank in (0, 1):
            write_rows(
                sweep,
                *(
                    synthetic_row(
                        point_id=f"p{index}",
                        point_index=index,
                        num_workers=index,
                        rank=rank,
                        world_size=2,
                        repeat=repeat,
                        training_time=1.0 + index / 10 + repeat / 100 + rank / 1000,
                        hostname="n1",
                    )
                    for repeat in (0, 1)
                ),
            )
    return sweep


def same_as_file_by_file(paths: list[Path]) -> pd.DataFrame:
    """The rows through the consolidated files, checked against every file read one by one."""
    slow = load_results(paths, consolidated=False)
    fast = load_results(paths, refresh=True)
    pd.testing.assert_frame_equal(fast.rows, slow.rows, check_exact=True)
    assert fast.problems == slow.problems
    return fast.rows


def test_the_report_writes_it_and_reads_the_same_rows_from_it(sweep: Path) -> None:
    same_as_file_by_file([sweep])
    assert consolidated.path_of(sweep).is_file()
    held = consolidated.read(sweep)
    assert held is not None and len(held.stamps) == 8 and held.table.num_rows == 16
    same_as_file_by_file([sweep])


def test_rows_added_rewritten_or_gone_after_it_was_written_are_read_from_the_files(sweep: Path) -> None:
    same_as_file_by_file([sweep])
    # A sweep still filling: a new point, and a row appended to a point's rank file (a resume).
    write_rows(sweep, synthetic_row(point_id="p9", point_index=9, training_time=2.5))
    write_rows(sweep, synthetic_row(point_id="p0", repeat=2, rank=0, world_size=2, training_time=7.0))
    # A row with status ok and no training_time: flagged and skipped, as from the file.
    write_rows(
        sweep, synthetic_row(point_id="p1", repeat=2, rank=1, world_size=2, training_time=float("nan"))
    )
    (sweep / "points" / "p3" / "rank1.csv").unlink()
    rows = same_as_file_by_file([sweep])
    assert rows.loc[rows["point_id"] == "p0", "training_time"].max() == 7.0
    assert "p9" in set(rows["point_id"]) and len(rows[rows["point_id"] == "p3"]) == 2
    held = consolidated.read(sweep)
    assert held is not None and "points/p3/rank1.csv" not in held.stamps
    assert "points/p9/rank0.csv" in held.stamps
    same_as_file_by_file([sweep])


def test_a_file_rewritten_with_the_same_size_and_another_time_is_read_again(sweep: Path) -> None:
    same_as_file_by_file([sweep])
    path = sweep / "points" / "p2" / "rank0.csv"
    text = path.read_text()
    atomic_write_text(path, text.replace("fake_cifar", "fake_cifaR"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    rows = same_as_file_by_file([sweep])
    mine = (rows["point_id"] == "p2") & (rows["rank"] == 0)
    assert set(rows.loc[mine, "dataset"]) == {"fake_cifaR"}


def test_a_torn_file_is_said_each_time_and_never_consolidated(sweep: Path) -> None:
    (sweep / "points" / "p1" / "rank0.csv").write_text("point_id,point_index\np1,0\n")
    first = load_results([sweep], refresh=True)
    second = load_results([sweep], refresh=True)
    assert len(first.problems) == 1 and first.problems == second.problems
    same_as_file_by_file([sweep])


def test_files_of_two_harness_versions_keep_their_columns_and_order(sweep: Path) -> None:
    old = synthetic_row(point_id="old", point_index=7)
    columns = [c for c in results.ROW_COLUMNS if c not in ("gpu_util", "transform_names")]
    atomic_write_text(sweep / "points" / "old" / "rank0.csv", results.csv_text([old.cells()], columns))
    newer = synthetic_row(point_id="newer", point_index=8).cells() | {"shiny": "yes"}
    atomic_write_text(
        sweep / "points" / "newer" / "rank0.csv",
        results.csv_text([newer], [*results.ROW_COLUMNS, "shiny"]),
    )
    same_as_file_by_file([sweep])
    rows = same_as_file_by_file([sweep])
    assert list(rows.columns[-1:]) == ["shiny"] and set(rows["shiny"]) == {"", "yes"}


def test_some_points_of_a_sweep_are_read_through_it_and_leave_it_whole(sweep: Path) -> None:
    same_as_file_by_file([sweep])
    same_as_file_by_file([sweep / "points" / "p1", sweep / "points" / "p2" / "rank1.csv"])
    held = consolidated.read(sweep)
    assert held is not None and len(held.stamps) == 8


def test_a_read_only_results_folder_is_read_as_it_is(sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def read_only(path: Path, data: bytes) -> None:
        raise CannotWrite(path, OSError(errno.EROFS, os.strerror(errno.EROFS)))

    monkeypatch.setattr(consolidated, "atomic_write_bytes", read_only)
    same_as_file_by_file([sweep])
    assert not consolidated.path_of(sweep).exists()


def test_a_torn_consolidated_file_is_ignored_and_written_again(sweep: Path) -> None:
    consolidated.path_of(sweep).write_bytes(b"PAR1 not parquet")
    same_as_file_by_file([sweep])
    assert consolidated.read(sweep) is not None


def test_small_sweeps_are_left_as_written(sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consolidated, "MIN_FILES", 9)
    same_as_file_by_file([sweep])
    assert not consolidated.path_of(sweep).exists()


def test_the_report_is_the_same_through_it(sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's text itself, with rows added after the file was written."""
    build_report([sweep])
    write_rows(sweep, synthetic_row(point_id="p9", point_index=9, training_time=2.5))
    write_rows(
        sweep, synthetic_row(point_id="p1", repeat=2, rank=1, world_size=2, training_time=float("nan"))
    )
    fast = build_report([sweep]).text
    assert consolidated.read(sweep) is not None
    slow = build_report([sweep], consolidated=False).text
    assert fast == slow and "p9" in fast and "no training_time" in fast


def test_the_meta_files_are_taken_from_it_while_unchanged_and_read_again_once_rewritten(
    sweep: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(4):
        for rank in (0, 1):
            write_node_meta(sweep, f"p{index}", rank, "n1", "NVIDIA A100-SXM4-80GB", 8)
    (sweep / "points" / "p3" / "meta-rank1.json").write_text("[]")  # not an object: said so
    rows = load_results([sweep]).rows
    slow_problems: list[str] = []
    slow = load_meta(rows, slow_problems)
    problems: list[str] = []
    pd.testing.assert_frame_equal(load_meta(rows, problems, consolidated=True), slow, check_exact=True)
    assert (sweep / consolidated.META_FILE).is_file() and problems == slow_problems != []
    # Now from the consolidated file: no meta file is opened.
    opened: list[str] = []
    real_read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda p: opened.append(str(p)) or real_read(p))
    problems = []
    pd.testing.assert_frame_equal(load_meta(rows, problems, consolidated=True), slow, check_exact=True)
    assert opened == [] and problems == slow_problems
    # A meta file rewritten (a resumed point on another node) is read again, and only it.
    changed = sweep / "points" / "p1" / "meta-rank0.json"
    write_node_meta(sweep, "p1", 0, "n2", "NVIDIA V100-SXM2-32GB", 4)
    os.utime(changed, ns=(1, 1))
    again = load_meta(rows, [], consolidated=True)
    assert opened == [str(changed)]
    assert again.loc[(again["point_id"] == "p1") & (again["rank"] == 0), "device_name"].tolist() == [
        "NVIDIA V100-SXM2-32GB"
    ]
    # The report through them is the report from every file.
    assert build_report([sweep], by="gpu").text == build_report([sweep], by="gpu", consolidated=False).text
