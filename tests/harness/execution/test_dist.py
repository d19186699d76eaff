"""The rank's environment (torchrun, Slurm, submitit) and its GPU binding, through fakes: there
is no GPU here, so torch.cuda and torch.distributed are replaced by recorders."""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed

from harness.execution import device, dist
from harness.execution.device import DeviceError, choose_device
from harness.execution.dist import DistEnv, init_process_group, process_group_arguments, rank_environment

TORCHRUN = {
    "RANK": "5",
    "WORLD_SIZE": "8",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "4",
    "GROUP_RANK": "1",
    "MASTER_ADDR": "node-a",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "abc",
}


LOCAL_JOB = {
    "SUBMITIT_EXECUTOR": "local",
    "SUBMITIT_LOCAL_JOB_ID": "4242",
    "SUBMITIT_LOCAL_NTASKS": "2",
    "SUBMITIT_LOCAL_JOB_NUM_NODES": "1",
    "SUBMITIT_LOCAL_NODEID": "0",
    "SUBMITIT_LOCAL_GLOBALID": "0",
    "SUBMITIT_LOCAL_LOCALID": "0",
}


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No launcher's variables from the shell running the tests, and none left behind by them.

    The code under test sets variables itself (submitit's export sets RANK, WORLD_SIZE,
    MASTER_PORT...; init_process_group sets NCCL's). Each is set then deleted here, so that
    monkeypatch restores the shell's value, or its absence, after the test: a WORLD_SIZE=2 left
    behind made every later in-process point wait 300 s for a second rank (CI did)."""
    for key in list(os.environ):
        if key.startswith(("SLURM_", "SUBMITIT_", "TORCHELASTIC_")):
            monkeypatch.delenv(key)
    exported = (*dist.TORCHRUN_VARIABLES, "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES")
    for key in (*exported, "TORCH_NCCL_ASYNC_ERROR_HANDLING"):
        monkeypatch.setenv(key, "unset")
        monkeypatch.delenv(key)


class FakeGpus:
    """torch.cuda with `count` GPUs, and a torch.distributed that records what it is asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
        self.calls: list[tuple[str, Any]] = []
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "set_device", lambda d: self.calls.append(("set_device", d)))
        monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
        monkeypatch.setattr(torch.distributed, "init_process_group", self.init_process_group)
        monkeypatch.setattr(device, "_said_idle_gpus", False)

    def init_process_group(
        self,
        backend: str | None = None,
        init_method: str | None = None,
        timeout: timedelta | None = None,
        world_size: int = -1,
        rank: int = -1,
        device_id: torch.device | int | None = None,
    ) -> None:
        self.calls.append(
            (
                "init_process_group",
                dict(backend=backend, rank=rank, world_size=world_size, device_id=device_id),
            )
        )


# -- where the ranks come from -------------------------------------------------------------------


def test_torchrun_variables_give_the_ranks() -> None:
    env = DistEnv.from_environ({**TORCHRUN, "SLURMD_NODENAME": "n7"})
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (5, 8, 1, 4)
    assert (env.master_addr, env.master_port, env.hostname) == ("node-a", 29500, "n7")


def test_slurm_tasks_on_this_node_from_its_compact_list() -> None:
    e = {"SLURM_PROCID": "6", "SLURM_NTASKS": "7", "SLURM_LOCALID": "0", "SLURM_TASKS_PER_NODE": "2(x3),1"}
    assert DistEnv.from_environ({**e, "SLURM_NODEID": "3"}).local_world_size == 1
    assert DistEnv.from_environ({**e, "SLURM_NODEID": "1"}).local_world_size == 2
    assert DistEnv.from_environ({**e, "SLURM_TASKS_PER_NODE": "garbled"}).local_world_size is None


def test_a_rank_started_by_torchrun_takes_torchrun_ranks_not_slurms(
    monkeypatch: pytest.MonkeyPatch, clean_environ: None
) -> None:
    # torchrun inside one srun task: Slurm says one task, torchrun's ranks are the real ones.
    for key, value in {**TORCHRUN, "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_JOB_ID": "9"}.items():
        monkeypatch.setenv(key, value)
    env = rank_environment()
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (5, 8, 1, 4)


