"""A sweep's listing of its point folders (analysis/listing.py): a report takes it where no
folder's time moved, and sees every change the folders' or the rank files' times tell,
in place or by rename."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest

from analysis import consolidated, listing
from analysis.load import load_results
from analysis.render.report import build_report
from tests.analysis.conftest import synthetic_row, write_rows


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three points of two repeats, kept however small (MIN_FILES is 1000), folders aged."""
    monkeypatch.setattr(consolidated, "MIN_FILES", 1)
    sweep = tmp_path / "grid" / "20260101-000000"
    for index in range(3):
        write_rows(
            sweep,
            *(
                synthetic_row(point_id=f"p{index}", point_index=index, num_workers=index, repeat=repeat)
                for repeat in (0, 1)
            ),
        )
    age(sweep)
    return sweep


def age(sweep: Path) -> None:
    """Date `points/` and the point folders back beyond RACY_NS, as a sweep written a while ago."""
    past = time.time_ns() - 10 * listing.RACY_NS
    for folder in [sweep / "points", *(sweep / "points").iterdir()]:
        os.utime(folder, ns=(past, past))


def listed_folders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The point folders os.listdir lists from now on."""
    seen: list[str] = []
    real = os.listdir

    def counting(path: str) -> list[str]:
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", counting)
    return seen


def same_as_file_by_file(sweep: Path) -> pd.DataFrame:
    """The rows through the listing and the consolidated file, checked against every folder
    listed and every file read."""
    slow = load_results([sweep], consolidated=False)
    fast = load_results([sweep], refresh=True)
    pd.testing.assert_frame_equal(fast.rows, slow.rows, check_exact=True)
    assert fast.problems == slow.problems and fast.profiled == slow.profiled
    return fast.rows


def test_a_report_writes_it_and_the_next_lists_no_point_folder(
    sweep: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    same_as_file_by_file(sweep)
    held = listing.read(sweep)
    assert held is not None and sorted(held.points) == ["p0", "p1", "p2"]
    assert all(entry[1] == ("rank0.csv",) and entry[0] != listing.UNKNOWN for entry in held.points.values())
    seen = listed_folders(monkeypatch)
    rows = load_results([sweep], refresh=True).rows
    assert seen == [] and len(rows) == 6


def test_a_rank_file_rewritten_in_place_is_read_again(sweep: Path) -> None:
    """Rewritten in place (no rename), its folder's time stays: the file's own stamp tells."""
    same_as_file_by_file(sweep)
    point = sweep / "points" / "p1"
    before = point.stat().st_mtime_ns
    path = point / "rank0.csv"
    text = path.read_text()
    with path.open("w") as f:  # in place: same inode, the folder untouched
        f.write(text.replace("fake_cifar", "fake_cifaR"))
    assert point.stat().st_mtime_ns == before
    rows = same_as_file_by_file(sweep)
    assert set(rows.loc[rows["point_id"] == "p1", "dataset"]) == {"fake_cifaR"}


def test_points_and_rank_files_added_or_gone_are_seen(sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    same_as_file_by_file(sweep)
    write_rows(sweep, synthetic_row(point_id="p9", point_index=9))  # a new point
    write_rows(sweep, synthetic_row(point_id="p0", rank=1, world_size=2))  # a new rank file
    (sweep / "points" / "p2" / "rank0.csv").unlink()
    (sweep / "points" / "p1" / "profile").mkdir()
    (sweep / "points" / "p3").mkdir()  # a point folder with no rank file yet
    age(sweep)  # and none of it just now: only the folders' times tell
    write_rows(sweep, synthetic_row(point_id="p3", point_index=3))
    real = os.listdir
    seen = listed_folders(monkeypatch)
    fast = load_results([sweep], refresh=True)
    # The folders whose time moved were listed again, and the new ones.
    assert sorted(seen) == ["p0", "p1", "p2", "p3", "p9"]
    monkeypatch.setattr(os, "listdir", real)
    rows = same_as_file_by_file(sweep)
    assert set(rows["point_id"]) == {"p0", "p1", "p3", "p9"} and set(rows["rank"]) == {0, 1}
    assert fast.profiled == {str(sweep): [str(sweep / "points" / "p1")]}


def test_a_folder_changed_just_now_is_listed_again_next_time(
    sweep: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changed within RACY_NS of its stat, a folder's time is not kept: an entry added in the
    same tick of the file system's clock would leave it unchanged."""
    write_rows(sweep, synthetic_row(point_id="p0", rank=1, world_size=2))
    same_as_file_by_file(sweep)
    held = listing.read(sweep)
    assert held is not None and held.points["p0"][0] == listing.UNKNOWN and held.points["p1"][0] > 0
    assert held.points_mtime != listing.UNKNOWN
    seen = listed_folders(monkeypatch)
    load_results([sweep], refresh=True)
    assert seen == ["p0"]


def test_a_resume_after_the_files_were_kept_changes_the_report(sweep: Path) -> None:
    """The report itself: rows a resume appends (a rank file renamed into place) after the
    listing and the consolidated file were written are in the next report, as file by file."""
    first = build_report([sweep]).text
    assert listing.read(sweep) is not None and consolidated.read(sweep) is not None
    write_rows(sweep, synthetic_row(point_id="p1", point_index=1, num_workers=1, repeat=2, training_time=0.5))
    fast = build_report([sweep]).text
    assert fast != first and fast == build_report([sweep], consolidated=False).text
    assert "p1 repeat 2 +100%" in fast and "p1 repeat 2" not in first


def test_a_torn_listing_is_ignored_and_written_again(sweep: Path) -> None:
    listing.path_of(sweep).write_bytes(b"PAR1 not parquet")
    same_as_file_by_file(sweep)
    assert listing.read(sweep) is not None


def test_small_sweeps_get_none(sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consolidated, "MIN_FILES", 4)
    same_as_file_by_file(sweep)
    assert not listing.path_of(sweep).exists()
