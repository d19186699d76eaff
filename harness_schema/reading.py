"""The one reader of a sweep folder: what `harness status`, `resume` and `report` (and a rank
reopening its point) read, tolerant of what a crash, a full disk, a copy cut short or a hand edit
leaves behind.

A file that cannot be read raises `UnreadableFile`, whose text is one line: the file and what is
wrong with it, never a traceback. A rank file (rank<k>.csv) that cannot be read counts as
missing: its units are measured again by `harness resume`, which first moves it aside
(`set_aside`: renamed, never deleted, so that nothing measured is lost). A sweep file
(sweep.json, plan.json, jobs.json, repeats.json) that cannot be read stops `status` and `resume`
with its line: without it they cannot tell which units a sweep wants, or which jobs may still
write them.

Torch-free and pandas-free: the analysis and the login node read through it.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness_schema import layout
from harness_schema.atomic import atomic_write_text

log = logging.getLogger(__name__)

TORN = "a torn or hand-edited file"
REQUIRED_COLUMNS = ("point_id", "point_index", "rung", "repeat", "status", "training_time")
"""Columns every rank file has had since the first version; a file without one is not a row file."""
UNIT_STATUSES = ("ok", "failed", "skipped")


class UnreadableFile(ValueError):
    """A file of a sweep that cannot be read; str() is the user's one line: "<file>: <what>"."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path = path
        self.what = what


# --- files as text and JSON --------------------------------------------------------------------


def read_text(path: Path | str) -> str:
    """The file's UTF-8 text; UnreadableFile when missing, unreadable or not text. `path` may
    be a str (a normalised path, as str(Path) writes it): the report reads 100,000 files."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as e:
        raise UnreadableFile(Path(path), "missing") from e
    except OSError as e:
        raise UnreadableFile(Path(path), f"unreadable ({type(e).__name__}: {e.strerror or e})") from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnreadableFile(
            Path(path), f"unreadable (not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start}; {TORN})"
        ) from e


def read_json(path: Path, shape: type[dict[str, Any]] | type[list[Any]]) -> Any:
    """The JSON document of `path`, which must be a `shape` (dict or list)."""
    text = read_text(path)
    try:
        data = json.loads(text)
    except ValueError as e:
        where = f"line {e.lineno} column {e.colno}: {e.msg}" if isinstance(e, json.JSONDecodeError) else e
        raise UnreadableFile(path, f"unreadable (not JSON: {where}; {TORN})") from e
    if not isinstance(data, shape):
        raise UnreadableFile(
            path,
            f"a JSON {type(data).__name__} where a JSON {'object' if shape is dict else 'list'} "
            "belongs (written by another version of the harness, or edited by hand)",
        )
    return data


def another_version(path: Path, what: str) -> UnreadableFile:
    """A sweep file whose content this version does not know (an older or a newer harness)."""
    return UnreadableFile(
        path,
        f"{what}: written by another version of the harness; "
        "status and resume cannot read this sweep (harness report still reads its rows)",
    )


# --- rank files --------------------------------------------------------------------------------


def read_row_file(path: Path | str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of one rank file; UnreadableFile says what is wrong with it."""
    text = read_text(path)
    if not text.strip():
        raise UnreadableFile(Path(path), "empty file")
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        header = next(reader)
        body = list(reader)
    except csv.Error as e:
        raise UnreadableFile(Path(path), f"unreadable (line {reader.line_num}: {e}; {TORN})") from e
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise UnreadableFile(Path(path), f"missing columns {', '.join(missing)}")
    # The cells that place a row, by position: a report reads 100,000 files through here, and
    # a dict per row cost a third of its reading.
    at = {column: header.index(column) for column in _PLACING}
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise UnreadableFile(
                Path(path), f"torn (line {number} has {len(row)} fields, the header {len(header)}; {TORN})"
            )
        if problem := _bad_cell(row, at):
            raise UnreadableFile(Path(path), f"torn (line {number}: {problem}; {TORN})")
    if not body:
        raise UnreadableFile(Path(path), "a header and no rows")
    return header, body


_PLACING = ("point_id", "rung", "point_index", "repeat", "status")


def _bad_cell(row: list[str], at: dict[str, int]) -> str:
    """What is wrong with the cells that place a row (its point and unit), or ""."""
    for column in ("point_id", "rung"):
        if not row[at[column]]:
            return f"{column} is blank"
    for column in ("point_index", "repeat"):
        if not row[at[column]].isdigit():
            return f"{column} is {row[at[column]]!r}, not a whole number"
    if row[at["status"]] not in UNIT_STATUSES:
        return f"status is {row[at['status']]!r}, not one of {', '.join(UNIT_STATUSES)}"
    return ""


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of one rank file, column -> cell; UnreadableFile when it cannot be read."""
    header, body = read_row_file(path)
    return [dict(zip(header, row, strict=True)) for row in body]


Unit = tuple[str, int]
"""(rung, repeat): what one row of each rank measures."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PointRows:
    """What a point's rank files hold, read once for status and resume."""

    units: set[Unit]
    """The units every rank has a row for (ok, failed or skipped): the point's done units."""
    failed: set[Unit] = field(default_factory=set)
    """The done units with a failed row on some rank."""
    error: str = ""
    """The first failed row's error."""
    unreadable: tuple[UnreadableFile, ...] = ()
    """Rank files that exist and cannot be read: their units count as missing."""
    last_pass: int = -1
    """The highest run_pass of its rows (-1: none was measured in an interleaved pass)."""