def test_a_job_submitted_from_a_torchrun_shell_ignores_the_inherited_ranks(
    monkeypatch: pytest.MonkeyPatch, clean_environ: None, caplog: pytest.LogCaptureFixture
) -> None:
    second_rank = {"SUBMITIT_LOCAL_GLOBALID": "1", "SUBMITIT_LOCAL_LOCALID": "1"}
    for key, value in {**TORCHRUN, **LOCAL_JOB, **second_rank}.items():
        monkeypatch.setenv(key, value)
    env = rank_environment()  # submitit's export would raise "RANK is already set"
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (1, 2, 1, 2)
    assert os.environ["RANK"] == "1" and os.environ["WORLD_SIZE"] == "2"
    assert env.master_addr != "node-a"  # the job's own first host
    assert (
        "ignoring RANK=5, WORLD_SIZE=8, LOCAL_RANK=1, LOCAL_WORLD_SIZE=4, MASTER_PORT=29500 inherited"
        in caplog.text
    )
    assert env.master_port == dist.job_port("4242")


def test_a_jobs_rendezvous_port_is_its_own_and_outside_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch, clean_environ: None
) -> None:
    """Every rank derives the port from the job id; an outgoing connection of the node cannot
    hold it (the EADDRINUSE that submitit's 20000-60000 draw met in CI)."""
    for key, value in LOCAL_JOB.items():
        monkeypatch.setenv(key, value)
    env = rank_environment()
    assert env.master_port == dist.job_port("4242") == int(os.environ["MASTER_PORT"])
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(ephemeral.read_text().split()[0]) if ephemeral.exists() else 32768
    assert 20000 <= env.master_port < min(low, 32768)
    assert len({dist.job_port(f"294_{task}") for task in range(8)}) == 8  # an array's tasks differ


def test_a_port_inherited_from_the_submitting_shell_is_not_the_jobs(
    monkeypatch: pytest.MonkeyPatch, clean_environ: None, caplog: pytest.LogCaptureFixture
) -> None:
    """sbatch exports the submitting shell's MASTER_PORT to every task of the array: two tasks
    sharing a node would both listen on it (the Slurm tests' jobs hung on one)."""
    for key, value in {**LOCAL_JOB, "MASTER_PORT": "23456"}.items():
        monkeypatch.setenv(key, value)
    assert rank_environment().master_port == dist.job_port("4242")
    assert "ignoring MASTER_PORT=23456 inherited from the shell that submitted this job" in caplog.text


def test_no_launcher_is_one_rank(clean_environ: None) -> None:
    env = rank_environment()
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (0, 1, 0, 1)


# -- the rank's GPU ------------------------------------------------------------------------------


def test_each_rank_binds_its_gpu_before_joining_nccl(
    monkeypatch: pytest.MonkeyPatch, clean_environ: None
) -> None:
    gpus = FakeGpus(monkeypatch, count=4)
    env = DistEnv(rank=5, world_size=8, local_rank=1, local_world_size=4, master_addr="a", master_port=1)
    init_process_group(env, "cuda")
    cuda1 = torch.device("cuda", 1)
    assert gpus.calls == [
        ("set_device", cuda1),
        ("init_process_group", dict(backend="nccl", rank=5, world_size=8, device_id=cuda1)),
    ]
    assert choose_device("cuda", local_rank=1, local_world_size=4) == cuda1
    # A failing rank must let the others record their failed rungs, not be killed by NCCL.
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "2"


def test_a_single_gpu_rank_is_bound_too(monkeypatch: pytest.MonkeyPatch, clean_environ: None) -> None:
    gpus = FakeGpus(monkeypatch, count=1)
    init_process_group(DistEnv(), torch.device("cuda", 0))
    assert gpus.calls == [("set_device", torch.device("cuda", 0))]  # no process group for one rank


