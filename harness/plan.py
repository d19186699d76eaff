"""Spec -> Plan: the axes crossed (or zipped), exclusions removed, sequence steps applied.

A Point is one process configuration plus the rungs it measures. Its id is a short hash of
what it measures, so a re-run or a resume recognises the points already done.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.spec import Measure, ProfileSpec, SamplerConfig, Spec

DEFAULT_SAMPLER = SamplerConfig(hz=10.0, gpu=True, host=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkloadSettings:
    dataset: str
    dataset_args: Mapping[str, Any]
    model: str
    model_args: Mapping[str, Any]
    batch_size: int
    """Per rank."""
    device: str
    amp: str | bool
    compile: bool
    channels_last: bool = False
    zero_grad_set_to_none: bool = True
    gpu_normalize: bool = False
    """The loader yields uint8; conversion and normalisation run on the device (002_*, #4)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LoaderSettings:
    """The DataLoader arguments as PyTorch will actually apply them (see `resolve_loader`)."""

    num_workers: int
    persistent_workers: bool
    pin_memory: bool
    non_blocking: bool
    prefetch_factor: int | None
    drop_last: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    index: int
    id: str
    step: str
    """The sequence step's name, or "" outside a sequence."""
    workload: WorkloadSettings
    loader: LoaderSettings
    measure: Measure
    rungs: tuple[str, ...]
    adjustments: tuple[str, ...] = ()
    """What was changed from the spec so that PyTorch accepts the combination."""
    sampler: SamplerConfig = DEFAULT_SAMPLER
    """How the run is observed; not part of the id (it does not change what is measured)."""
    profile: ProfileSpec | None = None
    """A profiler pass after the measurements; not part of the id either."""

    def settings(self) -> dict[str, Any]:
        """Flat field -> value, the columns of plan.csv and of every row."""
        return {**asdict(self.workload), **asdict(self.loader)}

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.id,
            "step": self.step,
            "workload": asdict(self.workload),
            "loader": asdict(self.loader),
            "measure": asdict(self.measure),
            "rungs": list(self.rungs),
            "adjustments": list(self.adjustments),
            "sampler": asdict(self.sampler),
            "profile": asdict(self.profile) if self.profile else None,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Point:
        return Point(
            index=data["index"],
            id=data["id"],
            step=data["step"],
            workload=WorkloadSettings(**data["workload"]),
            loader=LoaderSettings(**data["loader"]),
            measure=Measure(**data["measure"]),
            rungs=tuple(data["rungs"]),
            adjustments=tuple(data["adjustments"]),
            sampler=SamplerConfig(**data.get("sampler", {"hz": 10.0, "gpu": True, "host": True})),
            profile=ProfileSpec(**data["profile"]) if data.get("profile") else None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    spec: Spec
    points: tuple[Point, ...]
    notes: tuple[str, ...] = field(default=())

    def axes(self) -> list[str]:
        """Short names of the fields that vary between points (for compact displays)."""
        if not self.points:
            return []
        rows = [p.settings() for p in self.points]
        return [k for k in rows[0] if len({_canonical(r[k]) for r in rows}) > 1]


def point_id(
    workload: WorkloadSettings,
    loader: LoaderSettings,
    measure: Measure,
    rungs: tuple[str, ...],
    step: str = "",
) -> str:
    """A short stable hash of everything that changes what a point measures.

    A sequence step's name is part of it, so that two steps with equal settings stay two rows
    of the sequence table; outside a sequence, equal settings are one point.
    """
    payload: dict[str, Any] = {
        "workload": asdict(workload),
        "loader": asdict(loader),
        "measure": asdict(measure),
        "rungs": list(rungs),
    }
    if step:
        payload["step"] = step
    return hashlib.sha1(_canonical(payload).encode()).hexdigest()[:10]


def resolve_loader(requested: Mapping[str, Any]) -> tuple[LoaderSettings, tuple[str, ...]]:
    """Apply PyTorch's rules for combinations it refuses, and say what changed.

    torch.utils.data.DataLoader raises on `prefetch_factor` or `persistent_workers=True` with
    `num_workers=0` (they only apply to worker processes), and uses prefetch_factor=2 when
    workers run and none is given (torch/utils/data/dataloader.py).
    """
    values = dict(requested)
    notes: list[str] = []
    if values["num_workers"] == 0:
        if values["prefetch_factor"] is not None:
            notes.append(f"prefetch_factor {values['prefetch_factor']} -> null (num_workers=0)")
            values["prefetch_factor"] = None
        if values["persistent_workers"]:
            notes.append("persistent_workers true -> false (num_workers=0)")
            values["persistent_workers"] = False
    elif values["prefetch_factor"] is None:
        values["prefetch_factor"] = 2
        notes.append("prefetch_factor null -> 2 (PyTorch's default with workers)")
    if values["non_blocking"] and not values["pin_memory"]:
        # Allowed by PyTorch, but a copy from pageable memory is synchronous anyway.
        notes.append("non_blocking without pin_memory: the copy from pageable memory stays synchronous")
    return LoaderSettings(**values), tuple(notes)


def expand(spec: Spec) -> Plan:
    """Every combination of the spec's axes, in a stable order: sequence steps, then axes."""
    base = {dotted: values[0] for dotted, values in spec.axes.items()}
    zipped = {name for group in spec.zip_groups for name in group}
    # Each "dimension" is a list of assignments {dotted: value}; zipped axes share one.
    dimensions: list[list[dict[str, Any]]] = []
    for dotted, values in spec.axes.items():
        if len(values) > 1 and dotted not in zipped:
            dimensions.append([{dotted: v} for v in values])
        group = next((g for g in spec.zip_groups if g[0] == dotted), None)
        if group is not None:
            dimensions.append(
                [
                    dict(zip(group, combo, strict=True))
                    for combo in zip(*(spec.axes[n] for n in group), strict=True)
                ]
            )

    steps = spec.sequence or ()
    step_settings: list[tuple[str, dict[str, Any]]] = []
    cumulative = dict(base)
    for step in steps:
        cumulative.update(step.overrides)
        step_settings.append((step.name, dict(cumulative)))
    if not step_settings:
        step_settings = [("", dict(base))]

    points: list[Point] = []
    seen: dict[str, int] = {}
    notes: list[str] = []
    excluded = 0
    exclude_hits = [0] * len(spec.exclude)
    for step_name, step_base in step_settings:
        for combo in itertools.product(*dimensions):
            chosen = dict(step_base)
            for assignment in combo:
                chosen.update(assignment)
            matched = [i for i, rule in enumerate(spec.exclude) if _matches(chosen, rule)]
            if matched:
                excluded += 1
                for i in matched:
                    exclude_hits[i] += 1
                continue
            workload = WorkloadSettings(
                **{k.split(".", 1)[1]: v for k, v in chosen.items() if k.startswith("workload.")}
            )
            loader, adjustments = resolve_loader(
                {k.split(".", 1)[1]: v for k, v in chosen.items() if k.startswith("loader.")}
            )
            pid = point_id(workload, loader, spec.measure, spec.rungs, step_name)
            if pid in seen:
                notes.append(
                    f"a combination ({'; '.join(adjustments) or 'same settings'}) is the same as "
                    f"point {seen[pid]} once resolved; measured once"
                )
                continue
            seen[pid] = len(points)
            points.append(
                Point(
                    index=len(points),
                    id=pid,
                    step=step_name,
                    workload=workload,
                    loader=loader,
                    measure=spec.measure,
                    rungs=spec.rungs,
                    adjustments=adjustments,
                    sampler=spec.sampler,
                    profile=spec.profile,
                )
            )
    if excluded:
        notes.append(f"{excluded} combination(s) removed by exclude")
    for i, count in enumerate(exclude_hits):
        if count == 0:
            notes.append(f"exclude[{i}] matched no combination; check its values")
    return Plan(spec=spec, points=tuple(points), notes=tuple(notes))


def _matches(chosen: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    return all(chosen[k] == v for k, v in rule.items())


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
