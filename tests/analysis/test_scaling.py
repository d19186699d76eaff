"""The scaling report (analysis/scaling.py): per size, throughput, AU, the wait, the costliest
stage; the largest size holding AU >= 90 %, and where per-GPU throughput falls."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis.load import load_results
from analysis.render.report import SCALING, build_report
from analysis.scaling import scale_count, scaling
from harness_schema import rows as results
from tests.fixtures.rows import synthetic_row

STEPS, BATCH = 10, 8


def write_size(
    sweep: Path, point_id: str, nodes: int, ranks: int, per_rank: float, waits: dict[str, float]
) -> None:
    """One point of `ranks` ranks on `nodes` nodes: each rank delivers `per_rank` samples/s and
    waits `waits[rung]` seconds a step for data (full's wait sets its AU)."""
    for rank in range(ranks):
        writer = results.RankWriter(sweep / "points" / point_id, rank)
        for rung, wait in waits.items():
            training = STEPS * BATCH / per_rank if rung == "full" else STEPS * (0.01 + wait)
            writer.append(
                synthetic_row(
                    sweep_id=sweep.name,
                    point_id=point_id,
                    rung=rung,
                    rank=rank,
                    world_size=ranks,
                    nodes=nodes,
                    hostname=f"n{rank * nodes // ranks}",
                    samples=STEPS * BATCH,
                    training_time=training,
                    loading_time=wait,
                    loading_time_total=wait * STEPS,
                )
            )


def storage_knee(tmp_path: Path, *, limit: bool) -> Path:
    """1, 2, 4 nodes of one rank: per-GPU samples/s flat to 2 then halved, the wait in reading
    the stored bytes (full against raw_bytes), as a store of a known ceiling gives (limit)."""
    sweep = tmp_path / "scan" / "20260101-000000"
    for nodes, rate, read in ((1, 100.0, 0.002), (2, 98.0, 0.003), (4, 100.0, 0.003)):
        if limit and nodes == 4:
            rate, read = 50.0, 0.08  # the store serves half of what 4 ranks ask: each waits
        waits = {"raw_bytes": 0.001, "full": 0.001 + read}
        write_size(sweep, f"p{nodes}", nodes, nodes, rate, waits)
    return sweep


def test_a_store_that_gives_way_at_four_nodes_is_named_with_its_stage(tmp_path: Path) -> None:
    rows = load_results([storage_knee(tmp_path, limit=True)]).rows
    assert scale_count(rows) == 3
    (found,) = scaling(rows)
    table = found.table
    assert list(table["nodes"]) == [1, 2, 4] and list(table["ranks"]) == [1, 2, 4]
    assert list(table["per_gpu_samples_per_s"].round(1)) == [100.0, 98.0, 50.0]
    assert list(table["samples_per_s"].round(1)) == [100.0, 196.0, 200.0]
    assert table["au"].iloc[0] > 0.9 and table["au"].iloc[2] < 0.5
    assert found.knee == (2, 4) and found.who == "storage"
    assert found.holds.startswith("the largest size holding AU >= 90%: 2 nodes (AU ")
    assert found.falls is not None and found.falls.startswith(
        "storage gives way between 2 nodes and 4 nodes: per-GPU samples/s -49%, reading the stored bytes 99% "
        "of the wait for data, AU "
    )


def test_a_store_without_a_limit_names_nothing(tmp_path: Path) -> None:
    (found,) = scaling(load_results([storage_knee(tmp_path, limit=False)]).rows)
    assert found.falls is None and found.knee is None
    assert found.holds == "every size holds AU >= 90%, up to 4 nodes (the largest measured)"


def test_the_au_threshold_is_a_setting(tmp_path: Path) -> None:
    rows = load_results([storage_knee(tmp_path, limit=True)]).rows
    (found,) = scaling(rows, au_threshold=0.999)
    assert found.holds.startswith("no size holds AU >= 100% (the most: ")


def test_a_fall_with_au_held_is_the_steps_own_not_the_pipelines(tmp_path: Path) -> None:
    """Per-GPU throughput halves but nobody waits for data more: the all-reduce, not storage."""
    sweep = tmp_path / "scan" / "20260101-000000"
    write_size(sweep, "p1", 1, 1, 100.0, {"full": 0.001})
    write_size(sweep, "p2", 2, 2, 50.0, {"full": 0.001})
    (found,) = scaling(load_results([sweep]).rows)
    assert found.who == "the step" and found.knee == (1, 2)
    assert found.falls is not None and found.falls.startswith("the step slows between 1 node and 2 nodes")
    assert (
        "of which the wait for data explains +1% (AU 99% -> 99%)" in found.falls
        and "storage" not in found.falls
    )


def test_the_report_has_its_scaling_section_only_for_results_of_several_sizes(tmp_path: Path) -> None:
    sweep = storage_knee(tmp_path, limit=True)
    report = build_report([sweep], plots=True)
    assert SCALING in report.text
    assert "storage gives way between 2 nodes and 4 nodes" in report.text
    assert (sweep / "plots" / "scaling-p1.png").stat().st_size > 1000
    one = tmp_path / "one" / "20260101-000000"
    write_size(one, "p1", 1, 1, 100.0, {"full": 0.001})
    assert SCALING not in build_report([one]).text


def test_sizes_count_the_hosts_of_a_run_where_rows_have_no_nodes_column() -> None:
    """Rows written before the `nodes` column: a run's hosts are its nodes."""
    rows = pd.DataFrame(
        [synthetic_row(point_id="a", world_size=1, hostname="n1").cells()]
        + [synthetic_row(point_id="b", rank=k, world_size=2, hostname=f"n{k}").cells() for k in (0, 1)]
    ).drop(columns=["nodes"])
    rows["sweep_dir"] = "s"
    assert scale_count(rows) == 2


def test_report_au_sets_the_threshold_and_refuses_a_percentage_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from analysis.__main__ import main

    sweep = storage_knee(tmp_path, limit=True)
    assert main([str(sweep), "--au", "0.4"]) == 0
    assert "every size holds AU >= 40%, up to 4 nodes (the largest measured)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(sweep), "--au", "90"])
    assert capsys.readouterr().err.endswith(
        "error: argument --au: '90' is not a share in (0, 1], such as 0.9\n"
    )
