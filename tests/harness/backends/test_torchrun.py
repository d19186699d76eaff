"""torchrun starts the worker: each rank reads torchrun's variables and writes its rows (gloo
on the CPU here; tests/gpu/test_ddp.py runs the same command over NCCL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.storage.sweep import create_sweep
from harness_schema import layout
from harness_schema import rows as results
from tests.conftest import TINY_WORKLOAD

REPO = Path(__file__).resolve().parents[3]


def torchrun_point(tmp_path: Path, spec: str) -> tuple[Path, list[dict[str, str]]]:
    """The spec's one point run by torchrun's 2 ranks on this machine, as a Slurm job's
    sbatch line does: the point's folder and each rank's first row."""
    plan = expand(parse_spec(spec + "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n"))
    sweep = create_sweep(plan, tmp_path, backend="sbatch", world_size=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SUBMITIT_"))}
    env.update(PYTHONPATH=str(REPO), HARNESS_DIST_TIMEOUT_S="60")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    command += ["-m", "harness.backends.worker", str(sweep), "--index", "0"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    point_path = layout.point_dir(sweep, plan.points[0].id)
    return point_path, [results.read_rows(point_path / f"rank{k}.csv")[0] for k in (0, 1)]


def test_torchrun_runs_a_point_as_its_ranks(tmp_path: Path) -> None:
    point_path, rows = torchrun_point(tmp_path, "name: tr\n" + TINY_WORKLOAD)
    assert [(r["rank"], r["world_size"], r["status"]) for r in rows] == [("0", "2", "ok"), ("1", "2", "ok")]
    metas = [json.loads((point_path / f"meta-rank{k}.json").read_text()) for k in (0, 1)]
    assert [(m["local_rank"], m["local_world_size"]) for m in metas] == [(0, 2), (1, 2)]


def test_torchrun_runs_a_script_point_as_its_ranks(tmp_path: Path) -> None:
    # The script's ranks join through torchrun's rendezvous (its agent's store), as the
    # harness's own ranks do.
    script = REPO / "tests" / "fixtures" / "probe_script.py"
    _, rows = torchrun_point(
        tmp_path, f"name: trs\nworkload: {{script: {script}}}\nmeasure: {{warmup_steps: 1, steps: 2}}\n"
    )
    assert [(r["rank"], r["world_size"], r["status"], r["error"]) for r in rows] == [
        ("0", "2", "ok", ""),
        ("1", "2", "ok", ""),
    ]
