"""DDP over NCCL: the local backend's ranks on every visible GPU, torchrun, and the binding of
each rank to its own GPU (set_device and device_id before the process group)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from harness.backends.local import run_local
from harness.config.plan import Plan, expand
from harness.config.spec import load_spec
from harness.execution.dist import DistEnv, process_group_arguments
from harness.execution.train_step import TrainStep
from harness.storage import layout
from harness.storage import rows as results
from harness.storage.sweep import create_sweep
from harness.workloads.models import toy_conv

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]


def one_point_plan(gpu_spec: Callable[..., Path], gpus: int) -> Plan:
    shown = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if any(not e.strip().isdigit() for e in shown.split(",") if e.strip()):
        pytest.skip(f"CUDA_VISIBLE_DEVICES={shown!r} names GPUs by UUID; the local backend passes indices")
    return expand(load_spec(gpu_spec(f"slurm: {{gpus_per_node: {gpus}, tasks_per_node: {gpus}}}\n")))


def ranks_of(sweep: Path, plan: Plan, world: int) -> list[tuple[dict[str, str], dict[str, object]]]:
    """(first row, meta) of every rank of the plan's one point."""
    point_path = layout.point_dir(sweep, plan.points[0].id)
    return [
        (
            results.read_rows(point_path / f"rank{k}.csv")[0],
            json.loads((point_path / f"meta-rank{k}.json").read_text()),
        )
        for k in range(world)
    ]


def assert_one_gpu_per_rank(ranks: list[tuple[dict[str, str], dict[str, object]]]) -> None:
    for k, (row, meta) in enumerate(ranks):
        assert row["status"] == "ok", row["error"]
        assert row["device"] == f"cuda:{k}" and meta["cuda_current_device"] == k
    uuids = [meta["gpu_uuid"] for _, meta in ranks]
    assert all(uuids) and len(set(uuids)) == len(uuids)  # no two ranks on one GPU


def test_local_backend_runs_a_rank_on_every_visible_gpu(
    gpu_spec: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_DIST_TIMEOUT_S", "120")
    gpus = torch.cuda.device_count()
    plan = one_point_plan(gpu_spec, gpus)
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=gpus)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    assert_one_gpu_per_rank(ranks_of(sweep, plan, gpus))


def test_torchrun_starts_the_worker_on_every_visible_gpu(
    gpu_spec: Callable[..., Path], tmp_path: Path
) -> None:
    gpus = torch.cuda.device_count()
    plan = one_point_plan(gpu_spec, gpus)
    sweep = create_sweep(plan, tmp_path / "results", backend="sbatch", world_size=gpus)
    env = {**os.environ, "HARNESS_DIST_TIMEOUT_S": "120", "PYTHONPATH": str(REPO)}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SUBMITIT_EXECUTOR"):
        env.pop(name, None)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}"]
    command += ["-m", "harness.backends.worker", str(sweep), "--index", "0"]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_one_gpu_per_rank(ranks_of(sweep, plan, gpus))


def test_nccl_and_ddp_on_this_gpu(
    cuda0: torch.device, free_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process group as init_process_group makes it (NCCL, device_id bound), with one rank."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port))
    torch.cuda.set_device(cuda0)
    dist.init_process_group(**process_group_arguments(DistEnv(world_size=1), cuda0))
    try:
        assert dist.get_backend() == "nccl"
        step = TrainStep(
            toy_conv(num_classes=10, width=8, depth=2), cuda0, non_blocking=True, distributed=True
        )
        for _ in range(3):
            step((torch.randn(8, 3, 32, 32).pin_memory(), torch.randint(0, 10, (8,)).pin_memory()))
        total = torch.ones(1, device=cuda0)
        dist.all_reduce(total)
        assert total.item() == 1
    finally:
        dist.destroy_process_group()
