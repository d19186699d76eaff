from __future__ import annotations

import math
from pathlib import Path

import pytest
from tabulate import tabulate

from analysis.aggregate import summarize
from analysis.load import load_results
from analysis.meta import load_meta
from analysis.render.report import build_report
from analysis.render.tables import JEAN_ZAY_COLUMNS, loader_tables, render, simple_columns, simple_table
from tests.analysis.conftest import synthetic_row, write_node_meta, write_rows


def test_one_table_per_node_with_the_course_columns_first(real_sweep: Path) -> None:
    tables = loader_tables(summarize(load_results([real_sweep]).rows))
    assert list(tables) == ["node-a", "node-b"]
    for table in tables.values():
        course = [*JEAN_ZAY_COLUMNS, "first_step_loading_time", "samples_per_s", "cpu_memory_gb"]
        assert list(table.columns[: len(course)]) == course
        # The tiny dataset's epoch (6 batches) may end inside a window (the warmup drains the
        # workers' stock first): then, and only then, the restarts get their columns. The share
        # of steps that waited longer than they computed is on every row the harness measured.
        restarts = ["epoch_restarts", "epoch_restart_time"]
        assert list(table.columns[len(course) :]) in (["waited_share"], ["waited_share", *restarts])
        assert sorted(table["num_workers"]) == [0, 1, 2]
        assert list(table["training_time"]) == sorted(table["training_time"])
        assert table["jobid"].str.len().eq(10).all()  # no Slurm: the point id


def test_formats(real_sweep: Path) -> None:
    table = loader_tables(summarize(load_results([real_sweep]).rows))["node-a"]
    assert render(table, "markdown").splitlines()[0].startswith("| jobid ")
    assert render(table, "csv").splitlines()[0] == ",".join(table.columns)
    assert "\\toprule" in render(table, "latex")
    (line,) = [line.split() for line in render(table, "terminal").splitlines() if line.split()[1:2] == ["0"]]
    assert line[5] == "-"  # prefetch_factor of num_workers=0


def test_a_sequence_keeps_its_order(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        synthetic_row(point_id="a", point_index=0, sequence_step="baseline", training_time=3.0),
        synthetic_row(point_id="b", point_index=1, sequence_step="workers", training_time=1.0),
        synthetic_row(point_id="c", point_index=2, sequence_step="batch", training_time=2.0),
    )
    table = loader_tables(summarize(load_results([tmp_path]).rows))["n1"]
    assert list(table["sequence_step"]) == ["baseline", "workers", "batch"]


def test_report_lists_failures_and_unreadable_files(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        synthetic_row(point_id="good"),
        synthetic_row(point_id="bad", status="failed", error="OSError: disk on fire", training_time=None),
    )
    torn = tmp_path / "points" / "torn" / "rank0.csv"
    torn.parent.mkdir(parents=True)
    torn.write_bytes(b'sweep_id,point_id\n"unterminated')
    other = tmp_path / "points" / "other" / "rank0.csv"
    other.parent.mkdir(parents=True)
    other.write_text("sweep_id,point_id\ns,other\n")
    report = build_report([tmp_path, tmp_path / "missing"])
    assert "1 point(s) had failed rungs:\n  bad full (rank 0): OSError: disk on fire" in report.text
    assert (
        f"{torn}: unreadable (line 2: unexpected end of data; a torn or hand-edited file); skipped"
        in report.text
    )
    assert (
        f"{other}: missing columns point_index, rung, repeat, status, training_time; skipped" in report.text
    )
    assert f"{tmp_path / 'missing'}: no such file or folder" in report.text
    assert report.failed_points == 1 and report.problems == 3
    assert "good" in report.text


A100, V100 = "NVIDIA A100-SXM4-80GB", "NVIDIA V100-SXM2-32GB"


def three_nodes_two_types(sweep: Path) -> None:
    """Point p1 measured on n1 and n2 (8× A100) and on n3 (4× V100); meta written per rank."""
    for host, t in (("n1", 1.0), ("n2", 1.2), ("n3", 2.0)):
        point = f"p-{host}"
        write_rows(sweep, synthetic_row(point_id=point, hostname=host, training_time=t, device="cuda:0"))
        name, count = (V100, 4) if host == "n3" else (A100, 8)
        write_node_meta(sweep, point, 0, host, name, count)


