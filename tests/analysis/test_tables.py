from __future__ import annotations

from pathlib import Path

import pytest

from analysis.load import load_results
from analysis.report import build_report
from analysis.tables import JEAN_ZAY_COLUMNS, loader_tables, render, summarize
from harness import results
from tests.analysis.conftest import synthetic_row


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
    assert "-" in render(table, "terminal").split("\n")[2].split()  # prefetch_factor of num_workers=0


def write(sweep: Path, *rows: results.RungRow) -> None:
    for row in rows:
        writer = results.RankWriter(sweep / "points" / row.point_id, row.rank)
        path = writer.path
        if path.exists():
            writer.rows = [dict(r) for r in results.read_rows(path)]
        writer.append(row)


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
        synthetic_row(point_id="a", point_index=0, step="baseline", training_time=3.0),
        synthetic_row(point_id="b", point_index=1, step="workers", training_time=1.0),
        synthetic_row(point_id="c", point_index=2, step="batch", training_time=2.0),
    )
    table = loader_tables(summarize(load_results([tmp_path]).rows))["n1"]
    assert list(table["step"]) == ["baseline", "workers", "batch"]


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
    assert f"{torn}: unreadable (ParserError: Error tokenizing data" in report.text
    assert f"{other}: missing columns rung, status, training_time; skipped" in report.text
    assert f"{tmp_path / 'missing'}: no such file or folder" in report.text
    assert report.failed_points == 1 and report.problems == 3
    assert "good" in report.text
