from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.load import load_results
from harness_schema import rows as results
from harness_schema.atomic import atomic_write_text
from tests.analysis.conftest import synthetic_row, write_rows

REPO = Path(__file__).resolve().parents[2]


def test_types_are_restored(real_sweep: Path) -> None:
    rows = load_results([real_sweep]).rows
    assert rows["num_workers"].dtype.kind in "if"
    assert set(rows["pin_memory"]) == {False}
    assert rows.loc[rows["num_workers"] == 0, "prefetch_factor"].isna().all()


def test_an_unreadable_file_is_reported_and_skipped(real_sweep: Path, tmp_path: Path) -> None:
    bad = tmp_path / "points" / "x" / "rank0.csv"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\xff\xfe\x00garbage")
    loaded = load_results([real_sweep, tmp_path])
    assert len(loaded.rows) == 6
    assert len(loaded.problems) == 1 and loaded.problems[0].startswith(f"{bad}: ")


def test_the_report_runs_without_torch(real_sweep: Path) -> None:
    """A login node has no torch: block its import and print the table."""
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['torchvision'] = None\n"
        "from analysis.__main__ import main\n"
        f"sys.exit(main([{str(real_sweep)!r}]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("node node-a\nsame in every row: batch_size 8, ")


def test_rows_know_their_sweep_folder_and_file(real_sweep: Path) -> None:
    rows = load_results([real_sweep]).rows
    assert set(rows["sweep_dir"]) == {str(real_sweep)}
    assert all(Path(s).parent.parent.parent == real_sweep for s in rows["source"])


HEADER = b"point_id,point_index,rung,repeat,status,training_time\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (
            b"\xff\xfe\x00garbage",
            "unreadable (not UTF-8 text: byte 0xff at offset 0; a torn or hand-edited file)",
        ),
        (
            HEADER + b'"p,0,full,0,ok,1.0\n',
            "unreadable (line 2: unexpected end of data; a torn or hand-edited file)",
        ),
        (HEADER + b"p,0,full,0,ok\n", "torn (line 2 has 5 fields, the header 6; a torn or hand-edited file)"),
        (
            HEADER + b"p,0,full,,ok,1.0\n",
            "torn (line 2: repeat is '', not a whole number; a torn or hand-edited file)",
        ),
        (
            HEADER + b"p,0,full,0,o,1.0\n",
            "torn (line 2: status is 'o', not one of ok, failed, skipped; a torn or hand-edited file)",
        ),
        (HEADER, "a header and no rows"),
        (b"sweep_id,point_id\ns,p\n", "missing columns point_index, rung, repeat, status, training_time"),
        (HEADER + b"p,0,full,0,ok,fast\n", "a row with status ok has no training_time; row skipped"),
    ],
)
def test_each_kind_of_bad_file_is_named_with_what_is_wrong(
    real_sweep: Path, tmp_path: Path, content: bytes, message: str
) -> None:
    bad = tmp_path / "points" / "x" / "rank0.csv"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(content)
    loaded = load_results([real_sweep, tmp_path])
    assert loaded.problems == [f"{bad}: {message}" + ("" if message.endswith("skipped") else "; skipped")]
    assert len(loaded.rows) == 6


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ("0,8", "training_time 0"),
        ("1e-300,8", "training_time 1e-300"),
        ("inf,8", "training_time inf"),
        ("-0.5,8", "training_time -0.5"),
        ("0.5,-8", "samples -8"),
        ("0.5,inf", "samples inf"),
    ],
)
def test_a_row_whose_measure_cannot_be_true_is_left_out_with_a_line_naming_its_file(
    real_sweep: Path, tmp_path: Path, cells: str, said: str
) -> None:
    """Before: 0 or 1e-300 s was the recommendation (inf samples/s); inf or a negative value
    ended the report with a traceback (independent_ratio)."""
    bad = tmp_path / "points" / "x" / "rank0.csv"
    bad.parent.mkdir(parents=True)
    bad.write_text(f"point_id,point_index,rung,repeat,status,training_time,samples\nx,0,full,0,ok,{cells}\n")
    column = said.split()[0]
    least = {"training_time": "1e-06", "samples": "1"}[column]
    loaded = load_results([real_sweep, tmp_path])
    assert loaded.problems == [
        f"{bad}: a row with status ok has {said}, which cannot be measured (at least {least}, finite); "
        "row skipped"
    ]
    assert len(loaded.rows) == 6 and "x" not in set(loaded.rows["point_id"])


def test_files_of_an_older_harness_with_fewer_columns_load_with_the_rest(tmp_path: Path) -> None:
    """A sweep written before a column existed still reads; the column is empty there."""
    write_rows(tmp_path / "new", synthetic_row(point_id="new", gpu_util=80.0))
    old = synthetic_row(point_id="old")
    columns = [c for c in results.ROW_COLUMNS if c not in ("gpu_util", "transform_names")]
    atomic_write_text(
        tmp_path / "old" / "points" / "old" / "rank0.csv", results.csv_text([old.cells()], columns)
    )
    rows = load_results([tmp_path]).rows.set_index("point_id")
    assert rows.loc["new", "gpu_util"] == 80.0 and pd.isna(rows.loc["old", "gpu_util"])
    assert rows.loc["old", "transform_names"] == ""


def test_a_point_folder_or_a_rank_file_can_be_given(real_sweep: Path) -> None:
    point = next(real_sweep.glob("points/*"))
    assert len(load_results([point]).rows) == 2
    assert len(load_results([point / "rank1.csv"]).rows) == 1
