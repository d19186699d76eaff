from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from analysis.load import find_row_files, load_results

REPO = Path(__file__).resolve().parents[2]


def test_finds_rows_from_a_sweep_a_spec_folder_a_root_or_a_glob(real_sweep: Path) -> None:
    expected = sorted(real_sweep.glob("points/*/rank*.csv"))
    assert len(expected) == 6
    for given in (real_sweep, real_sweep.parent, real_sweep.parent.parent, f"{real_sweep.parent}/*"):
        files, problems = find_row_files([given])
        assert files == expected and problems == []


def test_types_are_restored(real_sweep: Path) -> None:
    rows = load_results([real_sweep]).rows
    assert rows["num_workers"].dtype.kind in "if"
    assert set(rows["pin_memory"]) == {False}
    assert rows.loc[rows["num_workers"] == 0, "prefetch_factor"].isna().all()


def test_an_unreadable_file_is_reported_and_skipped(real_sweep: Path, tmp_path: Path) -> None:
    bad = tmp_path / "points" / "x" / "rank0.csv"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\xff\xfe\x00garbage")
    loaded = load_results([real_sweep, tmp_path])
    assert len(loaded.rows) == 6
    assert len(loaded.problems) == 1 and loaded.problems[0].startswith(f"{bad}: ")


def test_the_report_runs_without_torch(real_sweep: Path) -> None:
    """A login node has no torch: block its import and print the table."""
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['torchvision'] = None\n"
        "from analysis.__main__ import main\n"
        f"sys.exit(main([{str(real_sweep)!r}]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("node node-a\njobid")
