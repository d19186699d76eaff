"""Find and read the rows of any number of result folders into one tidy DataFrame.

A missing, partial or corrupt file is reported (which file, what is wrong) and skipped: it
never stops a report.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.results import ROW_COLUMNS, ROW_FILE

BOOL_COLUMNS = ("compile", "persistent_workers", "pin_memory", "non_blocking", "drop_last")
NUMBER_COLUMNS = (
    "point_index",
    "repeat",
    "rank",
    "world_size",
    "batch_size",
    "num_workers",
    "prefetch_factor",
    "warmup_steps",
    "steps",
    "samples",
    "first_step_loading_time",
    "loading_time",
    "loading_time_median",
    "loading_time_total",
    "step_time",
    "step_time_median",
    "training_time",
    "samples_per_s",
    "steps_per_s",
    "cpu_memory_gb",
    "gpu_util",
    "gpu_mem_util",
    "gpu_power_w",
    "energy_j",
    "energy_per_sample_j",
    "peak_device_memory_gb",
    "loader_cores",
    "main_cores",
    "cpus_allotted",
    "peak_host_memory_gb",
)
TEXT_COLUMNS = tuple(c for c in ROW_COLUMNS if c not in BOOL_COLUMNS + NUMBER_COLUMNS)


@dataclass
class Loaded:
    rows: pd.DataFrame
    problems: list[str] = field(default_factory=list)
    files: int = 0


def find_row_files(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """rank<k>.csv files under each path (a sweep, a spec folder, a results root, a glob)."""
    files: list[Path] = []
    problems: list[str] = []
    for given in paths:
        matches = [Path(m) for m in glob.glob(str(given))] or [Path(given)]
        for path in matches:
            if path.is_file():
                if ROW_FILE.match(path.name):
                    files.append(path)
                else:
                    problems.append(f"{path}: not a rank<k>.csv row file; skipped")
            elif path.is_dir():
                found = sorted(p for p in path.glob("**/points/*/rank*.csv") if ROW_FILE.match(p.name))
                if not found and path.name != "points":
                    found = sorted(p for p in path.glob("rank*.csv") if ROW_FILE.match(p.name))
                if not found:
                    problems.append(f"{path}: no result rows (points/<id>/rank<k>.csv) under it")
                files.extend(found)
            else:
                problems.append(f"{path}: no such file or folder")
    return sorted(set(files)), problems


def load_results(paths: Iterable[str | Path]) -> Loaded:
    files, problems = find_row_files(paths)
    frames: list[pd.DataFrame] = []
    for path in files:
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as e:
            problems.append(f"{path}: unreadable ({type(e).__name__}: {str(e).splitlines()[0]}); skipped")
            continue
        missing = [c for c in ("point_id", "rung", "status", "training_time") if c not in frame.columns]
        if missing:
            problems.append(f"{path}: missing columns {', '.join(missing)}; skipped")
            continue
        frames.append(frame)
    if not frames:
        return Loaded(rows=pd.DataFrame(columns=list(ROW_COLUMNS)), problems=problems, files=len(files))
    rows = pd.concat(frames, ignore_index=True)
    for column in ROW_COLUMNS:
        if column not in rows.columns:
            rows[column] = ""
    for column in NUMBER_COLUMNS:
        rows[column] = pd.to_numeric(rows[column].replace("", None), errors="coerce")
    for column in BOOL_COLUMNS:
        rows[column] = rows[column].map({"True": True, "False": False, "true": True, "false": False})
    return Loaded(rows=rows, problems=problems, files=len(files))
