"""A sweep's rows in one file (consolidated-rows.parquet), so that a report on a large sweep
opens one file instead of a rank file per point.

The file holds the cells of the sweep's rank files as they are written (text, before any
typing), one row per row, and for each row the rank file it came from with that file's size
and modification time when it was read. A reader takes from it only the rows of files whose
size and time are still the same; it reads every other rank file itself (new, rewritten by a
resume or by a sweep still filling, or not in it). So the file is never wrong, only more or
less complete, and it is safe to delete: the next report reads the rank files and writes it
again. analysis/cells.py reads it, and writes it from `harness report` (through a temporary
file and a rename) when the sweep's folder is writable; a read-only results folder is read as
it is.

Its metadata names its version and the rank files' headers (a row's header is `_header`, an
index into them): files of two versions of the harness keep their own columns.

Beside it, consolidated-meta.parquet holds the bytes of the points' meta-rank<k>.json files
(what `harness report --by gpu` joins) by the same rule: each with its size and time when read,
taken only while they are unchanged.
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness_schema.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

FILE = "consolidated-rows.parquet"
VERSION = 1
_KEY = b"pipeline-harness"
FILE_COLUMN, ROW_COLUMN, HEADER_COLUMN = "_file", "_row", "_header"
SIZE_COLUMN, MTIME_COLUMN = "_size", "_mtime_ns"
BOOKKEEPING = (FILE_COLUMN, ROW_COLUMN, HEADER_COLUMN, SIZE_COLUMN, MTIME_COLUMN)
"""Per row: its rank file (relative to the sweep), its line (0 is the first row), its header,
and the file's size and modification time (ns) when it was read."""
MIN_FILES = 1000
"""Below this many rank files a sweep is not consolidated: reading them takes a fraction of a
second (benchmarks/analysis_scale.py), and its folder stays as the harness wrote it."""

Stamp = tuple[int, int]
"""A rank file's size and modification time in ns: a rewritten file (every append of a row
renames a new file into place) has another."""


@dataclass(frozen=True, slots=True)
class Held:
    """What a sweep's consolidated file holds."""

    table: pa.Table
    """The cells (string columns, null where a file's header lacks the column) and BOOKKEEPING."""
    headers: tuple[tuple[str, ...], ...]
    """The rank files' headers, which `_header` indexes."""
    stamps: dict[str, Stamp]
    """Rank file (relative to the sweep) -> its stamp when read."""


def path_of(sweep_dir: Path) -> Path:
    return sweep_dir / FILE


def read(sweep_dir: Path) -> Held | None:
    """The sweep's consolidated file; None where there is none, or it cannot be used (torn,
    written by another version): its rank files are then read one by one."""
    path = path_of(sweep_dir)
    try:
        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {})[_KEY])
        if meta.get("version") != VERSION or not all(c in table.column_names for c in BOOKKEEPING):
            raise ValueError(f"version {meta.get('version')}, not {VERSION}")
        headers = tuple(tuple(h) for h in meta["headers"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as e:
        log.debug("%s: not used (%s); its rank files are read instead", path, e)
        return None
    files = table.column(FILE_COLUMN).to_pylist()
    sizes = table.column(SIZE_COLUMN).to_pylist()
    times = table.column(MTIME_COLUMN).to_pylist()
    stamps = dict(zip(files, zip(sizes, times, strict=True), strict=True))
    return Held(table=table, headers=headers, stamps=stamps)


def write(sweep_dir: Path, table: pa.Table, headers: list[tuple[str, ...]]) -> bool:
    """Replace the sweep's consolidated file with `table` (cells and BOOKKEEPING); False where
    it cannot be written (a read-only results folder, a full disk): reports still read."""
    return write_parquet(
        path_of(sweep_dir), table, {"version": VERSION, "headers": [list(h) for h in headers]}
    )


def write_parquet(path: Path, table: pa.Table, meta: dict[str, Any]) -> bool:
    """`table` with `meta` in its schema's metadata, written atomically to `path` (the
    consolidated files and the listing beside them); False where it cannot be written (a
    read-only results folder, a full disk): reports still read the files themselves."""
    table = table.replace_schema_metadata({_KEY: json.dumps(meta).encode()})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as e:
        log.debug("%s: not written (%s)", path, e)
        return False
    return True


META_FILE = "consolidated-meta.parquet"
"""The meta-rank<k>.json files of the sweep's points (what `harness report --by gpu` joins),
by the same rule: each file's bytes with its size and time when read."""
_META_COLUMNS = (FILE_COLUMN, SIZE_COLUMN, MTIME_COLUMN, "_bytes")

HeldMeta = dict[str, tuple[Stamp, bytes]]
"""Meta file (relative to the sweep) -> its stamp when read, and its bytes."""


def read_meta(sweep_dir: Path) -> HeldMeta:
    """The sweep's consolidated meta files; empty where there are none or they cannot be used."""
    path = sweep_dir / META_FILE
    try:
        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {})[_KEY])
        if meta.get("version") != VERSION or tuple(table.column_names) != _META_COLUMNS:
            raise ValueError(f"version {meta.get('version')}, not {VERSION}")
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as e:
        log.debug("%s: not used (%s); its meta files are read instead", path, e)
        return {}
    files, sizes, times, data = (table.column(c).to_pylist() for c in _META_COLUMNS)
    return {f: ((s, t), b) for f, s, t, b in zip(files, sizes, times, data, strict=True)}


def write_meta(sweep_dir: Path, held: HeldMeta) -> bool:
    """Replace the sweep's consolidated meta files with `held`; False where it cannot be written."""
    files = sorted(held)
    table = pa.table(
        [
            pa.array(files, pa.string()),
            pa.array([held[f][0][0] for f in files], pa.int64()),
            pa.array([held[f][0][1] for f in files], pa.int64()),
            pa.array([held[f][1] for f in files], pa.binary()),
        ],
        names=list(_META_COLUMNS),
    )
    return write_parquet(sweep_dir / META_FILE, table, {"version": VERSION})
