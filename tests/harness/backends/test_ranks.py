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
from harness.config.plan import expand
from harness.config.spec import parse_spec
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


LINGER = """\
name: linger
workload:
  dataset: tests.fixtures.workloads:lingering_dataset
  dataset_args: {{size: 32, linger_s: 600, once: {once}}}
  model: linear
  batch_size: [4, 8, 16]
  device: cpu
measure: {{warmup_steps: 1, steps: 3, repeats: 1}}
rungs: [full]
slurm: {{tasks_per_node: 2, gpus_per_node: 0}}
limits: {{dist_timeout_s: 3}}
"""


def test_a_rank_stuck_in_one_point_costs_that_point_only_the_next_run_in_a_fresh_job(tmp_path: Path) -> None:
    """Rank 1 lingers in user code (its data set's build) at the job's first point, far past
    limits.dist_timeout_s: rank 0's collective gives up there, and the process group is
    broken. Before, each later point of the job waited the timeout again and failed
    (JoinTimeout: rank 1 was still in the first). Now the job ends the stuck rank, the first
    point's rows say why, and the later points are measured in a fresh job."""
    spec = LINGER.format(once=tmp_path / "lingered")
    (tmp_path / "linger.yaml").write_text(spec)
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_DIST_TIMEOUT_S"}
    run = subprocess.run(
        [sys.executable, "-m", "harness", "run", "linger.yaml", "--backend", "local"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,  # rank 1 lingers 600 s: the run ends only if the job ended it
    )
    assert run.returncode == 1, run.stderr
    (sweep,) = (tmp_path / "results" / "linger").iterdir()
    first, *later = [p.id for p in expand(parse_spec(spec)).points]
    rows = {
        (point, rank): [
            (r["status"], r["error"])
            for r in results.read_rows(layout.rank_file(sweep / "points" / point, rank))
        ]
        for point in (first, *later)
        for rank in (0, 1)
    }
    assert rows[first, 0] == [
        (
            "failed",
            "CollectiveTimeout: rank 0 waited 3 s in DDP's set-up (its weights' broadcast) for rank 1, and gave up: "
            "a rank that failed, left the loop or lingers (limits.dist_timeout_s in the spec sets the wait)",
        )
    ]
    ((status, error),) = rows[first, 1]
    assert status == "failed"
    assert re.fullmatch(
        r"its job ended rank 1 in rung full after \d+ s, stuck or lingering there: rank 0's process group "
        r"broke \(CollectiveTimeout: rank 0 waited 3 s .*\)",
        error,
    )
    assert error in run.stderr
    for point in later:  # measured: no JoinTimeout waited for a rank still in the first point
        assert rows[point, 0] == rows[point, 1] == [("ok", "")], rows
    assert "2 point(s) left run in a fresh job (new ranks, a new process group)" in run.stderr
