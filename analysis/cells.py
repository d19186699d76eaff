"""The cells of the rank files, as text, gathered from two places: a sweep's consolidated file
(analysis/consolidated.py) for the files unchanged since it was written, and the files read
one by one for the rest; and the consolidated file written again where it is stale.

Apart from finding the files (analysis/row_files.py) and typing the cells
(analysis/typed_rows.py): this is the one place that knows which rows came from where, and the
bookkeeping (file index, row, header, size and time) that makes both sources give the same rows.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis import consolidated
from analysis.row_files import sweep_of

# The bookkeeping columns of the cells' table: the index of each row's file in `sources`,
# and its place in that file.
FILE, ROW = "_file", "_row"


class Cells:
    """The cells of the rank files, as text: from the sweeps' consolidated files and from the
    files read one by one, in the order of `sources` (sorted), each file's rows in its order."""

    def __init__(self, sources: list[str]) -> None:
        self.sources = sources
        where = [sweep_of(s) for s in sources]
        self.sweeps = [sweep for sweep, _ in where]
        self.in_layout = [inside for _, inside in where]
        self.headers: list[tuple[str, ...]] = []
        self.header_of = np.full(len(sources), -1)  # index into headers; -1: no rows read
        self.stamps = np.full((len(sources), 2), -1, dtype=np.int64)  # size, mtime_ns; -1: none
        self.pieces: list[pa.Table] = []
        self.was_read = np.zeros(len(sources), dtype=bool)  # read one by one, rows and all
        self.read: dict[tuple[str, ...], list[list[Any]]] = {}
        self.refresh: dict[str, tuple[list[int], bool]] = {}
        """The sweeps to consolidate: their files, and whether the file they have holds rows
        of files that are gone or changed (or there is none)."""

    def _header_id(self, header: tuple[str, ...]) -> int:
        if header not in self.headers:
            self.headers.append(header)
        return self.headers.index(header)

    def take_consolidated(self, whole: set[str], *, use: bool) -> list[int]:
        """Take the rows of unchanged files from the consolidated files of their sweeps
        (`use`), and note the sweeps of `whole` to consolidate; the files left to read one
        by one."""
        members: dict[str, list[int]] = {}
        fresh = []
        for i in range(len(self.sources)):
            if self.in_layout[i]:
                members.setdefault(self.sweeps[i], []).append(i)
            else:  # rows outside a sweep's layout (copied into a folder): read, never consolidated
                fresh.append(i)
        for sweep, files in members.items():
            refresh = sweep in whole and len(files) >= consolidated.MIN_FILES
            if use or refresh:
                # Each file's size and time before it is read: a file rewritten after this
                # is read again next time, never taken as read.
                for i in files:
                    self.stamps[i] = _stamp(self.sources[i])
            held = consolidated.read(Path(sweep)) if use else None
            taken = self._take(sweep, files, held) if held is not None else set()
            fresh.extend(i for i in files if i not in taken)
            if refresh:
                self.refresh[sweep] = (files, held is None or len(held.stamps) != len(taken))
        return sorted(fresh)

    def _take(self, sweep: str, files: list[int], held: consolidated.Held) -> set[int]:
        cut = len(sweep) + 1
        sizes, times = self.stamps[files, 0].tolist(), self.stamps[files, 1].tolist()
        sources, stamps = self.sources, held.stamps
        unchanged = {
            name: i
            for i, size, mtime in zip(files, sizes, times, strict=True)
            if stamps.get(name := sources[i][cut:]) == (size, mtime)
        }
        if not unchanged:
            return set()
        names = pa.array(list(unchanged), pa.string())
        table = held.table
        position = pc.index_in(table.column(consolidated.FILE_COLUMN), value_set=names)
        keep = pc.is_valid(position)
        table, position = table.filter(keep), position.filter(keep)
        index = np.fromiter(unchanged.values(), dtype=np.int64, count=len(unchanged))
        at = index[position.to_numpy()]
        local = np.array([self._header_id(h) for h in held.headers])
        self.header_of[at] = local[table.column(consolidated.HEADER_COLUMN).to_numpy()]
        cells = table.drop_columns(list(consolidated.BOOKKEEPING))
        row = table.column(consolidated.ROW_COLUMN).cast(pa.int64())
        self.pieces.append(cells.append_column(FILE, pa.array(at, pa.int64())).append_column(ROW, row))
        return set(unchanged.values())

    def add(self, i: int, header: list[str], body: list[list[str]]) -> None:
        """A file read one by one: its rows, grouped by header (one table per header)."""
        key = tuple(header)
        self.header_of[i] = self._header_id(key)
        self.was_read[i] = True
        self.read.setdefault(key, []).extend([*row, i, n] for n, row in enumerate(body))

    def table(self) -> pa.Table | None:
        """Every row's cells (null where its file's header lacks the column), `_file` (the
        index into sources) and `_row`, in the order of reading every file: the files of the
        first header met first (a results folder written by two versions of the harness),
        then file by file, row by row."""
        pieces = list(self.pieces)
        for header, body in self.read.items():
            columns = list(zip(*body, strict=True))
            arrays = [pa.array(c, pa.string()) for c in columns[: len(header)]]
            arrays += [pa.array(columns[-2], pa.int64()), pa.array(columns[-1], pa.int64())]
            pieces.append(pa.table(arrays, names=[*header, FILE, ROW]))
        self.read = {}
        if not pieces:
            return None
        table = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces, promote_options="default")
        if table.num_rows == 0:
            return None
        files = table.column(FILE).to_numpy()
        first_met = {h: n for n, h in enumerate(dict.fromkeys(self.header_of[np.unique(files)]))}
        group = np.array([first_met.get(h, -1) for h in range(len(self.headers))])[self.header_of[files]]
        order = np.lexsort((table.column(ROW).to_numpy(), files, group))
        if (order[1:] > order[:-1]).all():  # in order already (one consolidated file): no copy
            return table
        return table.take(order)

    def columns(self, files: np.ndarray) -> list[str]:
        """The columns of the headers of `files`, as met file by file."""
        met = dict.fromkeys(self.header_of[np.unique(files)])
        return list(dict.fromkeys(c for h in met for c in self.headers[h]))

    def file_keys(self) -> dict[str, str]:
        """Per sweep to consolidate: a digest of its rank files' names, each with its size and
        time before it was read: what its rows were read from (analysis/summary_cache.py's key).
        A sweep some of whose rows come from files outside its layout has none."""
        outside = {self.sweeps[i] for i in np.flatnonzero(~np.asarray(self.in_layout, dtype=bool))}
        keys = {}
        for sweep, (files, _) in self.refresh.items():
            if sweep in outside:
                continue
            cut = len(sweep) + 1
            digest = hashlib.sha256("\0".join(self.sources[i][cut:] for i in files).encode())
            digest.update(self.stamps[files].tobytes())
            keys[sweep] = digest.hexdigest()
        return keys

    def write_consolidated(self, table: pa.Table) -> None:
        """Write the consolidated file of each sweep to refresh where it lacks rows read now,
        or holds rows of files gone or changed."""
        files = table.column(FILE).to_numpy()
        for sweep, (members, stale) in self.refresh.items():
            if not stale and not self.was_read[members].any():
                continue
            mine = np.zeros(len(self.sources), dtype=bool)
            mine[members] = True
            part = table.filter(pa.array(mine[files]))
            if part.num_rows == 0:
                continue
            at = part.column(FILE).to_numpy()
            names = self.columns(at)
            cut = len(sweep) + 1
            relative = np.empty(len(self.sources), dtype=object)
            relative[members] = [self.sources[i][cut:] for i in members]
            local = {h: n for n, h in enumerate(dict.fromkeys(self.header_of[np.unique(at)]))}
            header_ids = np.array([local.get(h, -1) for h in range(len(self.headers))])[self.header_of[at]]
            arrays = [part.column(c).cast(pa.string()) for c in names]
            arrays += [
                pa.array(relative[at], pa.string()),
                part.column(ROW),
                pa.array(header_ids, pa.int32()),
                pa.array(self.stamps[at, 0]),
                pa.array(self.stamps[at, 1]),
            ]
            out = pa.table(arrays, names=[*names, *consolidated.BOOKKEEPING])
            consolidated.write(Path(sweep), out, [self.headers[h] for h in local])


def _stamp(source: str) -> consolidated.Stamp:
    try:
        st = os.stat(source)
    except OSError:
        return -1, -1  # gone: reading it says so
    return st.st_size, st.st_mtime_ns
