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
