"""From text cells to typed rows: each column's type (harness_schema/rows.py), and the ok rows
whose measure cannot be true left out, each file said once.

Apart from gathering the cells (analysis/cells.py): what a cell means as a value is the same
wherever the cell came from, and a column's type is decided here alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from analysis.cells import FILE, Cells
from harness_schema.rows import BOOL_COLUMNS, NUMBER_COLUMNS, ROW_COLUMNS

MEASURED_COLUMNS = ("training_time", "samples")
"""What every ok row holds: a row without one (a blank or torn cell) measured nothing usable."""

LEAST = {"training_time": 1e-6, "samples": 1}
"""The least each of MEASURED_COLUMNS can truly be, finite: a window is at least one step,
timed by two clock reads (microseconds apart at best), of at least one sample. A row below
(0, 1e-300, a negative time or count) or infinite was not measured: it would be the fastest
setting (inf samples/s) or break the ratios (independent_ratio needs positive values)."""


def measured(rows: pd.DataFrame, problems: list[str]) -> pd.DataFrame:
    """The rows, less the ok rows that lack one of MEASURED_COLUMNS or hold a value that cannot
    be true (LEAST), each file said once a column: left out of every judgement."""
    ok = rows["status"].eq("ok")
    bad = pd.Series(False, index=rows.index)
    for column in MEASURED_COLUMNS:
        values = rows[column]
        blank = ok & values.isna()
        for source in rows.loc[blank & ~bad, "source"].unique():
            problems.append(f"{source}: a row with status ok has no {column}; row skipped")
        bad |= blank
        untrue = ok & ~bad & ~(values.between(LEAST[column], np.inf, inclusive="left"))
        for source in rows.loc[untrue, "source"].unique():
            value = rows.loc[untrue & rows["source"].eq(source), column].iloc[0]
            problems.append(
                f"{source}: a row with status ok has {column} {value:g}, which cannot be measured "
                f"(at least {LEAST[column]:g}, finite); row skipped"
            )
        bad |= untrue
    return rows[~bad].reset_index(drop=True) if bad.any() else rows


# Columns renamed since the first versions: old result folders still load.
RENAMED = {"step": "sequence_step"}


def typed(table: pa.Table, cells: Cells) -> pd.DataFrame:
    """The typed rows: NUMBER_COLUMNS as pandas.to_numeric makes them of the text (int64 where
    every cell is a whole number, else float64 with NaN for a blank), BOOL_COLUMNS True, False
    or NaN, the rest text ("" for a blank or a column the file lacks); then the columns of a
    newer harness, as text. Column by column in pyarrow: 100,000 points in a second."""
    files = table.column(FILE).to_numpy()
    names = cells.columns(files)
    renamed = {old: new for old, new in RENAMED.items() if new not in names}
    present = {renamed.get(c, c): c for c in names}
    n = table.num_rows
    columns: dict[str, Any] = {}
    for column in ROW_COLUMNS:
        raw = table.column(present[column]) if column in present else None
        if column in NUMBER_COLUMNS:
            columns[column] = _numbers(raw, n)
        elif column in BOOL_COLUMNS:
            columns[column] = _bools(raw, n)
        else:
            columns[column] = _texts(raw, n)
    columns["sweep_dir"] = pd.Series(np.asarray(cells.sweeps, dtype=object)[files], dtype=object)
    columns["source"] = pd.Series(np.asarray(cells.sources, dtype=object)[files], dtype=object)
    for column in present:  # columns of a newer harness: kept as text
        if column not in columns:
            columns[column] = _texts(table.column(present[column]), n)
    return pd.DataFrame(columns)


def _numbers(raw: pa.ChunkedArray | None, n: int) -> pd.Series:
    if raw is None:
        return pd.Series(np.full(n, np.nan))
    cells = raw.combine_chunks()
    blank = pc.or_kleene(pc.is_null(cells), pc.equal(cells, "")).fill_null(True)
    try:
        if not pc.any(blank).as_py() and pc.all(pc.match_substring_regex(cells, r"^[+-]?[0-9]+$")).as_py():
            return pd.Series(pc.cast(cells, pa.int64()).to_numpy())
        return pd.Series(pc.cast(pc.if_else(blank, None, cells), pa.float64()).to_numpy(zero_copy_only=False))
    except pa.ArrowInvalid:
        # Text pyarrow does not parse (" 1", "1.5e", a hand edit): pandas' own reading of it,
        # which the fast path above gives wherever pyarrow parses.
        text = pd.Series(cells.to_numpy(zero_copy_only=False), dtype=object).fillna("")
        return pd.to_numeric(text, errors="coerce")


_TRUTH = {"True": True, "False": False, "true": True, "false": False}


def _bools(raw: pa.ChunkedArray | None, n: int) -> pd.Series:
    """True, False, and NaN for anything else: bool where every cell is one of _TRUTH."""
    if raw is None or n == 0:
        return _texts(raw, n).map(_TRUTH)
    # Each distinct value mapped once (Series.map's own result, its dtype included), then
    # spread over the rows: 100,000 points' rows mapped one by one took half a second.
    encoded = pc.fill_null(raw.combine_chunks(), "").dictionary_encode()
    values = encoded.dictionary.to_numpy(zero_copy_only=False).astype(object)
    mapped = pd.Series(values, dtype=object).map(_TRUTH).to_numpy()
    return pd.Series(mapped[encoded.indices.to_numpy()])


def _texts(raw: pa.ChunkedArray | None, n: int) -> pd.Series:
    """Text cells as Python strings ("" for a blank), through the column's distinct values:
    a column holds few of them, and every row shares their string objects."""
    if raw is None:
        return pd.Series(np.full(n, "", dtype=object), dtype=object)
    encoded = pc.fill_null(raw.combine_chunks(), "").dictionary_encode()
    values = encoded.dictionary.to_numpy(zero_copy_only=False).astype(object)
    return pd.Series(values[encoded.indices.to_numpy()], dtype=object)
