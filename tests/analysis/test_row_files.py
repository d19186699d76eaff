from __future__ import annotations

from pathlib import Path

from analysis.row_files import find_row_files, sweep_of


def test_finds_rows_from_a_sweep_a_spec_folder_a_root_or_a_glob(real_sweep: Path) -> None:
    expected = sorted(real_sweep.glob("points/*/rank*.csv"))
    assert len(expected) == 6
    for given in (real_sweep, real_sweep.parent, real_sweep.parent.parent, f"{real_sweep.parent}/*"):
        files, problems = find_row_files([given])
        assert files == expected and problems == []


def test_a_rank_files_sweep_is_its_folder_above_points_however_the_path_is_written() -> None:
    """sweep_of's one-split shortcut (issue #36) answers as the general way does."""
    cases = {
        "results/spec/20260101-000000/points/0a1b2c3d4e/rank0.csv": ("results/spec/20260101-000000", True),
        "/abs/results/spec/s1/points/p/rank12.csv": ("/abs/results/spec/s1", True),
        "/s/points/p/rank0.csv": ("/s", True),
        "/points/p/rank0.csv": ("/", True),
        "points/p/rank0.csv": (".", True),
        "a/b/c/d/rank0.csv": ("a/b/c/d", False),
        "copied/rank0.csv": ("copied", False),
        "rank0.csv": (".", False),
    }
    for path, expected in cases.items():
        assert sweep_of(path) == expected, path
