"""Two real ranks (gloo, local processes), one lingering before a collective: the other says
whom it waits for while it waits, and names the timeout's setting when it gives up."""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import socket
import time
from datetime import timedelta
from pathlib import Path

import pytest

from harness.backends.local import run_local
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import waiting
from harness.execution.dist import (
    TIMEOUT_VARIABLE,
    DistEnv,
    barrier,
    init_process_group,
    process_group_arguments,
)
from harness.storage.sweep import create_sweep
from harness_schema import rows as results
from tests.conftest import TINY_WORKLOAD


def _rank(rank: int, port: int, linger_s: float, timeout_s: float, out: str) -> None:
    """One rank: join the group, linger (rank 1), pass a barrier; its log and outcome in `out`."""
    os.environ.pop(TIMEOUT_VARIABLE, None)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    logging.basicConfig(filename=f"{out}/log-rank{rank}", level=logging.INFO, format="%(message)s")
    waiting.WAIT_LINE_S, waiting.PUBLISH_S = 1.0, 0.3
    env = DistEnv(rank=rank, world_size=2)
    init_process_group(env, "cpu", timeout_s)
    if rank == 1:
        time.sleep(linger_s)
    try:
        barrier(env)()
        outcome = "ok"
    except Exception as e:
        outcome = f"{type(e).__name__}: {e}"
    Path(out, f"outcome-rank{rank}").write_text(outcome)
    os._exit(0)  # no teardown: rank 0 hosts the store, and a peer may be gone


def _two_ranks(tmp_path: Path, linger_s: float, timeout_s: float) -> tuple[list[str], str]:
    """Rank 0's log lines and its outcome."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spawn = multiprocessing.get_context("spawn")
    ranks = [spawn.Process(target=_rank, args=(k, port, linger_s, timeout_s, str(tmp_path))) for k in (0, 1)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=120)
        if p.is_alive():
            p.kill()
    lines = (tmp_path / "log-rank0").read_text().splitlines()
    return lines, (tmp_path / "outcome-rank0").read_text()


def test_a_rank_waiting_for_a_lingering_one_says_for_whom(tmp_path: Path) -> None:
    lines, outcome = _two_ranks(tmp_path, linger_s=3.5, timeout_s=60)
    assert outcome == "ok"
    said = [line for line in lines if line.startswith("rank 0 has waited")]
    assert said, lines
    assert all(
        re.fullmatch(r"rank 0 has waited \d+ s in the barrier before a window for rank 1", x) for x in said
    )


def test_a_collective_that_times_out_names_whom_it_waited_for_and_the_setting(tmp_path: Path) -> None:
    lines, outcome = _two_ranks(tmp_path, linger_s=8, timeout_s=2)
    assert outcome == (
        "CollectiveTimeout: rank 0 waited 2 s in the barrier before a window for rank 1, and gave up: "
        "a rank that failed, left the loop or lingers (limits.dist_timeout_s in the spec sets the wait)"
    )
    assert any(
        re.fullmatch(r"rank 0 has waited \d+ s in the barrier before a window for rank 1", x) for x in lines
    )


def test_the_spec_sets_the_collective_timeout_and_the_variable_overrides_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    spec = parse_spec("name: t\n" + TINY_WORKLOAD + "limits: {dist_timeout_s: 45}\n")
    (point,) = expand(spec).points
    arguments = process_group_arguments(DistEnv(world_size=2), "cpu", point.limits.dist_timeout_s)
    assert arguments["timeout"] == timedelta(seconds=45)
    monkeypatch.setenv(TIMEOUT_VARIABLE, "7")
    assert process_group_arguments(DistEnv(world_size=2), "cpu", 45)["timeout"] == timedelta(seconds=7)


@pytest.mark.serial
def test_a_point_whose_rank_lingers_past_the_timeout_is_a_failed_row_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the local backend, as a user runs it: rank 1 builds its data set 8 s late;
    rank 0 says it waits for rank 1, then its rung fails after limits.dist_timeout_s."""
    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    workload = TINY_WORKLOAD.replace(
        "dataset: fake_cifar", "dataset: tests.fixtures.workloads:lingering_dataset"
    )
    workload = workload.replace(
        "{size: 48, image_size: 8, resize: null}", "{size: 32, linger_s: 8, wait_line_s: 1}"
    )
    spec = parse_spec(
        "name: linger\n"
        + workload
        + "slurm: {tasks_per_node: 2, gpus_per_node: 0}\nlimits: {dist_timeout_s: 3}\n"
    )
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    run_local(plan.points, sweep, spec.slurm)
    (row,) = results.read_rows(sweep / "points" / plan.points[0].id / "rank0.csv")
    assert row["status"] == "failed"
    assert row["error"] == (
        "CollectiveTimeout: rank 0 waited 3 s in DDP's set-up (its weights' broadcast) for rank 1, and gave up: "
        "a rank that failed, left the loop or lingers (limits.dist_timeout_s in the spec sets the wait)"
    )
    logs = "".join(p.read_text() for p in (sweep / "local").rglob("*_0_log.err"))
    assert re.search(r"rank 0 has waited \d+ s in DDP's set-up \(its weights' broadcast\) for rank 1", logs)