def test_more_ranks_than_gpus_is_refused_on_every_rank_before_nccl(
    monkeypatch: pytest.MonkeyPatch, clean_environ: None
) -> None:
    gpus = FakeGpus(monkeypatch, count=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    for local_rank in (0, 3):  # rank 0 has a GPU, but its peers do not: it must not wait for them
        env = DistEnv(rank=local_rank, world_size=4, local_rank=local_rank, local_world_size=4)
        with pytest.raises(
            DeviceError,
            match=r"^4 ranks on this node but 2 GPU\(s\) visible to each \(CUDA_VISIBLE_DEVICES='0,1'\): "
            r"NCCL needs a GPU of its own for every rank; run at most 2 rank\(s\) per node "
            r"\(slurm.tasks_per_node, or torchrun's --nproc-per-node\) or give it more GPUs \(slurm.gpus_per_node\)$",
        ):
            init_process_group(env, "cuda")
    assert gpus.calls == []


def test_two_ranks_on_a_one_gpu_machine_are_refused(
    monkeypatch: pytest.MonkeyPatch, clean_environ: None
) -> None:
    FakeGpus(monkeypatch, count=1)
    with pytest.raises(
        DeviceError,
        match=r"^2 ranks on this node but 1 GPU\(s\) visible to each \(CUDA_VISIBLE_DEVICES=unset\)",
    ):
        init_process_group(DistEnv(world_size=2, local_rank=0, local_world_size=2), "cuda")


def test_a_rank_given_its_own_gpu_takes_it(monkeypatch: pytest.MonkeyPatch, clean_environ: None) -> None:
    # Slurm's --gpus-per-task=1 (or submitit's export): each task sees one GPU, its own.
    gpus = FakeGpus(monkeypatch, count=1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    env = DistEnv(rank=3, world_size=4, local_rank=3, local_world_size=4)
    init_process_group(env, "cuda")
    assert gpus.calls[0] == ("set_device", torch.device("cuda", 0))
    assert gpus.calls[1][1]["device_id"] == torch.device("cuda", 0)


def test_fewer_ranks_than_gpus_names_the_idle_ones_once(
    monkeypatch: pytest.MonkeyPatch, clean_environ: None, caplog: pytest.LogCaptureFixture
) -> None:
    FakeGpus(monkeypatch, count=4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    for local_rank in (0, 1):
        init_process_group(DistEnv(local_rank=local_rank, local_world_size=2), "cuda")
    init_process_group(DistEnv(local_rank=0, local_world_size=2), "cuda")  # the next point
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "2 of 4 visible GPUs stay idle: cuda:2, cuda:3 (CUDA_VISIBLE_DEVICES entries 6, 7); this node "
        "runs 2 rank(s): set slurm.tasks_per_node (or torchrun's --nproc-per-node) to 4 for one rank per GPU"
    ]


def test_cpu_ranks_join_gloo_without_a_device(monkeypatch: pytest.MonkeyPatch, clean_environ: None) -> None:
    gpus = FakeGpus(monkeypatch, count=2)
    init_process_group(DistEnv(rank=1, world_size=2, local_rank=1, local_world_size=2), "cpu")
    assert gpus.calls == [("init_process_group", dict(backend="gloo", rank=1, world_size=2, device_id=None))]


def test_device_id_only_where_torch_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def old_init(backend: str, init_method: str, timeout: timedelta, world_size: int, rank: int) -> None:
        """torch < 2.3's signature: no device_id."""

    monkeypatch.setattr(torch.distributed, "init_process_group", old_init)
    monkeypatch.setenv("HARNESS_DIST_TIMEOUT_S", "60")
    arguments = process_group_arguments(DistEnv(world_size=2), torch.device("cuda", 1))
    assert arguments == dict(
        backend="nccl", init_method="env://", rank=0, world_size=2, timeout=timedelta(seconds=60)
    )


def test_each_point_of_a_pass_job_meets_on_a_port_of_its_own() -> None:
    """A group destroyed and made again on the same port in the same ranks did not meet (gloo's
    connectFullMesh timed out on every point of a local pass but the first): each point of a
    PassJob gets the job's port moved by its place, inside JOB_PORTS, the same on every rank."""
    from harness.execution.dist import JOB_PORTS, point_port

    assert [point_port(20010, n) for n in range(3)] == [20010, 20011, 20012]
    assert point_port(JOB_PORTS.stop - 1, 1) == JOB_PORTS.start  # wraps, never past the range
    assert len({point_port(31000, n) for n in range(50)}) == 50
