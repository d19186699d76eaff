"""DDP over NCCL: the local backend's ranks on every visible GPU, torchrun, and the binding of
each rank to its own GPU (set_device and device_id before the process group).

Ranks on distinct GPUs need two GPUs at least: on one, those tests skip, saying so. What one GPU
proves: two ranks are refused before NCCL is reached (by the local backend, and by torchrun's
ranks themselves), a rank binds the one GPU it was given, and NCCL starts, runs DDP and is torn
down (and started again, as the next point of a job does) with a world of one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from harness.backends.local import LocalBackendError, run_local
from harness.config.plan import Plan, expand
from harness.config.spec import load_spec
from harness.execution.dist import DistEnv, destroy_process_group, init_process_group, process_group_arguments
from harness.execution.train_step import TrainStep
from harness.storage.sweep import create_sweep
from harness.workloads.models import toy_conv
from harness_schema import layout
from harness_schema import rows as results

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]


def at_least_two_gpus() -> int:
    gpus = torch.cuda.device_count()
    if gpus < 2:
        pytest.skip(
            f"needs 2 GPUs (one rank per GPU, NCCL between them); this machine shows {gpus}: "
            "on one GPU, the tests below prove what one can"
        )
    return gpus


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
    gpus = at_least_two_gpus()
    plan = one_point_plan(gpu_spec, gpus)
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=gpus)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    assert_one_gpu_per_rank(ranks_of(sweep, plan, gpus))


def test_torchrun_starts_the_worker_on_every_visible_gpu(
    gpu_spec: Callable[..., Path], tmp_path: Path
) -> None:
    gpus = at_least_two_gpus()
    plan = one_point_plan(gpu_spec, gpus)
    sweep = create_sweep(plan, tmp_path / "results", backend="sbatch", world_size=gpus)
    out = torchrun_worker(sweep, gpus)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_one_gpu_per_rank(ranks_of(sweep, plan, gpus))


def torchrun_worker(sweep: Path, ranks: int, **environ: str | None) -> subprocess.CompletedProcess[str]:
    """torchrun starting `ranks` ranks of the sweep's point 0 (`environ`: variables to set, or
    to remove where None)."""
    env = {**os.environ, "HARNESS_DIST_TIMEOUT_S": "120", "PYTHONPATH": str(REPO)}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SUBMITIT_EXECUTOR"):
        env.pop(name, None)
    for name, value in environ.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    command += ["-m", "harness.backends.worker", str(sweep), "--index", "0"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gpus_on_the_machine() -> int:
    """Every GPU of the machine, whatever CUDA_VISIBLE_DEVICES hides (NVML's count)."""
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    pynvml.nvmlInit()
    return int(pynvml.nvmlDeviceGetCount())


# -- what one GPU proves -----------------------------------------------------------------------


def test_two_ranks_on_one_gpu_are_refused_before_anything_runs(
    gpu_spec: Callable[..., Path], tmp_path: Path
) -> None:
    """The local backend checks the spec's ranks against its GPUs before a task starts."""
    plan = expand(load_spec(gpu_spec("slurm: {gpus_per_node: 1, tasks_per_node: 2}\n")))
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    with pytest.raises(
        LocalBackendError,
        match=r"^slurm.tasks_per_node is 2, but slurm.gpus_per_node is 1: NCCL needs a GPU of its own "
        r"for every rank; set slurm.tasks_per_node to 1 or fewer$",
    ):
        run_local(plan.points, sweep, plan.spec.slurm)
    assert not list(sweep.glob("points/*/rank*.csv"))  # no task ran


def test_torchruns_two_ranks_on_one_gpu_refuse_before_nccl(
    gpu_spec: Callable[..., Path], tmp_path: Path
) -> None:
    """torchrun --nproc-per-node 2 where each rank sees the same single GPU: NCCL would fail at
    DDP set-up (two ranks on one GPU) or hang; every rank refuses first, in its rows."""
    if gpus_on_the_machine() != 1:
        pytest.skip("the machine has more than one GPU: unsetting CUDA_VISIBLE_DEVICES would show them all")
    plan = one_point_plan(gpu_spec, 1)
    sweep = create_sweep(plan, tmp_path / "results", backend="sbatch", world_size=2)
    # Unset: the ranks share the machine's one GPU. (Set to one GPU, each rank would take it
    # for its own, as Slurm's --gpus-per-task gives one to each task: see gpu_index.)
    out = torchrun_worker(sweep, 2, CUDA_VISIBLE_DEVICES=None)
    assert out.returncode != 0
    point_path = layout.point_dir(sweep, plan.points[0].id)
    for k in (0, 1):
        (row,) = results.read_rows(point_path / f"rank{k}.csv")
        assert row["status"] == "failed"
        assert row["error"].startswith(
            "DeviceError: 2 ranks on this node but 1 GPU(s) visible to each (CUDA_VISIBLE_DEVICES=unset): "
            "NCCL needs a GPU of its own for every rank"
        ), row["error"]


def test_a_rank_given_one_gpu_binds_it_whatever_its_local_rank(
    cuda0: torch.device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slurm's --gpus-per-task (or submitit's export) shows each rank its own GPU as device 0
    (CUDA_VISIBLE_DEVICES set to it): local rank 1 of 2 must take device 0, not device 1, which
    does not exist in its process."""
    if torch.cuda.device_count() != 1:
        pytest.skip("needs a process that sees exactly one GPU")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", "0"))
    init_process_group(DistEnv(local_rank=1, local_world_size=2), "cuda")  # one rank: no group
    assert torch.cuda.current_device() == 0
    assert torch.ones(1, device="cuda").device == cuda0  # "cuda" is now the rank's own GPU
    assert not dist.is_initialized()


def test_nccl_starts_runs_ddp_and_is_torn_down_with_a_world_of_one(
    cuda0: torch.device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process group as the harness asks for it (NCCL, the rank's GPU as device_id: the
    communicator is made at once, so a broken NCCL fails here), DDP's gradient all-reduce in
    real steps, then the teardown a job does after its point: complete, since a second group can
    then be made in the same process."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    torch.cuda.set_device(cuda0)
    for _ in range(2):
        monkeypatch.setenv("MASTER_PORT", str(unused_port()))  # the first group's store may linger
        dist.init_process_group(**process_group_arguments(DistEnv(world_size=1), cuda0))
        try:
            assert dist.is_initialized() and dist.get_backend() == "nccl"
            group = dist.distributed_c10d._get_default_group()
            assert getattr(group, "bound_device_id", cuda0) == cuda0  # eager: bound to this GPU
            step = TrainStep(
                toy_conv(num_classes=10, width=8, depth=2), cuda0, non_blocking=True, distributed=True
            )
            before = [p.detach().clone() for p in step.model.parameters()]
            for _ in range(3):
                step((torch.randn(8, 3, 32, 32).pin_memory(), torch.randint(0, 10, (8,)).pin_memory()))
            torch.cuda.synchronize()
            assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
            total = torch.arange(4.0, device=cuda0)
            dist.all_reduce(total)  # a world of one: the sum is the tensor itself, on the device
            assert total.tolist() == [0.0, 1.0, 2.0, 3.0]
        finally:
            destroy_process_group()  # the harness's teardown, after every point
        assert not dist.is_initialized()
