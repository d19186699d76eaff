from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tabulate import tabulate

from analysis.load import load_meta, load_results
from analysis.report import build_report
from analysis.tables import JEAN_ZAY_COLUMNS, UNKNOWN_TYPE, loader_tables, render, simple_table, summarize
from tests.analysis.conftest import synthetic_row, write_node_meta, write_rows


def test_one_table_per_node_with_the_course_columns_first(real_sweep: Path) -> None:
    tables = loader_tables(summarize(load_results([real_sweep]).rows))
    assert list(tables) == ["node-a", "node-b"]
    for table in tables.values():
        assert list(table.columns) == [
            *JEAN_ZAY_COLUMNS,
            "first_step_loading_time",
            "samples_per_s",
            "cpu_memory_gb",
        ]
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


write = write_rows  # test_verdict imports it from here


def test_the_slowest_rank_decides_and_throughput_sums_ranks(tmp_path: Path) -> None:
    write(
        tmp_path,
        synthetic_row(rank=0, world_size=2, training_time=1.0, loading_time=0.01),
        synthetic_row(rank=1, world_size=2, training_time=2.0, loading_time=0.05),
    )
    (row,) = summarize(load_results([tmp_path]).rows).itertuples()
    assert row.training_time == 2.0 and row.loading_time == 0.05
    assert row.samples_per_s == pytest.approx(160 / 2.0)
    assert row.ranks == 2


def test_repeats_take_the_median_and_show_the_spread(tmp_path: Path) -> None:
    write(tmp_path, *(synthetic_row(repeat=r, training_time=t) for r, t in enumerate([1.0, 3.0, 1.2])))
    summary = summarize(load_results([tmp_path]).rows)
    assert summary.loc[0, "training_time"] == 1.2
    assert summary.loc[0, "spread"] == pytest.approx(2.0)
    table = loader_tables(summary)["n1"]
    assert "spread" in table.columns


def test_a_sequence_keeps_its_order(tmp_path: Path) -> None:
    write(
        tmp_path,
        synthetic_row(point_id="a", point_index=0, sequence_step="baseline", training_time=3.0),
        synthetic_row(point_id="b", point_index=1, sequence_step="workers", training_time=1.0),
        synthetic_row(point_id="c", point_index=2, sequence_step="batch", training_time=2.0),
    )
    table = loader_tables(summarize(load_results([tmp_path]).rows))["n1"]
    assert list(table["sequence_step"]) == ["baseline", "workers", "batch"]


def test_report_lists_failures_and_unreadable_files(tmp_path: Path) -> None:
    write(
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
    assert f"{other}: missing columns rung, status, training_time; skipped" in report.text
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


def test_a_node_without_meta_takes_its_type_from_its_other_points_else_unknown(tmp_path: Path) -> None:
    three_nodes_two_types(tmp_path)
    write_rows(tmp_path, synthetic_row(point_id="late", hostname="n1"))  # no meta of its own
    write_rows(tmp_path, synthetic_row(point_id="lost", hostname="n9"))
    rows = load_results([tmp_path]).rows
    summary = summarize(rows, by="gpu", meta=load_meta(rows)).set_index("point_id")
    assert summary.loc["late", "group"] == f"8× {A100}"
    assert summary.loc["lost", "group"] == UNKNOWN_TYPE


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
    assert row["training_time"] == pytest.approx(1.1) and row["spread"] == pytest.approx(0.2)
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
        "ranks",
        "rank_spread",
    ]


def test_repeats_give_a_coefficient_of_variation(tmp_path: Path) -> None:
    write_rows(tmp_path, *(synthetic_row(repeat=r, training_time=t) for r, t in enumerate([1.0, 3.0, 1.2])))
    table = loader_tables(summarize(load_results([tmp_path]).rows))["n1"]
    times = pd.Series([1.0, 3.0, 1.2])
    assert table.loc[0, "cv"] == pytest.approx(times.std() / times.mean())
    assert render(table, "terminal").split()[-1] == "63.5%"


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
