"""`step_ms` measured on a real GPU node: the emulated accelerator's step, taken from a sweep.

    model: emulated
    model_args: {step_ms: {from: results/<spec>/<sweep>, point: <id>}}

The `device_batch` rung times the train step alone (the same batch, already on the device, at
every step), so its step time is what the GPU demands of the loader. It is resolved when the
spec is loaded: the number replaces the mapping, so point ids, plan.csv and every row carry
the step actually emulated, and a sweep that cannot give one fails before anything runs.

The step is the median over repeats of the slowest rank's training_time / steps: under DDP
the ranks wait for one another at every all-reduce, so the slowest sets the pace. Torch-free.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_schema import layout
from harness_schema.reading import UnreadableFile
from harness_schema.rows import read_rows

RUNG = "device_batch"
KEYS = ("from", "point")
FORM = "{from: results/<spec>/<sweep>, point: <id>}"


class StepSourceError(ValueError):
    """step_ms cannot be taken from the sweep named; the message says why and what to do."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolved:
    args: tuple[Mapping[str, Any], ...]
    """The model_args axis with every step_ms mapping replaced by its number (ms)."""
    notes: tuple[str, ...]
    """Where each resolved step_ms came from."""


def resolve_model_args(
    values: Sequence[Mapping[str, Any]], *, models: Sequence[str], bases: Sequence[Path]
) -> Resolved:
    """Each model_args value with step_ms resolved. `bases`: folders a relative `from` is
    looked for in, in order (the working directory, the spec's folder)."""
    out: list[Mapping[str, Any]] = []
    notes: list[str] = []
    for args in values:
        step = args.get("step_ms")
        if isinstance(step, Mapping):
            ms, note = _from_sweep(step, bases)
            out.append({**args, "step_ms": ms})
            notes.append(note)
            continue
        if "step_ms" in args and "emulated" in models:
            _check_number(step)
        out.append(args)
    return Resolved(args=tuple(out), notes=tuple(notes))


def _check_number(step: Any) -> None:
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        raise StepSourceError(f"step_ms {step!r} is not allowed; expected milliseconds > 0 or {FORM}")
    if not step > 0:
        raise StepSourceError(f"step_ms {step} is not allowed; expected milliseconds > 0")


def _from_sweep(source: Mapping[str, Any], bases: Sequence[Path]) -> tuple[float, str]:
    unknown = [k for k in source if k not in KEYS]
    if unknown or not isinstance(source.get("from"), str):
        raise StepSourceError(f"step_ms {dict(source)} is not allowed; expected {FORM} (point optional)")
    name: str = source["from"]
    point = source.get("point")
    if point is not None and not isinstance(point, str):
        raise StepSourceError(f"step_ms.point {point!r} is not allowed; expected a point id (a string)")
    sweep = _find(name, bases)
    per_point = device_batch_steps(sweep)
    if not per_point:
        raise StepSourceError(
            f"step_ms from {name}: no ok {RUNG} rows there; measure rungs: [{RUNG}] there first"
        )
    if point is None:
        if len(per_point) > 1:
            raise StepSourceError(
                f"step_ms from {name}: {len(per_point)} points have {RUNG} rows "
                f"({', '.join(sorted(per_point))}); say which with point: <id>"
            )
        (point,) = per_point
    if point not in per_point:
        raise StepSourceError(
            f"step_ms from {name}: point {point!r} has no ok {RUNG} rows; "
            f"points that have: {', '.join(sorted(per_point))}"
        )
    repeats = per_point[point]
    ms = round(statistics.median(repeats) * 1000, 3)
    note = f"step_ms {ms} from {name}, point {point}: median of {len(repeats)} repeat(s) of {RUNG}"
    return ms, note


def _find(name: str, bases: Sequence[Path]) -> Path:
    given = Path(name).expanduser()
    candidates = [given] if given.is_absolute() else [base / given for base in bases]
    for candidate in candidates:
        if (candidate / "points").is_dir():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise StepSourceError(f"step_ms from {name}: no sweep folder there (looked for {looked}/points)")


def device_batch_steps(sweep: Path) -> dict[str, list[float]]:
    """Point id -> per repeat, the slowest rank's seconds per step on the device_batch rung."""
    out: dict[str, list[float]] = {}
    for point_path in sorted((sweep / "points").iterdir()):
        slowest: dict[str, float] = {}
        for path in sorted(p for p in point_path.glob("rank*.csv") if layout.ROW_FILE.match(p.name)):
            if not layout.ROW_FILE.match(path.name):
                continue
            for row in _rows(path):
                if row.get("rung") != RUNG or row.get("status") != "ok":
                    continue
                step = _seconds_per_step(row)
                if step is not None:
                    repeat = row.get("repeat", "")
                    slowest[repeat] = max(step, slowest.get(repeat, 0.0))
        if slowest:
            out[point_path.name] = list(slowest.values())
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        return read_rows(path)
    except UnreadableFile:
        return []  # a half-copied file: its point simply has no rows to offer


def _seconds_per_step(row: Mapping[str, str]) -> float | None:
    try:
        seconds, steps = float(row["training_time"]), int(row["steps"])
    except (KeyError, TypeError, ValueError):
        return None
    return seconds / steps if steps > 0 and seconds > 0 else None
