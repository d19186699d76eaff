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

    def sweep_dirs(self) -> list[Path]:
        if self.rows.empty:
            return []
        return [Path(s) for s in sorted(self.rows["sweep_dir"].unique())]


def find_row_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """rank<k>.csv files under each path (a sweep, a spec folder, a results root, a glob, a
    point folder, or the files themselves)."""
    files: list[str] = []
    problems: list[str] = []
    for given in paths:
        matches = [Path(m) for m in sorted(glob.glob(str(given)))] or [Path(given)]
        for path in matches:
            if path.is_file():
                if ROW_FILE.match(path.name):
                    files.append(str(path))
                else:
                    problems.append(f"{path}: not a rank<k>.csv row file; skipped")
            elif path.is_dir():
                found = _rank_files(str(path))
                if not found:
                    problems.append(f"{path}: no result rows (points/<id>/rank<k>.csv) under it")
                files.extend(found)
            else:
                problems.append(f"{path}: no such file or folder")
    return [Path(f) for f in sorted(set(files))], problems


def _rank_files(root: str) -> list[str]:
    """points/<id>/rank<k>.csv at any depth under root; rank<k>.csv in root itself when there
    are none (a point folder, or rows copied into a folder). os.scandir on strings: pathlib's
    glob costs several times more on 10,000 point folders."""
    found: list[str] = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        if os.path.basename(folder) == "points":
            for point in _subfolders(folder):
                found.extend(_rank_names(point))
            continue
        if depth < MAX_DEPTH:
            stack.extend((sub, depth + 1) for sub in _subfolders(folder))
    return found or _rank_names(root)


MAX_DEPTH = 8  # results root / spec / sweep / points is 3 deep; a symlink loop stops here


def _subfolders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [e.path for e in entries if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []


def _rank_names(folder: str) -> list[str]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names if ROW_FILE.match(n)]


def sweep_dir_of(row_file: Path) -> Path:
    """results/<spec>/<sweep>/points/<id>/rank<k>.csv -> results/<spec>/<sweep>."""
    if row_file.parent.parent.name == "points":
        return row_file.parent.parent.parent
    return row_file.parent


# The one reader of rank files (harness_schema/reading.py): what status and resume count as
# done is what the report reads. BadFile keeps its old name for notebooks.
BadFile = UnreadableFile


def load_results(paths: Iterable[str | Path]) -> Loaded:
    files, problems = find_row_files(paths)
    # Files written by one version of the harness share a header: one DataFrame per header.
    by_header: dict[tuple[str, ...], list[list[str]]] = {}
    for path in files:
        try:
            header, body = read_row_file(path)
        except UnreadableFile as e:
            problems.append(f"{e}; skipped")
            continue
        extra = [str(sweep_dir_of(path)), str(path)]
        by_header.setdefault(tuple(header), []).extend(row + extra for row in body)
    if not by_header:
        empty = pd.DataFrame({c: pd.Series(dtype=object) for c in (*ROW_COLUMNS, *ADDED_COLUMNS)})
        return Loaded(rows=empty, problems=problems, files=len(files))
    frames = [
        pd.DataFrame(body, columns=[*header, *ADDED_COLUMNS], dtype=object)
        for header, body in by_header.items()
    ]
    rows = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    rows = _typed(rows)
    return Loaded(rows=_measured(rows, problems), problems=problems, files=len(files))


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


def _typed(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.rename(columns={old: new for old, new in RENAMED.items() if new not in rows.columns})
    columns: dict[str, Any] = {}
    for column in (*ROW_COLUMNS, *ADDED_COLUMNS):
        values = rows[column] if column in rows.columns else pd.Series("", index=rows.index, dtype=object)
        values = values.fillna("")
        if column in NUMBER_COLUMNS:
            columns[column] = pd.to_numeric(values, errors="coerce")
        elif column in BOOL_COLUMNS:
            columns[column] = values.map({"True": True, "False": False, "true": True, "false": False})
        else:
            columns[column] = values.astype(object)
    extra = [c for c in rows.columns if c not in columns]
    for column in extra:  # columns of a newer harness: kept as text
        columns[column] = rows[column].fillna("").astype(object)
    return pd.DataFrame(columns)


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


def load_meta(rows: pd.DataFrame, problems: list[str] | None = None) -> pd.DataFrame:
    """meta-rank<k>.json of every (sweep dir, point, rank) in `rows`: one row each, with the
    host, GPU model and count, and versions. A missing file gives no row; a corrupt one is
    reported in `problems`."""
    columns = ["sweep_dir", "point_id", "rank", *META_COLUMNS]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    keys = rows[["sweep_dir", "point_id", "rank"]].dropna().drop_duplicates()
    records = []
    for sweep_dir, point_id, rank in keys.itertuples(index=False):
        path = Path(sweep_dir) / "points" / str(point_id) / META_FILE.format(rank=int(rank))
        if not path.parent.is_dir():  # rows directly in a folder (tests, copies)
            path = Path(sweep_dir) / META_FILE.format(rank=int(rank))
        try:
            meta = json.loads(path.read_bytes())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            if problems is not None:
                problems.append(f"{path}: unreadable ({type(e).__name__}: {e}); node type unknown")
            continue
        if not isinstance(meta, dict):
            if problems is not None:
                problems.append(f"{path}: not a JSON object; node type unknown")
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
    return pd.DataFrame(records, columns=columns)


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
    """The sampler's timeline of one rank of one point (samples-rank<k>.csv), or None."""
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
