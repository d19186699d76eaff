from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.backends.local import LocalBackendError, local_gpus, run_local
from harness.config.plan import Point, expand
from harness.config.spec import SlurmConfig, parse_spec
from harness.storage.sweep import create_sweep, latest_jobs
from harness_schema import layout
from harness_schema import rows as results
from tests.conftest import TINY_WORKLOAD


def test_two_local_tasks_run_a_point_as_two_ddp_ranks(tmp_path: Path) -> None:
    spec = parse_spec("name: local\n" + TINY_WORKLOAD + "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n")
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path, backend="local", world_size=2)
    assert run_local(plan.points, sweep, spec.slurm) == []
    (point,) = plan.points
    point_path = layout.point_dir(sweep, point.id)
    assert results.point_complete(point_path, ["full"], 1, world_size=2)
    rows = [results.read_rows(point_path / f"rank{k}.csv")[0] for k in (0, 1)]
    assert [(r["rank"], r["world_size"], r["status"]) for r in rows] == [("0", "2", "ok"), ("1", "2", "ok")]
    assert point.id in latest_jobs(sweep)
    # submitit's logs stay in the sweep folder
    assert list((sweep / "local").glob("*/*_log.out"))


def spec_for(device: str, slurm: str) -> tuple[list[Point], SlurmConfig]:
    spec = parse_spec("name: local\n" + TINY_WORKLOAD.replace("device: cpu", f"device: {device}") + slurm)
    return list(expand(spec).points), spec.slurm


def fake_gpus(monkeypatch: pytest.MonkeyPatch, count: int, shown: str | None = None) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    if shown is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", shown)


def test_local_tasks_get_the_gpus_and_not_the_shells_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A workstation with 4 GPUs of which this shell may use 2 and 3, inside a torchrun shell.
    fake_gpus(monkeypatch, 4, shown="2,3")
    for key, value in {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "3",
        "MASTER_ADDR": "elsewhere",
        "MASTER_PORT": "1",
        "TORCHELASTIC_RUN_ID": "x",
    }.items():
        monkeypatch.setenv(key, value)
    slurm = "slurm: {tasks_per_node: 2, gpus_per_node: 2}\n"
    plan = expand(parse_spec("name: local\n" + TINY_WORKLOAD.replace("device: cpu", "device: auto") + slurm))
    sweep = create_sweep(plan, tmp_path, backend="local", world_size=2)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    point_path = layout.point_dir(sweep, plan.points[0].id)
    metas = [json.loads((point_path / f"meta-rank{k}.json").read_text()) for k in (0, 1)]
    # Both tasks see the two GPUs (no GPU really is here, so they run on the CPU).
    assert [m["cuda_visible_devices"] for m in metas] == ["2,3", "2,3"]
    assert [(m["rank"], m["world_size"], m["local_world_size"]) for m in metas] == [(0, 2, 2), (1, 2, 2)]
    rows = [results.read_rows(point_path / f"rank{k}.csv")[0]["status"] for k in (0, 1)]
    assert rows == ["ok", "ok"]


def test_gpus_given_to_the_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpus(monkeypatch, 4)
    assert local_gpus(*spec_for("cuda", "slurm: {gpus_per_node: 4}\n")) == (0, 1, 2, 3)
    assert local_gpus(*spec_for("auto", "slurm: {gpus_per_node: 2, tasks_per_node: 1}\n")) == (0, 1)
    assert local_gpus(*spec_for("cpu", "slurm: {gpus_per_node: 4}\n")) == ()  # a CPU point hides them
    fake_gpus(monkeypatch, 0)
    assert local_gpus(*spec_for("auto", "slurm: {gpus_per_node: 1}\n")) == ()  # auto: the CPU


