"""plan's and status's tables in every format a verb offers for its tables."""

from __future__ import annotations

import csv
import io

from harness.text_tables import TABLE_FORMATS, render

ROWS = [{"#": 0, "id": "0454fe7e78", "error": "a, b"}, {"#": 1, "id": "7e2ed96ad4", "error": ""}]


def test_each_format_renders_the_rows() -> None:
    shown = {fmt: render(ROWS, fmt) for fmt in TABLE_FORMATS}
    assert shown["terminal"].splitlines()[0].split() == ["#", "id", "error"]
    assert shown["markdown"].splitlines()[0].startswith("| #")
    assert "\\begin{tabular}" in shown["latex"]
    # CSV reads back as the rows, a comma inside a cell quoted
    assert list(csv.DictReader(io.StringIO(shown["csv"]))) == [
        {"#": "0", "id": "0454fe7e78", "error": "a, b"},
        {"#": "1", "id": "7e2ed96ad4", "error": ""},
    ]


def test_a_point_id_of_digits_stays_as_written() -> None:
    assert "0012345678" in render([{"id": "0012345678"}], "terminal")
