"""Read what a sweep meant to measure (`plan.json`) and its spec text, where they are there.

Apart from the rows (analysis/load.py): the plan is read once a sweep, to name the planned
points that have no rows or too few (analysis/render/report.py), and its spec text is what
`compare` sets side by side (analysis/grid/compare.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_schema.reading import UnreadableFile, read_json, read_text


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
