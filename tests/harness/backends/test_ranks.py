"""A rank killed under the local backend (the OOM killer, kill -9) is named on the console and
in its rows, and `status` calls its point failed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from harness.backends.ranks import RankEnd
from harness.backends.status import sweep_status
from harness_schema import layout
from harness_schema import rows as results

REPO = Path(__file__).resolve().parents[3]

KILLED = """\
name: killed
workload:
  dataset: fake_cifar
  dataset_args: {size: 48, image_size: 8, resize: null}
  model: "tests.fixtures.hanging:killed_on_rank"
  model_args: {rank: 1, after: 3}
  batch_size: 4
  device: cpu
rungs: [full]
measure: {warmup_steps: 1, steps: 4, repeats: 2}
slurm: {tasks_per_node: 2, gpus_per_node: 0}
"""


def test_how_a_rank_ended_in_words() -> None:
    assert RankEnd(1, -9, 12.0).cause() == "was killed by SIGKILL (exit -9)"
    assert RankEnd(0, 3, 1.0).cause() == "exited with status 3"


def test_a_rank_killed_under_the_local_backend_is_named_in_the_console_and_the_rows(tmp_path: Path) -> None:
    (tmp_path / "killed.yaml").write_text(KILLED)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "harness", "run", "killed.yaml", "--backend", "local"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, run.stderr
    (sweep,) = (tmp_path / "results" / "killed").iterdir()
    (point,) = (p.name for p in (sweep / "points").iterdir())
    # Repeats run in passes (harness.sweeps.run_points): repeat 0's pass, then, every unit of
    # the point having failed, repeat 1 at once: two jobs, each rank 1 killed and named.
    said = re.findall(
        rf"point {point}: (its job failed: rank 1 was killed by SIGKILL \(exit -9\) after \d+ s in rung full)$",
        run.stderr,
        re.MULTILINE,
    )
    assert len(said) == 2, run.stderr
    rows = results.read_rows(layout.rank_file(sweep / "points" / point, 1))
    assert [(r["rung"], r["repeat"], r["status"], r["error"]) for r in rows] == [
        ("full", "0", "failed", said[0]),
        ("full", "1", "failed", said[1]),
    ]
    (status,) = sweep_status(sweep, {})  # a local sweep: no scheduler to ask
    assert status.progress == "failed"  # not "not run": it ran, and a rank died
