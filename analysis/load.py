"""Find and read the rows of any number of result folders into one tidy DataFrame.

A missing, partial or corrupt file is reported (which file, what is wrong) and skipped: it
never stops a report.

Each rank file is parsed with the csv module and the rows of all files are turned into one
DataFrame at the end: `pandas.read_csv` per file costs about a millisecond of set-up each,
which is most of the time for a sweep of 10,000 points (see benchmarks/analysis_scale.py).
"""

from __future__ import annotations

import glob
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from analysis import consolidated
from analysis.consolidated import HeldMeta
from harness_schema.layout import ROW_FILE
from harness_schema.reading import UnreadableFile, read_json, read_row_file, read_text
from harness_schema.rows import BOOL_COLUMNS, NUMBER_COLUMNS, ROW_COLUMNS

log = logging.getLogger(__name__)

TEXT_COLUMNS = tuple(c for c in ROW_COLUMNS if c not in BOOL_COLUMNS + NUMBER_COLUMNS)
# Added by the loader: where a row came from. `sweep_dir` tells apart two sweeps with the same
# id under two spec names; `source` names the file in messages.
ADDED_COLUMNS = ("sweep_dir", "source")
META_FILE = "meta-rank{rank}.json"
SAMPLES_FILE = "samples-rank{rank}.csv"


@dataclass
class Loaded:
    rows: pd.DataFrame
    problems: list[str] = field(default_factory=list)
    files: int = 0
    profiled: dict[str, list[str]] = field(default_factory=dict)
    """Per sweep whose every point was listed: its point folders that hold a `profile` entry,
    seen in the listing of each point (analysis.profiles.trace_dirs takes them rather than
    looking into every point folder again)."""

    def sweep_dirs(self) -> list[Path]:
        if self.rows.empty:
            return []
        return [Path(s) for s in sorted(self.rows["sweep_dir"].unique())]


def find_row_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """rank<k>.csv files under each path (a sweep, a spec folder, a results root, a glob, a
    point folder, or the files themselves)."""
    found = _find(paths)
    return [Path(f) for f in found.files], found.problems


@dataclass(frozen=True, slots=True)
class _Found:
    files: list[str]
    """Sorted, each as str(Path(it)) (what the rows' `source` is), made without pathlib: its
    cost per path was a third of reading 100,000 points."""
    problems: list[str]
    whole: set[str]
    """The sweep folders whose every point was listed (a sweep or a folder above it was given,
    not some of its points or files): only those are consolidated."""
    profiled: dict[str, list[str]]
    """Per sweep of `whole`: its point folders with a `profile` entry."""


def _find(paths: Iterable[str | Path]) -> _Found:
    files: list[str] = []
    problems: list[str] = []
    whole: set[str] = set()
    profiled: dict[str, list[str]] = {}
    for given in paths:
        matches = [Path(m) for m in sorted(glob.glob(str(given)))] or [Path(given)]
        for path in matches:
            if path.is_file():
                if ROW_FILE.match(path.name):
                    files.append(str(path))
                else:
                    problems.append(f"{path}: not a rank<k>.csv row file; skipped")
            elif path.is_dir():
                found = _rank_files(str(path), whole, profiled)  # str(Path): a normalised folder
                if not found:
                    problems.append(f"{path}: no result rows (points/<id>/rank<k>.csv) under it")
                files.extend(found)
            else:
                problems.append(f"{path}: no such file or folder")
    return _Found(sorted(set(files)), problems, whole, profiled)


def _rank_files(root: str, whole: set[str], profiled: dict[str, list[str]]) -> list[str]:
    """points/<id>/rank<k>.csv at any depth under root; rank<k>.csv in root itself when there
    are none (a point folder, or rows copied into a folder). os.scandir on strings: pathlib's
    glob costs several times more on 10,000 point folders. Adds to `whole` the sweeps whose
    points folder was listed, and to `profiled` their point folders with a `profile` entry."""
    found: list[str] = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        if os.path.basename(folder) == "points":
            sweep = os.path.dirname(folder) or "."
            traced = profiled.setdefault(sweep, [])
            for point in _subfolders(folder):
                found.extend(_rank_names(point, traced))
            whole.add(sweep)
            continue
        if depth < MAX_DEPTH:
            stack.extend((sub, depth + 1) for sub in _subfolders(folder))
    return found or _rank_names(root)


PROFILE_DIR = "profile"  # points/<id>/profile/: the profiler's traces (analysis/profiles.py)
MAX_DEPTH = 8  # results root / spec / sweep / points is 3 deep; a symlink loop stops here


