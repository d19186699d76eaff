"""The report a user reads after a sweep: per-node tables, then caveats, failures, problems."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.load import load_results
from analysis.tables import loader_tables, render, summarize, table_rung


@dataclass(frozen=True, slots=True)
class Report:
    text: str
    points: int
    failed_points: int
    problems: int


def build_report(paths: Sequence[str | Path], fmt: str = "terminal") -> Report:
    loaded = load_results(paths)
    rows = loaded.rows
    parts: list[str] = []
    summary = summarize(rows)
    rung = table_rung(summary)
    for host, table in loader_tables(summary).items():
        title = f"node {host}" + (f" (rung {rung})" if rung != "full" else "")
        parts.append(_title(title, fmt) + render(table, fmt))
    notes = _caveats(rows)
    failures = _failures(rows)
    if failures is not None:
        notes.append(f"{failures['point_id'].nunique()} point(s) had failed rungs:")
        notes.extend(f"  {r.point_id} {r.rung} (rank {r.rank}): {r.error}" for r in failures.itertuples())
    if loaded.problems:
        notes.append(f"{len(loaded.problems)} problem(s) while reading:")
        notes.extend(f"  {p}" for p in loaded.problems)
    if rows.empty and not loaded.problems:
        notes.append("no result rows found")
    if notes and fmt != "csv":
        parts.append("\n".join(notes))
    return Report(
        text="\n\n".join(parts),
        points=int(rows["point_id"].nunique()) if not rows.empty else 0,
        failed_points=0 if failures is None else int(failures["point_id"].nunique()),
        problems=len(loaded.problems),
    )


def _title(text: str, fmt: str) -> str:
    if fmt == "markdown":
        return f"### {text}\n\n"
    if fmt == "latex":
        return f"% {text}\n"
    if fmt == "csv":
        return f"# {text}\n"
    return f"{text}\n"


def _caveats(rows: pd.DataFrame) -> list[str]:
    notes = []
    ok = rows[rows["status"] == "ok"]
    if not ok.empty and (ok["device"] == "cpu").all():
        notes.append(
            "device cpu: pin_memory and non_blocking have no effect here (nothing is copied to a "
            "GPU); device_batch and host_batch measure the same thing."
        )
    return notes


def _failures(rows: pd.DataFrame) -> pd.DataFrame | None:
    failed = rows[rows["status"] == "failed"]
    if failed.empty:
        return None
    return failed.drop_duplicates(["point_id", "rung", "error"])[["point_id", "rung", "rank", "error"]]