def test_by_gpu_groups_nodes_of_one_type(tmp_path: Path) -> None:
    three_nodes_two_types(tmp_path)
    rows = load_results([tmp_path]).rows
    meta = load_meta(rows)
    tables = loader_tables(summarize(rows, by="gpu", meta=meta))
    assert list(tables) == [f"4× {V100}", f"8× {A100}"]
    assert len(tables[f"8× {A100}"]) == 2
    report = build_report([tmp_path], by="gpu")
    assert f"node type 8× {A100} (nodes: n1, n2)" in report.text
    assert f"node type 4× {V100} (nodes: n3)" in report.text


def test_with_by_gpu_the_same_point_on_two_nodes_is_two_runs(tmp_path: Path) -> None:
    """p1 ran on n1, then again on n2 (a requeue): n2's meta-rank0.json replaced n1's, so n1's
    type comes from another point it ran."""
    write_rows(tmp_path, synthetic_row(hostname="n1", training_time=1.0))
    path = tmp_path / "points" / "p1"
    (path / "rank0.csv").rename(path / "rank1.csv")  # kept aside, as the real_sweep fixture does
    write_rows(tmp_path, synthetic_row(hostname="n2", training_time=1.2))
    write_node_meta(tmp_path, "p1", 0, "n2", A100, 8)
    write_rows(tmp_path, synthetic_row(point_id="q", hostname="n1"))
    write_node_meta(tmp_path, "q", 0, "n1", A100, 8)
    rows = load_results([tmp_path]).rows
    summary = summarize(rows, by="gpu", meta=load_meta(rows)).set_index("point_id")
    row = summary.loc["p1"]
    assert row["runs"] == 2 and row["nodes"] == 2 and row["group"] == f"8× {A100}"
    rates = [80 / 1.0, 80 / 1.2]
    assert row["training_time"] == pytest.approx(1.1)
    # Two runs (one per node): Student's t with 1 df on the logs, half-width over the centre.
    logs = [math.log(r) for r in rates]
    assert row["ci95"] == pytest.approx(math.sinh(12.706 * abs(logs[0] - logs[1]) / 2))
    assert "nodes" in loader_tables(summary.reset_index())[f"8× {A100}"].columns


def test_a_multi_node_slurm_run_is_one_run_across_its_nodes(tmp_path: Path) -> None:
    """One job on two nodes: the slowest of all four ranks decides, samples of all four count."""
    for rank, host, t in ((0, "a", 1.0), (1, "a", 1.1), (2, "b", 1.0), (3, "b", 2.0)):
        write_rows(
            tmp_path, synthetic_row(rank=rank, world_size=4, hostname=host, jobid="77_3", training_time=t)
        )
    summary = summarize(load_results([tmp_path]).rows)
    (row,) = summary.itertuples()
    assert row.group == "a+b" and row.node == "a+b"
    assert row.training_time == 2.0 and row.samples_per_s == pytest.approx(4 * 80 / 2.0)
    assert row.rank_spread == pytest.approx((2.0 - 1.0) / 1.05)
    table = loader_tables(summary)["a+b"]
    assert list(table.columns[-2:]) == ["ranks", "rank_spread"]
    assert table.loc[0, "jobid"] == "77_3" and table.loc[0, "ranks"] == "4"
    assert "95.2%" in render(table, "terminal")


def test_sampled_columns_appear_only_where_sampled(tmp_path: Path) -> None:
    write_rows(
        tmp_path / "gpu",
        synthetic_row(rank=0, world_size=2, gpu_util=90.0, energy_j=100.0, loader_cores=1.5),
        synthetic_row(rank=1, world_size=2, gpu_util=70.0, energy_j=60.0, loader_cores=2.5),
    )
    write_rows(tmp_path / "cpu", synthetic_row(point_id="p2", hostname="n2"))
    tables = loader_tables(summarize(load_results([tmp_path]).rows))
    sampled = tables["n1"]
    assert {"gpu_util", "energy_per_sample_j", "loader_cores"} <= set(sampled.columns)
    # the mean over ranks; energy of all ranks over the samples of all ranks
    assert sampled.loc[0, "gpu_util"] == 80.0 and sampled.loc[0, "loader_cores"] == 2.0
    assert sampled.loc[0, "energy_per_sample_j"] == pytest.approx(160.0 / 160)
    # per table: n2 sampled nothing
    assert list(tables["n2"].columns) == [
        *JEAN_ZAY_COLUMNS,
        "first_step_loading_time",
        "samples_per_s",
        "cpu_memory_gb",
        "loading_rank",
        "ranks",
        "rank_spread",
    ]


