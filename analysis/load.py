"""Read the rows of any number of result folders into one tidy DataFrame (load_results).

A missing, partial or corrupt file is reported (which file, what is wrong) and skipped: it
never stops a report.

Each rank file is parsed with the csv module and the rows of all files are turned into one
DataFrame at the end: `pandas.read_csv` per file costs about a millisecond of set-up each,
which is most of the time for a sweep of 10,000 points (see benchmarks/analysis_scale.py).

The steps are modules of their own: finding the files (analysis/row_files.py), gathering their
cells (analysis/cells.py), typing them (analysis/typed_rows.py). A point's other files are read
apart: its meta (analysis/meta.py), the sweep's plan (analysis/sweep_plan.py), a rank's
timeline (analysis/samples.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis import consolidated as consolidated_file
from analysis import listing, row_files
from analysis.cells import Cells
from analysis.typed_rows import measured, typed
from harness_schema.reading import UnreadableFile, read_row_file
from harness_schema.rows import BOOL_COLUMNS, NUMBER_COLUMNS, ROW_COLUMNS

TEXT_COLUMNS = tuple(c for c in ROW_COLUMNS if c not in BOOL_COLUMNS + NUMBER_COLUMNS)
# Added by the loader: where a row came from. `sweep_dir` tells apart two sweeps with the same
# id under two spec names; `source` names the file in messages.
ADDED_COLUMNS = ("sweep_dir", "source")


@dataclass
class Loaded:
    rows: pd.DataFrame
    problems: list[str] = field(default_factory=list)
    files: int = 0
    profiled: dict[str, list[str]] = field(default_factory=dict)
    """Per sweep whose every point was listed: its point folders that hold a `profile` entry,
    seen in the listing of each point (analysis.profiles.trace_dirs takes them rather than
    looking into every point folder again)."""
    file_keys: dict[str, str] = field(default_factory=dict)
    """Per sweep consolidated by this load (refresh): a digest of its rank files, each with its
    size and time when read (analysis/cells.py, Cells.file_keys): the key of its summary kept."""

    def sweep_dirs(self) -> list[Path]:
        if self.rows.empty:
            return []
        return [Path(s) for s in sorted(self.rows["sweep_dir"].unique())]


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
    found = row_files.find(paths, listings=consolidated)
    problems = list(found.problems)
    cells = Cells([str(f) for f in found.files])
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
        _write_listings(found)
    rows = typed(table, cells)
    return Loaded(
        rows=measured(rows, problems),
        problems=problems,
        files=len(found.files),
        profiled=found.profiled,
        file_keys=cells.file_keys() if refresh else {},
    )


def _write_listings(found: row_files.Found) -> None:
    """Write the listing of each sweep listed whole where it changed, as its consolidated file
    is written: only for sweeps of consolidated.MIN_FILES point folders or more."""
    for sweep, (listed, changed) in found.listings.items():
        if changed and sweep in found.whole and len(listed.points) >= consolidated_file.MIN_FILES:
            listing.write(sweep, listed)