@pytest.mark.parametrize(
    ("count", "device", "slurm", "message"),
    [
        (
            2,
            "cuda",
            "slurm: {gpus_per_node: 0, tasks_per_node: 1}\n",
            r"^device cuda, but slurm.gpus_per_node is 0: the local backend gives its tasks the GPUs "
            r"slurm.gpus_per_node asks for \(all others are hidden from them\)$",
        ),
        (
            0,
            "cuda",
            "slurm: {gpus_per_node: 1}\n",
            r"^device cuda, but no GPU is visible here \(CUDA_VISIBLE_DEVICES unset\)$",
        ),
        (
            2,
            "auto",
            "slurm: {gpus_per_node: 8}\n",
            r"^slurm.gpus_per_node is 8, but 2 GPU\(s\) are visible here \(CUDA_VISIBLE_DEVICES unset\); "
            r"set slurm.gpus_per_node to 2 or fewer$",
        ),
        (
            2,
            "cuda",
            "slurm: {gpus_per_node: 1, tasks_per_node: 2}\n",
            r"^slurm.tasks_per_node is 2, but slurm.gpus_per_node is 1: NCCL needs a GPU of its own for "
            r"every rank; set slurm.tasks_per_node to 1 or fewer$",
        ),
    ],
)
def test_what_the_machine_cannot_give_is_refused_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, count: int, device: str, slurm: str, message: str
) -> None:
    fake_gpus(monkeypatch, count)
    with pytest.raises(LocalBackendError, match=message):
        local_gpus(*spec_for(device, slurm))


def test_gpus_named_by_uuid_cannot_be_passed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpus(monkeypatch, 1, shown="GPU-a1a1a1a1-0000-1111-2222-333333333333")
    with pytest.raises(
        LocalBackendError,
        match=r"^CUDA_VISIBLE_DEVICES='GPU-a1a1a1a1-0000-1111-2222-333333333333' names GPUs by UUID; "
        r"the local backend can pass GPUs to its tasks by index only \(submitit's visible_gpus\): "
        r"use indices, or unset it$",
    ):
        local_gpus(*spec_for("cuda", "slurm: {gpus_per_node: 1}\n"))


def test_a_pass_of_two_ddp_points_runs_in_one_job_the_ranks_started_once(tmp_path: Path) -> None:
    """Two points of two ranks, two repeats, in passes (ABAB): one job a pass, not a job a
    point a pass (each start-up imports torch and builds the workload on every rank), the
    second point joining its own process group in the ranks the first one left. Every row is
    ok and says its pass."""
    from harness.backends.local import LocalBackend
    from harness.storage.sweep import load_points
    from harness.sweeps import run_points

    spec = parse_spec(
        "name: local\n"
        + TINY_WORKLOAD.replace("repeats: 1", "repeats: 2")
        + "loader: {num_workers: 0, drop_last: [false, true]}\n"
        + "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n"
    )
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path, backend="local", world_size=2)
    run_points(LocalBackend(spec), plan.points, sweep)
    jobs = json.loads((sweep / "jobs.json").read_text())
    assert [(e["point_index"], e["job_id"]) for e in jobs] == [
        (0, jobs[0]["job_id"]),
        (1, jobs[0]["job_id"]),
        (0, jobs[2]["job_id"]),
        (1, jobs[2]["job_id"]),
    ]
    assert jobs[0]["job_id"] != jobs[2]["job_id"]
    for point in load_points(sweep):
        for rank in (0, 1):
            rows = results.read_rows(layout.point_dir(sweep, point.id) / f"rank{rank}.csv")
            assert [(r["repeat"], r["run_pass"], r["status"]) for r in rows] == [
                ("0", "0", "ok"),
                ("1", "1", "ok"),
            ]


def test_points_of_a_pass_run_one_job_per_run_of_one_size_in_the_pass_order() -> None:
    """An array, local or Slurm, has one size: a pass A1 B1 C2 A1 runs three jobs, in order."""
    from harness.backends.local import _by_size, emulated

    plan = expand(parse_spec("name: t\n" + TINY_WORKLOAD + "slurm: {nodes: [1, 2], gpus_per_node: 0}\n"))
    one, two = plan.points
    runs = _by_size([one, two, one], plan.spec.slurm)
    assert [(s.nodes, [p.id for p in group]) for s, group in runs] == [
        (1, [one.id]),
        (2, [two.id]),
        (1, [one.id]),
    ]
    cfg = emulated(plan.spec.slurm.at(two.scale))
    assert (cfg.nodes, cfg.tasks_per_node, cfg.gpus_per_node) == (1, 2, 0)  # 2 nodes' ranks, here
