"""A point opened on a rank (harness/execution/point.py): the units not done failed in one
way, whoever fails them, and an error as one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.point import ERROR_CHARS, one_line, open_point
from tests.conftest import TINY_WORKLOAD

SPEC = "name: t\nrungs: [processed_sample, full]\n" + TINY_WORKLOAD.replace("repeats: 1", "repeats: 2")


def units(rows: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    return [(r["rung"], r["repeat"], r["status"]) for r in rows]


def test_the_units_not_done_fail_in_the_order_they_are_measured_with_the_error(tmp_path: Path) -> None:
    (point,) = expand(parse_spec(SPEC)).points
    opened = open_point(point, tmp_path, DistEnv())
    opened.writer.append(opened.rows.row("processed_sample", 0, status="ok"))
    outcome = opened.fail_all(RuntimeError("no device\nat all"), opened.written())
    assert (outcome.ok, outcome.failed, outcome.skipped) == (0, 3, 0)
    reopened = open_point(point, tmp_path, DistEnv())
    assert units(reopened.writer.rows) == [
        ("processed_sample", "0", "ok"),
        ("full", "0", "failed"),  # repeats outermost, as the rungs are measured (ABC ABC)
        ("processed_sample", "1", "failed"),
        ("full", "1", "failed"),
    ]
    assert {r["error"] for r in reopened.writer.rows[1:]} == {"RuntimeError: no device at all"}
    # Done now, every unit: nothing left to fail.
    assert reopened.missing() == [] and reopened.fail_missing("late") == []


def test_the_units_every_rank_finished_are_skipped_by_default(tmp_path: Path) -> None:
    (point,) = expand(parse_spec(SPEC)).points
    two = [DistEnv(rank=k, world_size=2, local_rank=k) for k in (0, 1)]
    for env in two:
        opened = open_point(point, tmp_path, env)
        opened.writer.append(opened.rows.row("processed_sample", 0, status="ok"))
    rank0 = open_point(point, tmp_path, two[0])
    rank0.writer.append(rank0.rows.row("full", 0, status="ok"))  # rank 1 has no row for it
    rank0 = open_point(point, tmp_path, two[0])
    assert rank0.done == {("processed_sample", 0)}
    assert rank0.missing() == [("full", 0), ("processed_sample", 1), ("full", 1)]
    assert rank0.missing(rank0.written()) == [("processed_sample", 1), ("full", 1)]


def test_a_long_error_keeps_its_end_where_the_cause_is() -> None:
    # A gloo error: a long path first, the cause (the peer that left) last.
    error = RuntimeError(
        "[" + "/__w/pytorch/pytorch/third_party/gloo" * 20 + "] Connection closed by peer rank 1"
    )
    text = one_line(error)
    assert len(text) <= ERROR_CHARS + 5
    assert text.startswith("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo")
    assert text.endswith("] Connection closed by peer rank 1") and " ... " in text
    assert one_line(ValueError("short")) == "ValueError: short"


def test_a_rank_that_joins_a_point_alone_is_told_a_peer_is_still_in_an_earlier_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 of 2 at a point whose peer never comes (it lingers in the point before, as a
    local job's ranks run the points one after the other): after limits.dist_timeout_s the
    point fails with what it means, not torch's "1/2 clients joined" alone."""
    import socket

    import torch
    import torch.distributed as dist

    from harness.execution.point import JoinTimeout

    spec = "name: t\n" + TINY_WORKLOAD + "limits: {dist_timeout_s: 2}\n"
    (point,) = expand(parse_spec(spec)).points
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = DistEnv(rank=0, world_size=2, local_rank=0, master_addr="127.0.0.1", master_port=port)
    monkeypatch.delenv("HARNESS_DIST_TIMEOUT_S", raising=False)
    monkeypatch.setenv("MASTER_ADDR", env.master_addr)  # what a job's environment gives its ranks
    monkeypatch.setenv("MASTER_PORT", str(port))
    opened = open_point(point, tmp_path, env)
    with pytest.raises(
        JoinTimeout,
        match=r"not every one of the point's 2 ranks joined its process group within 2 s \(limits\.dist_timeout_s\): a rank still in an earlier point \(it lingered or hung there\), or gone \(DistStoreError: ",
    ):
        opened.start(torch.device("cpu"))
    assert not dist.is_initialized()
