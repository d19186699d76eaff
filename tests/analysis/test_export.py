"""The tidy rows (analysis/export.py) and `report --format parquet|json -o FILE`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from analysis.__main__ import main
from analysis.export import tidy
from harness_schema import atomic
from harness_schema.rows import read_rows
from harness_schema.settings import SETTING_COLUMNS
from tests.analysis.conftest import synthetic_row, write_node_meta, write_rows


def _rows_on_disk(sweep: Path) -> int:
    return sum(len(list(read_rows(f))) for f in sweep.glob("points/*/rank*.csv"))


def test_one_row_per_rank_rung_and_repeat_with_settings_and_ids(real_sweep: Path) -> None:
    frame = tidy([real_sweep])
    assert len(frame) == _rows_on_disk(real_sweep)
    # the fixture measured each point once per node (as rank 0 both times)
    assert not frame.duplicated(["point_id", "node", "rung", "repeat"]).any()
    for column in (*SETTING_COLUMNS, "sweep_id", "point_id", "node", "node_type", "git_commit"):
        assert column in frame.columns, column
    assert sorted(frame["num_workers"].unique()) == [0, 1, 2]
    assert set(frame["node"]) == {"node-a", "node-b"}


def test_provenance_comes_from_each_ranks_meta_file(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(rank=0, hostname="gpu1"), synthetic_row(rank=1, hostname="gpu2"))
    write_node_meta(tmp_path, "p1", 0, "gpu1", device_name="NVIDIA A100-SXM4-80GB", gpu_count=4)
    frame = tidy([tmp_path]).set_index("rank")
    assert frame.loc[0, "torch_version"] == "2.5.0"
    assert frame.loc[0, "cuda_version"] == "12.4"
    assert frame.loc[0, "git_commit"] == "abc"
    assert frame.loc[0, "gpu_count"] == 4
    assert frame.loc[0, "node_type"] == "4× NVIDIA A100-SXM4-80GB"
    # rank 1 wrote no meta file: its provenance is unknown, not borrowed from rank 0
    assert frame.loc[1, "torch_version"] == ""
    assert pd.isna(frame.loc[1, "gpu_count"])


def test_a_bad_file_is_a_problem_not_a_crash(real_sweep: Path, tmp_path: Path) -> None:
    problems: list[str] = []
    frame = tidy([real_sweep, tmp_path / "missing"], problems)
    assert len(frame) == _rows_on_disk(real_sweep)
    assert problems == [f"{tmp_path / 'missing'}: no such file or folder"]


def test_parquet_round_trips_to_the_same_frame(
    real_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "grid.parquet"
    assert main([str(real_sweep), "--format", "parquet", "-o", str(out)]) == 0
    frame = tidy([real_sweep])
    assert capsys.readouterr().out == f"export: {out} ({len(frame)} row(s) of 3 point(s), parquet)\n"
    pd.testing.assert_frame_equal(pd.read_parquet(out), frame)


def test_json_is_records_one_object_per_row(real_sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "grid.json"
    assert main([str(real_sweep), "--format", "json", "-o", str(out)]) == 0

    def no_nan(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON: a missing value must be null")

    records = json.loads(out.read_text(), parse_constant=no_nan)
    frame = tidy([real_sweep])
    assert len(records) == len(frame) == _rows_on_disk(real_sweep)
    assert list(records[0]) == list(frame.columns)
    on_disk = {
        (row["point_id"], row["hostname"], row["rung"], row["repeat"]): row
        for path in real_sweep.glob("points/*/rank*.csv")
        for row in read_rows(path)
    }
    for record in records:  # every figure as the rank wrote it, read without the exporter
        row = on_disk[(record["point_id"], record["hostname"], record["rung"], str(record["repeat"]))]
        assert record["samples_per_s"] == float(row["samples_per_s"])
        assert record["num_workers"] == int(row["num_workers"])


def test_json_keeps_types_and_writes_missing_values_as_null(tmp_path: Path) -> None:
    write_rows(
        tmp_path / "sweep",
        synthetic_row(point_id="p1", pin_memory=True, samples_per_s=0.1 + 0.2, gpu_util=""),
        synthetic_row(
            point_id="p0", num_workers=0, prefetch_factor="", status="failed", error="OSError: boom"
        ),
    )
    out = tmp_path / "rows.json"
    assert main([str(tmp_path / "sweep"), "--format", "json", "-o", str(out)]) == 0
    records = {r["point_id"]: r for r in json.loads(out.read_text())}
    ok, failed = records["p1"], records["p0"]
    assert ok["samples_per_s"] == 0.30000000000000004  # exactly: no rounding to 15 digits
    assert ok["pin_memory"] is True and ok["num_workers"] == 2 and ok["prefetch_factor"] == 2
    assert ok["gpu_util"] is None and ok["gpu_count"] is None  # not sampled, no meta file: null
    assert failed["prefetch_factor"] is None  # none without workers
    assert (failed["status"], failed["error"]) == ("failed", "OSError: boom")


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_an_export_without_o_is_refused(
    fmt: str,
    real_sweep: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([str(real_sweep), "--format", fmt]) == 2
    assert capsys.readouterr().err == f"harness: --format {fmt} writes a file: give it with -o FILE\n"
    assert os.listdir(tmp_path) == []  # nothing written, and no binary on the terminal


def test_no_rows_writes_nothing_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.parquet"
    assert main([str(tmp_path / "empty"), "--format", "parquet", "-o", str(out)]) == 1
    assert capsys.readouterr().err.endswith(f"harness: no rows to export; {out} not written\n")
    assert not out.exists()


def test_the_file_is_replaced_whole_or_not_at_all(
    real_sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the atomic writer: a failure at the rename keeps yesterday's export whole."""
    out = tmp_path / "grid.json"
    out.write_text("yesterday's export\n")

    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", full_disk)
    assert main([str(real_sweep), "--format", "json", "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"harness: cannot write {out}: No space left on device\n"
    assert out.read_text() == "yesterday's export\n"
    assert os.listdir(tmp_path) == ["grid.json"]  # no temporary file left beside it
