"""A sweep folder: the resolved spec and plan, written before any point runs."""

from __future__ import annotations

import json
from pathlib import Path

from harness import results
from harness.plan import Plan, Point


def create_sweep(plan: Plan, results_root: Path, sweep_id: str | None = None) -> Path:
    spec_root = results_root / plan.spec.name
    spec_root.mkdir(parents=True, exist_ok=True)
    sweep_dir = spec_root / (sweep_id or results.new_sweep_id(spec_root))
    sweep_dir.mkdir(parents=True, exist_ok=False)
    results.atomic_write_text(sweep_dir / "spec.yaml", plan.spec.text)
    results.atomic_write_text(sweep_dir / "plan.csv", plan_csv(plan))
    results.write_json(
        sweep_dir / "plan.json",
        {
            "spec": plan.spec.name,
            "notes": list(plan.notes),
            "points": [p.to_json() for p in plan.points],
        },
    )
    return sweep_dir


def plan_csv(plan: Plan) -> str:
    rows = []
    for p in plan.points:
        rows.append(
            {
                "point_index": p.index,
                "point_id": p.id,
                "step": p.step,
                **p.settings(),
                "rungs": " ".join(p.rungs),
                "adjustments": "; ".join(p.adjustments),
            }
        )
    return results.csv_text(rows, results.PLAN_COLUMNS)


def load_points(sweep_dir: Path) -> list[Point]:
    data = json.loads((sweep_dir / "plan.json").read_text())
    return [Point.from_json(p) for p in data["points"]]


def pending_points(sweep_dir: Path, points: list[Point], world_size: int = 1) -> list[Point]:
    """Points without a final row for every (rung, repeat) on every rank."""
    return [
        p
        for p in points
        if not results.point_complete(
            results.point_dir(sweep_dir, p.id), p.rungs, p.measure.repeats, world_size
        )
    ]
