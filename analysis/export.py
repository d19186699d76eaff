"""The tidy rows for notebooks and files: one row per rank, rung and repeat, with every setting,
the node, and what the result was measured on.

    frame = analysis.tidy(["results/grid"])          # a pandas DataFrame
    harness report results/grid --format parquet -o grid.parquet
    harness report results/grid --format json -o grid.json   # records: one object per row

The columns: the row schema of rank<k>.csv (harness_schema/rows.py: the ids, every setting
column, the figures), then `node` and `node_type` (as the report groups them), the provenance
read from meta-rank<k>.json (`device_name`, `gpu_count`, `torch_version`, `cuda_version`,
`python_version`, `git_commit`, `meta_hostname`), and where each row came from (`sweep_dir`,
`source`). Failed and skipped rows are kept, with their `status` and `error`: a notebook filters
them itself (`frame[frame.status == "ok"]`).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.aggregate import add_nodes
from analysis.load import ADDED_COLUMNS, load_results
from analysis.meta import META_COLUMNS, load_meta
from harness_schema.rows import BOOL_COLUMNS, ROW_COLUMNS

log = logging.getLogger(__name__)

EXPORT_FORMATS = ("parquet", "json")
NODE_COLUMNS = ("node", "node_type")
PROVENANCE_COLUMNS = META_COLUMNS
META_KEYS = ["sweep_dir", "point_id", "rank"]


def tidy(paths: Iterable[str | Path], problems: list[str] | None = None) -> pd.DataFrame:
    """Every row under `paths` (sweep folders, spec folders, results roots, globs) as one frame.

    A missing or corrupt file is skipped, as in the report: what is wrong is appended to
    `problems` when given, and logged as a warning otherwise."""
    loaded = load_results(paths)
    found = loaded.problems
    rows = loaded.rows
    meta = load_meta(rows, found)
    if not rows.empty:
        rows = add_nodes(rows, meta)
    frame = _with_provenance(rows, meta)
    if problems is None:
        for problem in found:
            log.warning("%s", problem)
    else:
        problems.extend(found)
    return frame


def _with_provenance(rows: pd.DataFrame, meta: pd.DataFrame) -> pd.DataFrame:
    rows = rows.copy()
    for column in NODE_COLUMNS:
        if column not in rows.columns:
            rows[column] = pd.Series(dtype=object)
    if rows.empty or meta.empty:
        unknown = {c: pd.Series(pd.NA, index=rows.index, dtype=object) for c in PROVENANCE_COLUMNS}
        joined = rows.assign(**unknown)
    else:
        meta = meta.drop_duplicates(META_KEYS).astype({"rank": rows["rank"].dtype})
        joined = rows.merge(meta[[*META_KEYS, *PROVENANCE_COLUMNS]], on=META_KEYS, how="left")
        # A resumed point rewrites meta-rank<k>.json on its new host: the file describes the
        # rows measured on that host only (as node_types in analysis/aggregate.py decides).
        meta_host = joined["meta_hostname"].fillna("")
        other_host = (meta_host != "") & (meta_host != joined["hostname"])
        joined.loc[other_host, list(PROVENANCE_COLUMNS)] = pd.NA
    return _typed(joined)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Types that survive Parquet and JSON: nullable booleans (True, False or missing),
    nullable integers for the GPU count, and text as the text dtype pandas reads back from
    Parquet (`str`: pandas 3's string dtype, plain objects before)."""
    frame = frame.copy()
    for column in BOOL_COLUMNS:
        frame[column] = frame[column].astype("boolean")
    frame["gpu_count"] = pd.to_numeric(frame["gpu_count"], errors="coerce").astype("Int64")
    for column in (*NODE_COLUMNS, *PROVENANCE_COLUMNS):
        if column != "gpu_count":
            frame[column] = frame[column].fillna("").astype(object)
    for column in frame.columns:
        if frame[column].dtype == object:
            frame[column] = frame[column].astype(str)
    first = [c for c in ROW_COLUMNS if c in frame.columns]
    last = [*NODE_COLUMNS, *PROVENANCE_COLUMNS, *ADDED_COLUMNS]
    middle = [c for c in frame.columns if c not in first and c not in last]
    return frame[[*first, *middle, *last]].reset_index(drop=True)


def tidy_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """The frame as a Parquet file or as JSON records (one object per row; missing is null)."""
    if fmt == "parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return buffer.getvalue()
    if fmt == "json":
        # json.dumps rather than DataFrame.to_json: it writes floats exactly (repr), where
        # to_json rounds to at most 15 significant digits.
        return (json.dumps(json_records(frame), indent=1, default=_plain) + "\n").encode()
    raise ValueError(f"unknown export format {fmt!r}: one of {', '.join(EXPORT_FORMATS)}")


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per row, missing values as None (JSON null, never NaN)."""
    plain = frame.astype(object)
    return plain.where(frame.notna(), None).to_dict("records")


def _plain(value: Any) -> Any:
    """numpy scalars that slip through astype(object) as the Python values they hold."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