def read_point(point_path: Path, world_size: int) -> PointRows:
    """The rows of every rank of a point; a missing or unreadable rank file has no units."""
    per_rank: list[set[Unit]] = []
    failed: set[Unit] = set()
    error = ""
    unreadable: list[UnreadableFile] = []
    last_pass = -1
    for rank in range(world_size):
        path = layout.rank_file(point_path, rank)
        try:
            rows = read_rows(path) if path.exists() else []
        except UnreadableFile as e:
            unreadable.append(e)
            rows = []
        per_rank.append({(r["rung"], int(r["repeat"])) for r in rows})
        for r in rows:
            if r["status"] == "failed":
                failed.add((r["rung"], int(r["repeat"])))
                error = error or r.get("error", "")
        last_pass = max([last_pass, *(int(r["run_pass"]) for r in rows if r.get("run_pass"))])
    units = set.intersection(*per_rank) if per_rank else set()
    return PointRows(
        units=units, failed=failed & units, error=error, unreadable=tuple(unreadable), last_pass=last_pass
    )


def set_aside(path: Path, why: str) -> Path:
    """Rename `path` to `<name>.<why>-<time>` beside it: out of every reader's way (readers
    read rank<k>.csv only), and kept for whoever wants to look at it."""
    target = _unused(lambda stamp: path.with_name(f"{path.name}.{why}-{stamp}"))
    path.rename(target)
    log.debug("%s: moved aside to %s", path, target.name)
    return target


def set_aside_unreadable(point_path: Path, world_size: int) -> list[str]:
    """Move aside every rank file of the point that cannot be read, so that its units are
    measured again; a line each saying what was moved, where, and why."""
    lines = []
    for e in read_point(point_path, world_size).unreadable:
        target = set_aside(e.path, "torn")
        lines.append(f"{e}; moved aside to {target.name}: its units are measured again")
    return lines


def rows_or_set_aside(path: Path) -> list[dict[str, str]]:
    """The rows of a rank file about to be written again (a rank reopening its point); a file
    that cannot be read is moved aside (and said), and its units count as missing."""
    try:
        return read_rows(path)
    except UnreadableFile as e:
        target = set_aside(path, "torn")
        log.warning("%s; moved aside to %s: its units are measured again", e, target.name)
        return []


def set_aside_units(point_path: Path, world_size: int, units: set[Unit], why: str) -> int:
    """Move the rows of `units` out of every rank file of the point into rank<k>.csv.<why>-<time>
    beside it (out of every reader's way, as set_aside's; the other rows stay), so that those
    units count as missing and are measured again; the number of rows moved. Every rank's rows
    of a unit go: the ranks measured it together."""
    moved = 0
    for rank in range(world_size):
        path = layout.rank_file(point_path, rank)
        if not path.exists():
            continue
        header, body = read_row_file(path)
        unit = {c: header.index(c) for c in ("rung", "repeat")}
        going = [r for r in body if (r[unit["rung"]], int(r[unit["repeat"]])) in units]
        if not going:
            continue
        kept = [r for r in body if r not in going]
        aside = _unused(lambda stamp: path.with_name(f"{path.name}.{why}-{stamp}"))  # noqa: B023
        atomic_write_text(aside, _csv(header, going))
        if kept:
            atomic_write_text(path, _csv(header, kept))
        else:
            path.unlink()  # its rows are all in the file just written
        moved += len(going)
    return moved


def _unused(name: Callable[[str], Path]) -> Path:
    """name(time stamp), or name(stamp-2)... where that file exists already: nothing set aside
    before is overwritten."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    target, n = name(stamp), 1
    while target.exists():
        n += 1
        target = name(f"{stamp}-{n}")
    return target


def _csv(header: list[str], body: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, *body])
    return buffer.getvalue()


def read_sweep_spec(sweep_dir: Path) -> str:
    """The sweep's resolved spec (spec.yaml), which `resume` runs its points with."""
    try:
        return read_text(sweep_dir / "spec.yaml")
    except UnreadableFile as e:
        raise UnreadableFile(
            e.path,
            f"{e.what}: resume runs the points with the sweep's own spec "
            "(harness report still reads its rows)",
        ) from e
