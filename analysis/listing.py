"""A sweep's listing of its point folders (consolidated-listing.parquet), so that a report on a
large sweep does not list 100,000 point folders again when none changed (issue #36: listing
them was an eighth of a report).

A folder's modification time changes when an entry is added to it, removed or renamed into
it (the harness writes every rank file through a temporary file and a rename). The listing
keeps, per point folder, its time when it was listed with the rank files and whether a
`profile` entry was in it; a report stats each point folder (a stat costs a fifth of a
listing) and lists again only those whose time moved; it lists `points/` again only where its
own time moved (points added or gone). A rank file rewritten in place leaves its folder's
time as it was: the rank files' own size and time (analysis/consolidated.py) see that.

A time is kept only where it is older than RACY_NS when the folder is statted: an entry added
in the same tick of the file system's clock as the time kept would leave the time unchanged
(the "racy" case of git's index); a folder changed within the last RACY_NS is listed again
next time. Like the consolidated file it is never wrong, only more or less complete, and safe
to delete; it is written by `harness report` where the sweep's folder is writable.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.consolidated import write_parquet
from harness_schema.layout import ROW_FILE

log = logging.getLogger(__name__)

FILE = "consolidated-listing.parquet"
VERSION = 1
_KEY = b"pipeline-harness"
PROFILE_DIR = "profile"  # points/<id>/profile/: the profiler's traces (analysis/profiles.py)
UNKNOWN = -1
"""A folder's time not kept (changed too recently, or not statted): it is listed next time."""
RACY_NS = 2_000_000_000
"""A folder changed less than this before it was statted is listed again next time: longer
than any file system's clock tick, and than the skew between a login node and a file server
that a report in a loop would meet."""
_COLUMNS = ("point", "mtime_ns", "ranks", "profile")

Entry = tuple[int, tuple[str, ...], bool]
"""A point folder's time (UNKNOWN where not kept), its rank files' names, and whether it
holds a `profile` entry."""


@dataclass(slots=True)
class Listing:
    points_mtime: int
    """The time of `points/` when it was listed (UNKNOWN where not kept)."""
    points: dict[str, Entry] = field(default_factory=dict)
    """Point folder name -> its entry, in the order the folder was listed."""


def path_of(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / FILE


def list_points(points: str, held: Listing | None) -> tuple[Listing, bool]:
    """The listing of a sweep's `points/` folder, taken from `held` where the folders' times
    say nothing changed; and whether it differs from `held` (to write it again)."""
    now = time.time_ns()  # before any stat: a time kept is older than RACY_NS before its stat
    try:
        points_mtime = os.stat(points).st_mtime_ns  # before the listing: a change after it is seen
    except OSError:
        return Listing(UNKNOWN), held is not None
    same_names = held is not None and held.points_mtime != UNKNOWN and held.points_mtime == points_mtime
    names = list(held.points) if held is not None and same_names else _subfolders(points)
    listing = Listing(points_mtime if points_mtime < now - RACY_NS else UNKNOWN)
    changed = held is None or not same_names or listing.points_mtime != held.points_mtime
    known = held.points if held is not None else {}
    for name in names:
        folder = join(points, name)
        try:
            mtime = os.stat(folder).st_mtime_ns
        except OSError:
            listing.points[name] = (UNKNOWN, (), False)
            changed = True
            continue
        entry = known.get(name)
        if entry is not None and entry[0] != UNKNOWN and entry[0] == mtime:
            listing.points[name] = entry
            continue
        try:
            entries = os.listdir(folder)
        except OSError:
            entries = []
        ranks = tuple(n for n in entries if ROW_FILE.match(n))
        listing.points[name] = (mtime if mtime < now - RACY_NS else UNKNOWN, ranks, PROFILE_DIR in entries)
        changed = True
    return listing, changed


def join(folder: str, name: str) -> str:
    """str(Path(folder) / name) for a normalised folder and a name from its listing (no
    separator in it): os.path.join's answer, without its checks (100,000 points, twice)."""
    if folder == ".":
        return name
    if os.sep != "/":
        return os.path.join(folder, name)
    return folder + name if folder.endswith("/") else folder + "/" + name


def _subfolders(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [e.name for e in entries if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []


def read(sweep_dir: str | Path) -> Listing | None:
    """The sweep's listing; None where there is none or it cannot be used (torn, another version)."""
    path = path_of(sweep_dir)
    try:
        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {})[_KEY])
        if meta.get("version") != VERSION or tuple(table.column_names) != _COLUMNS:
            raise ValueError(f"version {meta.get('version')}, not {VERSION}")
        points_mtime = int(meta["points_mtime_ns"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as e:
        log.debug("%s: not used (%s); its points are listed instead", path, e)
        return None
    names, times, ranks, profiles = (table.column(c).to_pylist() for c in _COLUMNS)
    entries = zip(names, times, ranks, profiles, strict=True)
    return Listing(points_mtime, {n: (t, tuple(r.split("/")) if r else (), p) for n, t, r, p in entries})


def write(sweep_dir: str | Path, listing: Listing) -> bool:
    """Replace the sweep's listing; False where it cannot be written (reports still list)."""
    names = list(listing.points)
    entries = list(listing.points.values())
    table = pa.table(
        [
            pa.array(names, pa.string()),
            pa.array([e[0] for e in entries], pa.int64()),
            pa.array(["/".join(e[1]) for e in entries], pa.string()),
            pa.array([e[2] for e in entries], pa.bool_()),
        ],
        names=list(_COLUMNS),
    )
    return write_parquet(
        path_of(sweep_dir), table, {"version": VERSION, "points_mtime_ns": listing.points_mtime}
    )
