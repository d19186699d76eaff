"""Find the rank files (`points/<id>/rank<k>.csv`) under the paths a report is given: a sweep,
a spec folder, a results root, a glob, a point folder, or the files themselves.

Apart from reading them (analysis/load.py): what is found, and which sweeps were listed whole
(only those are consolidated), is a walk of folders with no rows in it. The walk is os.scandir
on strings, not pathlib: on 10,000 point folders pathlib costs several times more.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from analysis import listing
from harness_schema.layout import ROW_FILE


def find_row_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """rank<k>.csv files under each path (a sweep, a spec folder, a results root, a glob, a
    point folder, or the files themselves)."""
    found = find(paths)
    return [Path(f) for f in found.files], found.problems


@dataclass(frozen=True, slots=True)
class Found:
    files: list[str]
    """Sorted, each as str(Path(it)) (what the rows' `source` is), made without pathlib: its
    cost per path was a third of reading 100,000 points."""
    problems: list[str]
    whole: set[str]
    """The sweep folders whose every point was listed (a sweep or a folder above it was given,
    not some of its points or files): only those are consolidated."""
    profiled: dict[str, list[str]]
    """Per sweep of `whole`: its point folders with a `profile` entry."""
    listings: dict[str, tuple[listing.Listing, bool]] = field(default_factory=dict)
    """Per sweep of `whole`, with `listings`: its listing (analysis/listing.py), and whether it
    differs from the one kept (to write it again)."""


def find(paths: Iterable[str | Path], *, listings: bool = False) -> Found:
    """`listings`: take each sweep's listing of its point folders (analysis/listing.py) where
    the folders' times say nothing changed, rather than listing every point folder."""
    files: list[str] = []
    problems: list[str] = []
    whole: set[str] = set()
    profiled: dict[str, list[str]] = {}
    listed: dict[str, tuple[listing.Listing, bool]] | None = {} if listings else None
    for given in paths:
        matches = [Path(m) for m in sorted(glob.glob(str(given)))] or [Path(given)]
        for path in matches:
            if path.is_file():
                if ROW_FILE.match(path.name):
                    files.append(str(path))
                else:
                    problems.append(f"{path}: not a rank<k>.csv row file; skipped")
            elif path.is_dir():
                found = _rank_files(str(path), whole, profiled, listed)  # str(Path): a normalised folder
                if not found:
                    problems.append(f"{path}: no result rows (points/<id>/rank<k>.csv) under it")
                files.extend(found)
            else:
                problems.append(f"{path}: no such file or folder")
    return Found(sorted(set(files)), problems, whole, profiled, listed or {})


def _rank_files(
    root: str,
    whole: set[str],
    profiled: dict[str, list[str]],
    listed: dict[str, tuple[listing.Listing, bool]] | None = None,
) -> list[str]:
    """points/<id>/rank<k>.csv at any depth under root; rank<k>.csv in root itself when there
    are none (a point folder, or rows copied into a folder). os.scandir on strings: pathlib's
    glob costs several times more on 10,000 point folders. Adds to `whole` the sweeps whose
    points folder was listed, and to `profiled` their point folders with a `profile` entry;
    with `listed`, takes the sweeps' listings where unchanged, and adds them to it."""
    found: list[str] = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        if os.path.basename(folder) == "points":
            sweep = os.path.dirname(folder) or "."
            traced = profiled.setdefault(sweep, [])
            if listed is None:
                for point in _subfolders(folder):
                    found.extend(_rank_names(point, traced))
            else:
                listed[sweep] = listing.list_points(folder, listing.read(sweep))
                for name, (_, ranks, has_profile) in listed[sweep][0].points.items():
                    point = _join(folder, name)
                    if has_profile:
                        traced.append(point)
                    found.extend(_join(point, rank) for rank in ranks)
            whole.add(sweep)
            continue
        if depth < MAX_DEPTH:
            stack.extend((sub, depth + 1) for sub in _subfolders(folder))
    return found or _rank_names(root)


PROFILE_DIR = listing.PROFILE_DIR
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


_join = listing.join
"""str(Path(folder) / name) for a normalised folder, without pathlib."""


def sweep_dir_of(row_file: Path) -> Path:
    """results/<spec>/<sweep>/points/<id>/rank<k>.csv -> results/<spec>/<sweep>."""
    if row_file.parent.parent.name == "points":
        return row_file.parent.parent.parent
    return row_file.parent


def sweep_of(source: str) -> tuple[str, bool]:
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
