from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_scale_benchmark_runs_on_a_small_set() -> None:
    """benchmarks/analysis_scale.py end to end on 40 points (the real figure is for 10,000)."""
    out = subprocess.run(
        [sys.executable, "benchmarks/analysis_scale.py", "--points", "40", "--repeats", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "40 files, 80 rows" in out.stdout
    assert "plain pandas.concat(read_csv per file):" in out.stdout
    assert "analysis report (read, aggregate, table, render):" in out.stdout


def test_the_scale_benchmark_measures_kept_results_again(tmp_path: Path) -> None:
    """--keep DIR, then --reuse DIR: the same points measured again, not written anew, each
    report's first run a first again (the consolidated files deleted), and --profile's entries
    from a report apart from the timed ones."""
    run = [sys.executable, "benchmarks/analysis_scale.py", "--points", "8", "--repeats", "2"]
    kept = subprocess.run(
        [*run, "--keep", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert kept.returncode == 0, kept.stderr
    again = subprocess.run(
        [*run, "--reuse", str(tmp_path), "--profile"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert "wrote" not in again.stdout and "8 files, 16 rows" in again.stdout
    assert "reusing" in again.stdout and "consolidated files deleted" in again.stdout
    assert "profile of the report (top entries by cumulative time):" in again.stdout