def test_repeats_show_their_count_and_the_interval_and_a_run_that_stands_out(tmp_path: Path) -> None:
    rates = [222.6, 222.7, 204.5, 222.65]
    write_rows(tmp_path, *(synthetic_row(repeat=r, training_time=80 / v) for r, v in enumerate(rates)))
    table = loader_tables(summarize(load_results([tmp_path]).rows))["n1"]
    assert list(table.columns[-3:]) == ["runs", "ci95", "outliers"]
    assert table.loc[0, "samples_per_s"] == pytest.approx(222.625)  # the median run
    # The interval the judgements use (Student's t, 3 df, on the logs: 4 runs, nothing
    # trimmed), so the row and the recommendation tell one story; the slow run is named.
    assert render(table, "terminal").split()[-5:] == ["4", "±6.8%", "repeat", "2", "-8%"]
    assert table.loc[0, "outliers"] == "repeat 2 -8%"


def test_the_rank_that_waited_most_is_named_under_ddp(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        synthetic_row(rank=0, world_size=2, loading_time=0.003),
        synthetic_row(rank=1, world_size=2, loading_time=0.069),
    )
    table = loader_tables(summarize(load_results([tmp_path]).rows))["n1"]
    assert table.loc[0, "loading_time"] == 0.069 and table.loc[0, "loading_rank"] == "1"


def test_unsteady_windows_and_epoch_restarts_get_columns_only_where_they_happened(tmp_path: Path) -> None:
    write_rows(tmp_path / "calm", synthetic_row(window_steady=True, epoch_restarts=0))
    calm = loader_tables(summarize(load_results([tmp_path / "calm"]).rows))["n1"]
    assert not {"steady", "epoch_restarts"} & set(calm.columns)
    write_rows(
        tmp_path / "rough",
        synthetic_row(point_id="a", window_steady=False, epoch_restarts=2, epoch_restart_time=0.4),
        synthetic_row(point_id="b", window_steady=None, epoch_restarts=0, epoch_restart_time=0.0),
    )
    rough = loader_tables(summarize(load_results([tmp_path / "rough"]).rows))["n1"].set_index("jobid")
    assert rough.loc["a", "steady"] == "no" and rough.loc["b", "steady"] == ""  # too short: not news
    assert rough.loc["a", "epoch_restarts"] == 2 and rough.loc["a", "epoch_restart_time"] == 0.4


def test_a_missing_rank_shows_in_the_ranks_column(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(rank=0, world_size=2))
    table = loader_tables(summarize(load_results([tmp_path]).rows))["n1"]
    assert table.loc[0, "ranks"] == "1/2"


def test_two_sweeps_in_one_table_are_told_apart(real_sweep: Path, tmp_path: Path) -> None:
    write_rows(tmp_path / "grid" / "other", synthetic_row(point_id="x", hostname="node-a"))
    table = loader_tables(summarize(load_results([real_sweep, tmp_path]).rows))["node-a"]
    assert table["sweep"].tolist() == [f"grid/{real_sweep.name}"] * 3 + ["grid/other"]


def test_the_terminal_layout_is_tabulates_simple() -> None:
    headers = ["jobid", "a", "longer header"]
    rows = [["x", "", "1"], ["a much longer cell", "bb", ""], ["", "", ""]]
    assert simple_table(headers, rows) == tabulate(
        rows, headers=headers, tablefmt="simple", disable_numparse=True
    )
    # Column by column (what render uses), the same text; and with no row.
    columns = [list(column) for column in zip(*rows, strict=True)]
    assert simple_columns(headers, columns) == simple_table(headers, rows)
    assert simple_columns(headers, [[], [], []]) == simple_table(headers, [])


def test_workers_that_delivered_nothing_get_a_column_only_where_some_did(tmp_path: Path) -> None:
    """A stream of 1 shard read by 2 workers: the table says 1 worker idled beside the row's
    num_workers=2; where every worker worked, no column."""
    write_rows(tmp_path / "busy", synthetic_row(idle_workers=0))
    busy = loader_tables(summarize(load_results([tmp_path / "busy"]).rows))["n1"]
    assert "idle_workers" not in busy.columns
    write_rows(
        tmp_path / "idle",
        synthetic_row(point_id="a", idle_workers=1),
        synthetic_row(point_id="b", idle_workers=0),
    )
    idle = loader_tables(summarize(load_results([tmp_path / "idle"]).rows))["n1"].set_index("jobid")
    assert (idle.loc["a", "idle_workers"], idle.loc["b", "idle_workers"]) == (1, 0)
    assert "idle_workers" in render(idle.reset_index(), "terminal").splitlines()[0]