def _subfolders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [_join(folder, e.name) for e in entries if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []


def _rank_names(folder: str, traced: list[str] | None = None) -> list[str]:
    """The rank files in folder; adds it to `traced` where it holds a `profile` entry."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    if traced is not None and PROFILE_DIR in names:
        traced.append(folder)
    return [_join(folder, n) for n in names if ROW_FILE.match(n)]


def _join(folder: str, name: str) -> str:
    """str(Path(folder) / name) for a normalised folder, without pathlib."""
    return name if folder == "." else os.path.join(folder, name)


def sweep_dir_of(row_file: Path) -> Path:
    """results/<spec>/<sweep>/points/<id>/rank<k>.csv -> results/<spec>/<sweep>."""
    if row_file.parent.parent.name == "points":
        return row_file.parent.parent.parent
    return row_file.parent


def _sweep_of(source: str) -> tuple[str, bool]:
    """str(sweep_dir_of(Path(source))) for a normalised path, without pathlib; and whether the
    file lies in a sweep's layout (points/<id>/rank<k>.csv)."""
    if os.sep == "/" and source.count("/") >= 4 and "//" not in source and not source.endswith("/"):
        # The common case, a file of points/<id>/ under a sweep of a results folder, in one
        # split (100,000 files a report: issue #36); the same answer as the general way below.
        sweep, points_name, _, _ = source.rsplit("/", 3)
        if points_name == "points":
            return sweep or "/", True
    point = os.path.dirname(source)
    points = os.path.dirname(point)
    if os.path.basename(points) == "points":
        return os.path.dirname(points) or ("/" if points.startswith("/") else "."), True
    return point or ".", False


# The one reader of rank files (harness_schema/reading.py): what status and resume count as
# done is what the report reads. BadFile keeps its old name for notebooks.
BadFile = UnreadableFile


def load_results(paths: Iterable[str | Path], *, consolidated: bool = True, refresh: bool = False) -> Loaded:
    """The rows of every rank file under `paths`, typed (harness_schema/rows.py), each with its
    sweep folder and file; unreadable files and rows are in `problems`.

    `consolidated`: take the rows of rank files unchanged since a sweep's consolidated file
    was written from it (analysis/consolidated.py), and read only the others; the rows are the
    same as when every file is read. `refresh`: write that file again for the sweeps whose
    points were all listed, where some of their rank files had to be read (`harness report`
    does; a read-only folder is left as it is)."""
    found = _find(paths)
    problems = list(found.problems)
    cells = _Cells([str(f) for f in found.files])
    fresh = cells.take_consolidated(found.whole if refresh else set(), use=consolidated)
    for i in fresh:
        try:
            header, body = read_row_file(found.files[i])
        except UnreadableFile as e:
            problems.append(f"{e}; skipped")
            continue
        cells.add(i, header, body)
    table = cells.table()
    if table is None:
        empty = pd.DataFrame({c: pd.Series(dtype=object) for c in (*ROW_COLUMNS, *ADDED_COLUMNS)})
        return Loaded(rows=empty, problems=problems, files=len(found.files), profiled=found.profiled)
    if refresh:
        cells.write_consolidated(table)
    rows = _typed(table, cells)
    return Loaded(
        rows=_measured(rows, problems), problems=problems, files=len(found.files), profiled=found.profiled
    )


class _Cells:
    """The cells of the rank files, as text: from the sweeps' consolidated files and from the
    files read one by one, in the order of `sources` (sorted), each file's rows in its order."""

    def __init__(self, sources: list[str]) -> None:
        self.sources = sources
        where = [_sweep_of(s) for s in sources]
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
        unchanged = {
            self.sources[i][cut:]: i
            for i in files
            if held.stamps.get(self.sources[i][cut:]) == (self.stamps[i, 0], self.stamps[i, 1])
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
        self.pieces.append(cells.append_column(_FILE, pa.array(at, pa.int64())).append_column(_ROW, row))
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
            pieces.append(pa.table(arrays, names=[*header, _FILE, _ROW]))
        self.read = {}
        if not pieces:
            return None
        table = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces, promote_options="default")
        if table.num_rows == 0:
            return None
        files = table.column(_FILE).to_numpy()
        first_met = {h: n for n, h in enumerate(dict.fromkeys(self.header_of[np.unique(files)]))}
        group = np.array([first_met.get(h, -1) for h in range(len(self.headers))])[self.header_of[files]]
        order = np.lexsort((table.column(_ROW).to_numpy(), files, group))
        return table.take(order)

    def columns(self, files: np.ndarray) -> list[str]:
        """The columns of the headers of `files`, as met file by file."""
        met = dict.fromkeys(self.header_of[np.unique(files)])
        return list(dict.fromkeys(c for h in met for c in self.headers[h]))

    def write_consolidated(self, table: pa.Table) -> None:
        """Write the consolidated file of each sweep to refresh where it lacks rows read now,
        or holds rows of files gone or changed."""
        files = table.column(_FILE).to_numpy()
        for sweep, (members, stale) in self.refresh.items():
            if not stale and not self.was_read[members].any():
                continue
            mine = np.zeros(len(self.sources), dtype=bool)
            mine[members] = True
            part = table.filter(pa.array(mine[files]))
            if part.num_rows == 0:
                continue
            at = part.column(_FILE).to_numpy()
            names = self.columns(at)
            cut = len(sweep) + 1
            relative = np.empty(len(self.sources), dtype=object)
            relative[members] = [self.sources[i][cut:] for i in members]
            local = {h: n for n, h in enumerate(dict.fromkeys(self.header_of[np.unique(at)]))}
            header_ids = np.array([local.get(h, -1) for h in range(len(self.headers))])[self.header_of[at]]
            arrays = [part.column(c).cast(pa.string()) for c in names]
            arrays += [
                pa.array(relative[at], pa.string()),
                part.column(_ROW),
                pa.array(header_ids, pa.int32()),
                pa.array(self.stamps[at, 0]),
                pa.array(self.stamps[at, 1]),
            ]
            out = pa.table(arrays, names=[*names, *consolidated.BOOKKEEPING])
            consolidated.write(Path(sweep), out, [self.headers[h] for h in local])


_FILE, _ROW = "_file", "_row"


def _stamp(source: str) -> consolidated.Stamp:
    try:
        st = os.stat(source)
    except OSError:
        return -1, -1  # gone: reading it says so
    return st.st_size, st.st_mtime_ns


MEASURED_COLUMNS = ("training_time", "samples")
"""What every ok row holds: a row without one (a blank or torn cell) measured nothing usable."""

LEAST = {"training_time": 1e-6, "samples": 1}
"""The least each of MEASURED_COLUMNS can truly be, finite: a window is at least one step,
timed by two clock reads (microseconds apart at best), of at least one sample. A row below
(0, 1e-300, a negative time or count) or infinite was not measured: it would be the fastest
setting (inf samples/s) or break the ratios (independent_ratio needs positive values)."""


def _measured(rows: pd.DataFrame, problems: list[str]) -> pd.DataFrame:
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


def _typed(table: pa.Table, cells: _Cells) -> pd.DataFrame:
    """The typed rows: NUMBER_COLUMNS as pandas.to_numeric makes them of the text (int64 where
    every cell is a whole number, else float64 with NaN for a blank), BOOL_COLUMNS True, False
    or NaN, the rest text ("" for a blank or a column the file lacks); then the columns of a
    newer harness, as text. Column by column in pyarrow: 100,000 points in a second."""
    files = table.column(_FILE).to_numpy()
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
    texts = _texts(raw, n)
    return texts.map(_TRUTH)


def _texts(raw: pa.ChunkedArray | None, n: int) -> pd.Series:
    """Text cells as Python strings ("" for a blank), through the column's distinct values:
    a column holds few of them, and every row shares their string objects."""
    if raw is None:
        return pd.Series(np.full(n, "", dtype=object), dtype=object)
    encoded = pc.fill_null(raw.combine_chunks(), "").dictionary_encode()
    values = encoded.dictionary.to_numpy(zero_copy_only=False).astype(object)
    return pd.Series(values[encoded.indices.to_numpy()], dtype=object)


META_COLUMNS = (
    "meta_hostname",
    "device_name",
    "gpu_count",
    "torch_version",
    "cuda_version",
    "python_version",
    "git_commit",
)
"""What load_meta() reads of meta-rank<k>.json: the host, the device and the versions."""


def load_meta(
    rows: pd.DataFrame, problems: list[str] | None = None, *, consolidated: bool = False
) -> pd.DataFrame:
    """`meta-rank<k>.json` of every (sweep dir, point, rank) in `rows`: one row each, with the
    host, GPU model and count, and versions. A missing file gives no row; a corrupt one is
    reported in `problems`. `consolidated`: take the bytes of the files unchanged since from
    their sweep's consolidated meta file (analysis/consolidated.py), and write it again where
    a sweep of MIN_FILES files or more had files to read (a report on 100,000 points opened
    every one of them)."""
    columns = ["sweep_dir", "point_id", "rank", *META_COLUMNS]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    keys = rows[["sweep_dir", "point_id", "rank"]].dropna().drop_duplicates()
    records = []
    held: dict[str, HeldMeta] = {}
    changed: dict[str, int] = {}  # sweep -> files read one by one
    for sweep_dir, point_id, rank in keys.itertuples(index=False):
        name = META_FILE.format(rank=int(rank))
        relative = os.path.join("points", str(point_id), name)
        if consolidated and sweep_dir not in held:
            held[sweep_dir] = _held_meta(str(sweep_dir))
        try:
            data = _meta_bytes(str(sweep_dir), relative, held.get(sweep_dir), changed)
        except FileNotFoundError:
            continue
        except OSError as e:
            if problems is not None:
                problems.append(f"{e.filename}: unreadable ({type(e).__name__}: {e}); node type unknown")
            continue
        try:
            meta = json.loads(data)
        except ValueError as e:
            if problems is not None:
                path = _meta_path(str(sweep_dir), relative)
                problems.append(f"{path}: unreadable ({type(e).__name__}: {e}); node type unknown")
            continue
        if not isinstance(meta, dict):
            if problems is not None:
                problems.append(
                    f"{_meta_path(str(sweep_dir), relative)}: not a JSON object; node type unknown"
                )
            continue
        records.append(
            [
                sweep_dir,
                point_id,
                rank,
                str(meta.get("hostname", "")),
                str(meta.get("device_name", "") or ""),
                meta.get("gpu_count"),
                str(meta.get("torch_version", "") or ""),
                str(meta.get("cuda_version", "") or ""),
                str(meta.get("python_version", "") or ""),
                str(meta.get("git_commit", "") or ""),
            ]
        )
    for sweep_dir in changed:
        _write_meta(sweep_dir, held[sweep_dir])
    return pd.DataFrame(records, columns=columns)


def _held_meta(sweep_dir: str) -> HeldMeta:
    return consolidated.read_meta(Path(sweep_dir))


def _write_meta(sweep_dir: str, held: HeldMeta) -> None:
    """Consolidate the sweep's meta files where it has MIN_FILES of them or more."""
    if len(held) >= consolidated.MIN_FILES:
        consolidated.write_meta(Path(sweep_dir), held)


def _meta_path(sweep_dir: str, relative: str) -> Path:
    """The meta file's path: in its point folder, or the sweep folder's own where there is none
    (rows directly in a folder: tests, copies)."""
    path = Path(sweep_dir) / relative
    return path if path.parent.is_dir() else Path(sweep_dir) / os.path.basename(relative)


def _meta_bytes(sweep_dir: str, relative: str, held: HeldMeta | None, changed: dict[str, int]) -> bytes:
    """The bytes of the point's meta file (points/<id>/meta-rank<k>.json, or the sweep folder's
    own where there is no point folder): from `held` where its size and time are the same, else
    read (and put in `held`, counted in `changed`)."""
    path = os.path.join(sweep_dir, relative)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.isdir(os.path.dirname(path)):
            raise
        return Path(sweep_dir, os.path.basename(relative)).read_bytes()  # rows directly in a folder
    if held is None:
        return Path(path).read_bytes()
    stamp = (st.st_size, st.st_mtime_ns)
    entry = held.get(relative)
    if entry is not None and entry[0] == stamp:
        return entry[1]
    data = Path(path).read_bytes()
    if len(data) == stamp[0]:  # not rewritten while read: else read again next time
        held[relative] = (stamp, data)
        changed[sweep_dir] = changed.get(sweep_dir, 0) + 1
    return data


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """What a sweep meant to measure (plan.json) and its spec text, when they are there."""

    sweep_dir: Path
    spec_text: str
    points: tuple[dict[str, Any], ...]


def load_plan(sweep_dir: Path, problems: list[str] | None = None) -> SweepPlan | None:
    path = sweep_dir / "plan.json"
    if not path.exists():
        return None
    try:
        listed = read_json(path, dict).get("points")
        if not isinstance(listed, list):
            raise UnreadableFile(path, "no list of points (written by another version of the harness)")
    except UnreadableFile as e:
        if problems is not None:
            problems.append(f"{e}; the plan is not checked")
        return None
    points = tuple(p for p in listed if isinstance(p, dict) and "id" in p)
    try:
        spec_text = read_text(sweep_dir / "spec.yaml")
    except UnreadableFile:
        spec_text = ""  # the spec is only shown; a sweep without one still reports
    return SweepPlan(sweep_dir=sweep_dir, spec_text=spec_text, points=points)


def load_samples(point_path: Path, rank: int) -> pd.DataFrame | None:
    """The sampler's timeline of one rank of one point (`samples-rank<k>.csv`), or None."""
    path = point_path / SAMPLES_FILE.format(rank=rank)
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        log.warning("%s: unreadable (%s); no timeline", path, e)
        return None
    if "t" not in frame.columns or frame.empty:
        return None
    for column in frame.columns:
        if column not in ("phase",):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["phase"] = frame["phase"].fillna("").astype(str) if "phase" in frame else ""
    return frame
