"""The README's own-workload example runs as written (a front door that lies is a defect)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_own_workload_example_runs(tmp_path: Path) -> None:
    text = README.read_text()
    module = re.search(r"```python\n# mypipeline.py\n(.*?)```", text, re.S)
    spec = re.search(r"```yaml\n# jobs/spectra.yaml\n(.*?)```", text, re.S)
    assert module and spec, "the README shows mypipeline.py and jobs/spectra.yaml"
    (tmp_path / "mypipeline.py").write_text(module.group(1))
    (tmp_path / "spectra.yaml").write_text(spec.group(1) + "measure: {warmup_steps: 1, steps: 2}\n")
    out = subprocess.run(
        [sys.executable, "-m", "harness", "run", "spectra.yaml"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    table = out.stdout.split("\n\n")[0].splitlines()
    assert len(table) == 3 + 2  # title, header, rule, num_workers 0 and 2


def _section(title: str) -> str:
    """A `## ` section of the README, its lines joined by spaces."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    return " ".join(text[start : text.index("\n## ", start + 1)].split())


def test_the_readme_says_in_which_order_repeats_run() -> None:
    """Here, passes of one repeat of each point (tests/harness/test_sweeps.py reads that order
    from the rows); on Slurm, a task's repeats back to back, and why."""
    measured = _section("What is measured")
    assert "in passes of one repeat each: A0 B0 C0, A1 B1 C1, ... (not A0 A1 A2 B0 ...)" in measured
    assert "measures each missing unit once, still in passes" in measured
    assert "A task runs its point's repeats back to back" in _section("On Slurm")
