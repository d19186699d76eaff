"""Spec -> Plan: the axes crossed (or zipped), exclusions removed, sequence steps applied.

A Point is one process configuration plus the rungs it measures. Its id is a short hash of
what it measures, so a re-run or a resume recognises the points already done.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from harness.config import rung_support, stream_shards
from harness.config.spec import Spec
from harness_schema import script_flags, settings
from harness_schema.settings import (
    WITHOUT_WORKERS,
    Limits,
    LoaderSettings,
    Measure,
    ProfileSpec,
    SamplerConfig,
    Scale,
    WorkloadSettings,
)

__all__ = [
    "LoaderSettings",
    "Plan",
    "Point",
    "RunPass",
    "Scale",
    "WorkloadSettings",
    "expand",
    "point_id",
    "resolve_loader",
]


_LOADER_FIELDS = frozenset(f.name for f in fields(LoaderSettings))
"""The settings of a point's loader; the others are its workload's (Point.settings)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunPass:
    """Where a point's run sits among the interleaved passes of a sweep run here (ABC ABC:
    harness.sweeps.run_points): what its rows record (`run_pass`) and its progress line says."""

    number: int
    """The pass's number in the sweep, counted across every run of it (first round, resume,
    adaptive rounds): rows of two points with the same number were measured side by side."""
    k: int
    """This pass's place in the current run, from 1."""
    of: int
    """The passes of the current run."""
    repeats: int
    """The point's repeats in all (its measure.repeats is raised pass by pass)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    index: int
    id: str
    sequence_step: str
    """The sequence step's name, or "" outside a sequence."""
    workload: WorkloadSettings
    loader: LoaderSettings
    measure: Measure
    rungs: tuple[str, ...]
    adjustments: tuple[str, ...] = ()
    """What was changed from the spec so that PyTorch accepts the combination."""
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    """How the run is observed; not part of the id (it does not change what is measured)."""
    profile: ProfileSpec | None = None
    """A profiler pass after the measurements; not part of the id either."""
    script_keeps: tuple[str, ...] = ()
    """With a script workload, the loader settings the spec does not name: the probe keeps the
    script's own values of those it gives (the defaults here otherwise); not part of the id."""
    limits: Limits = field(default_factory=Limits)
    """How long a wait may last before it is a fault; not part of the id (a limit changes
    when a point gives up, not what it measures)."""
    run_pass: RunPass | None = None
    """The pass this run of the point belongs to, where its repeats are interleaved with
    other points' (None: its repeats run back to back); not part of the id."""
    scale: Scale | None = None
    """Its size: nodes, GPUs and ranks per node (the spec's `slurm`, one of its sizes where
    they are an axis). Part of the id only where the spec gives more than one size, so a spec
    of one size plans the ids it always did. None in plans written before sizes were axes."""

    def size(self, slurm: Any) -> Scale:
        """Its scale, or that of `slurm` (the spec's SlurmConfig) for a plan written before."""
        return self.scale if self.scale is not None else Scale.of(slurm)

    def settings(self) -> dict[str, Any]:
        """Flat field -> value, the columns of plan.csv and of every row. A new dict each call;
        its mappings and lists are the point's own, to read, not to change. Made afresh, not
        kept: without asdict's deep copies it costs microseconds, and kept it held 32 MB more
        for a plan of 100,000 points, for no time measured (issue #36)."""
        return {**settings.values(self.workload), **settings.values(self.loader)}

    def setting(self, name: str) -> Any:
        """settings()[name], without making them all: the plan's table reads a few a point."""
        return getattr(self.loader if name in _LOADER_FIELDS else self.workload, name)

    def flag_args(self) -> list[str]:
        """With a script workload, its own flags for the settings the spec names
        (workload.flags; harness_schema/script_flags.py): what follows its `args`."""
        w = self.workload
        values = {k: v for k, v in settings.values(self.loader).items() if k not in self.script_keeps}
        if w.batch_size is not None:
            values["batch_size"] = w.batch_size
        return script_flags.arguments(w.flags, values)

    def to_json(self) -> dict[str, Any]:
        """The point as plan.json and a job's argument hold it. Its sections' mappings and lists
        are the point's own (settings.values, not asdict's deep copies: `harness submit` writes
        every point twice), to write or pickle, not to change."""
        # run_pass only where there is one: the sweep's points.json stays as it was.
        run_pass = {"run_pass": settings.values(self.run_pass)} if self.run_pass else {}
        scale = {"scale": settings.values(self.scale)} if self.scale else {}
        return {
            "index": self.index,
            "id": self.id,
            "sequence_step": self.sequence_step,
            "workload": settings.values(self.workload),
            "loader": settings.values(self.loader),
            "measure": settings.values(self.measure),
            "rungs": list(self.rungs),
            "adjustments": list(self.adjustments),
            "sampler": settings.values(self.sampler),
            "profile": settings.values(self.profile) if self.profile else None,
            "script_keeps": list(self.script_keeps),
            "limits": settings.values(self.limits),
            **run_pass,
            **scale,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Point:
        return Point(
            index=data["index"],
            id=data["id"],
            # "step" in plans written before the field was renamed
            sequence_step=data.get("sequence_step", data.get("step", "")),
            workload=WorkloadSettings(**data["workload"]),
            loader=LoaderSettings(**data["loader"]),
            measure=Measure(**data["measure"]),
            rungs=tuple(data["rungs"]),
            adjustments=tuple(data["adjustments"]),
            sampler=SamplerConfig(**data.get("sampler", {})),
            profile=ProfileSpec(**data["profile"]) if data.get("profile") else None,
            script_keeps=tuple(data.get("script_keeps", ())),
            limits=Limits(**data.get("limits", {})),  # plans written before limits existed
            run_pass=RunPass(**data["run_pass"]) if data.get("run_pass") else None,
            scale=Scale(**data["scale"]) if data.get("scale") else None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    spec: Spec
    points: tuple[Point, ...]
    notes: tuple[str, ...] = field(default=())

    def varying_settings(self) -> list[str]:
        """Short names of the fields that vary between points (for compact displays): two
        values differ where their canonical JSON does (1 and true, 1 and 1.0 differ)."""
        return varying_settings(self.points)


def varying_settings(points: Sequence[Point]) -> list[str]:
    """Plan.varying_settings of any points (`harness status`: a sweep's points as planned)."""
    if not points:
        return []
    # A column at a time, read straight from the sections: a dict of every setting of
    # every point took 0.7 s of CPU for 100,000 points, the columns 0.2 s.
    workloads = [p.workload for p in points]
    loaders = [p.loader for p in points]
    return [
        name
        for name in points[0].settings()
        if _varies(list(map(attrgetter(name), loaders if name in _LOADER_FIELDS else workloads)))
    ]


def point_id(
    workload: WorkloadSettings,
    loader: LoaderSettings,
    measure: Measure,
    rungs: tuple[str, ...],
    sequence_step: str = "",
    scale: Scale | None = None,
) -> str:
    """A short stable hash of everything that changes what a point measures.

    A sequence step's name is part of it, so that two steps with equal settings stay two rows
    of the sequence table; outside a sequence, equal settings are one point. `scale` only
    where the spec's sizes are an axis: a spec of one size keeps the ids it always had.
    """
    return _point_id(workload, loader, settings.identity(measure), rungs, sequence_step, scale)


def _point_id(
    workload: WorkloadSettings,
    loader: LoaderSettings,
    measure: Mapping[str, Any],
    rungs: tuple[str, ...],
    sequence_step: str,
    scale: Scale | None = None,
) -> str:
    """point_id, given the measure's identity: the same for every point of a plan, made once."""
    payload: dict[str, Any] = {
        "workload": settings.identity(workload),
        "loader": settings.identity(loader),
        "measure": measure,
        "rungs": list(rungs),
    }
    if sequence_step:
        payload["step"] = sequence_step  # the key of the first versions: ids stay the same
    if scale is not None:
        payload["scale"] = settings.values(scale)
    return hashlib.sha1(_canonical(payload).encode()).hexdigest()[:10]


def resolve_loader(requested: Mapping[str, Any]) -> tuple[LoaderSettings, tuple[str, ...]]:
    """Apply PyTorch's rules for combinations it refuses, and say what changed.

    torch.utils.data.DataLoader raises on the settings of worker processes without workers
    (settings.WITHOUT_WORKERS: each takes its required value with `num_workers=0`), and uses
    prefetch_factor=2 when workers run and none is given (torch/utils/data/dataloader.py).
    """
    values = dict(requested)
    notes: list[str] = []
    if values["num_workers"] == 0:
        for name, required in WITHOUT_WORKERS.items():
            if values[name] != required:
                notes.append(f"{name} {_word(values[name])} -> {_word(required)} (num_workers=0)")
                values[name] = required
    elif values["prefetch_factor"] is None:
        values["prefetch_factor"] = 2
        notes.append("prefetch_factor null -> 2 (PyTorch's default with workers)")
    if values["non_blocking"] and not values["pin_memory"]:
        # Allowed by PyTorch, but a copy from pageable memory is synchronous anyway.
        notes.append("non_blocking without pin_memory: the copy from pageable memory stays synchronous")
    return LoaderSettings(**values), tuple(notes)


def _word(value: Any) -> str:
    """A value as the spec writes it: null, true, false, 4."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def expand(spec: Spec) -> Plan:
    """Every combination of the spec's axes, in a stable order: sequence steps, then axes."""
    # Each assignment split into its sections once, not each point's 30-odd settings once per
    # point (100,000 points: 3.7 s of 15, issue #36); the dotted form is for the exclusions.
    dimensions = [[(a, _sections(a)) for a in dimension] for dimension in _dimensions(spec)]
    measure = settings.identity(spec.measure)
    points: list[Point] = []
    seen: dict[str, int] = {}
    notes: list[str] = []
    exclude_hits = [0] * len(spec.exclude)
    excluded = 0
    for step_name, step_base, scale in _steps_and_scales(spec):
        base_workload, base_loader = _sections(step_base)
        for combo in itertools.product(*dimensions):
            if spec.exclude:
                chosen = dict(step_base)
                for assignment, _ in combo:
                    chosen.update(assignment)
                matched = [i for i, rule in enumerate(spec.exclude) if _matches(chosen, rule)]
                for i in matched:
                    exclude_hits[i] += 1
                if matched:
                    excluded += 1
                    continue
            workload, loader = dict(base_workload), dict(base_loader)
            for _, (workload_part, loader_part) in combo:
                workload.update(workload_part)
                loader.update(loader_part)
            point = _point(spec, measure, workload, loader, step_name, scale, index=len(points))
            if point.id in seen:
                notes.append(
                    f"a combination ({'; '.join(point.adjustments) or 'same settings'}) is the same as "
                    f"point {seen[point.id]} once resolved; measured once"
                )
                continue
            seen[point.id] = len(points)
            points.append(point)
    return Plan(
        spec=spec,
        points=tuple(points),
        notes=(
            *spec.notes,
            *notes,
            *_exclude_notes(excluded, exclude_hits),
            *_script_notes(points),
            *rung_support.plan_notes(_datasets(points), spec.rungs),
            *stream_shards.plan_notes(_readers(points)),
        ),
    )


def _readers(points: list[Point]) -> list[stream_shards.Readers]:
    """The points' streams and their workers (a loader factory's, where its loader_args say
    the shards); a script's reads its own, unseen here."""
    return [
        stream_shards.Readers(
            p.index,
            p.workload.dataset,
            p.workload.dataset_args,
            p.loader.num_workers,
            loader=p.workload.loader,
            loader_args=p.workload.loader_args,
        )
        for p in points
        if p.workload.script is None and (p.workload.dataset is not None or p.workload.loader is not None)
    ]


def _datasets(points: list[Point]) -> list[str | None]:
    """The points' datasets, each once, in order; None for a script's (its own, unseen here)."""
    named = (None if p.workload.script is not None else p.workload.dataset for p in points)
    return list(dict.fromkeys(named))


def _script_notes(points: list[Point]) -> list[str]:
    keeps = points[0].script_keeps if points else ()
    notes = []
    if keeps:
        notes.append(
            f"the script keeps its own {', '.join(keeps)} (the spec's loader section does not name "
            "them; where the script gives none, PyTorch's defaults): the rows record what ran"
        )
    if points and points[0].workload.flags:
        mapped = ", ".join(f"{k} {v}" for k, v in points[0].workload.flags.items())
        notes.append(f"the script's flags carry the point's settings ({mapped}); each point's flags:")
        notes += [f"  {p.index} {p.id}: {' '.join(p.flag_args()) or '(none)'}" for p in points]
    return notes


def _dimensions(spec: Spec) -> list[list[dict[str, Any]]]:
    """Each dimension is a list of assignments {dotted: value}; zipped axes share one."""
    zipped = {name for group in spec.zip_groups for name in group}
    dimensions: list[list[dict[str, Any]]] = []
    for dotted, values in spec.field_values.items():
        if len(values) > 1 and dotted not in zipped:
            dimensions.append([{dotted: v} for v in values])
        group = next((g for g in spec.zip_groups if g[0] == dotted), None)
        if group is not None:
            combos = zip(*(spec.field_values[n] for n in group), strict=True)
            dimensions.append([dict(zip(group, combo, strict=True)) for combo in combos])
    return dimensions


def _steps_and_scales(spec: Spec) -> list[tuple[str, dict[str, Any], Scale]]:
    """(step name, settings, size) for each sequence step, each size: the points of one size
    together (one job array each on Slurm), in the spec's order of sizes."""
    return [(name, base, scale) for name, base in _sequence_settings(spec) for scale in spec.scale_axis()]


def _sequence_settings(spec: Spec) -> list[tuple[str, dict[str, Any]]]:
    """(step name, settings) per sequence step, each keeping the previous steps' changes."""
    cumulative = {dotted: values[0] for dotted, values in spec.field_values.items()}
    if not spec.sequence:
        return [("", cumulative)]
    out = []
    for step in spec.sequence:
        cumulative = {**cumulative, **step.overrides}
        out.append((step.name, cumulative))
    return out


def _point(
    spec: Spec,
    measure: Mapping[str, Any],
    workload_args: Mapping[str, Any],
    loader_args: Mapping[str, Any],
    step_name: str,
    scale: Scale,
    *,
    index: int,
) -> Point:
    """`measure`: the identity of spec.measure (settings.identity), made once for the plan."""
    workload = WorkloadSettings(**workload_args)
    loader, adjustments = resolve_loader(loader_args)
    return Point(
        index=index,
        id=_point_id(workload, loader, measure, spec.rungs, step_name, scale if spec.scale_varies else None),
        scale=scale,
        sequence_step=step_name,
        workload=workload,
        loader=loader,
        measure=spec.measure,
        rungs=spec.rungs,
        adjustments=adjustments,
        sampler=spec.sampler,
        profile=spec.profile,
        limits=spec.limits,
        script_keeps=_script_keeps(spec, workload),
    )


def _script_keeps(spec: Spec, workload: WorkloadSettings) -> tuple[str, ...]:
    if workload.script is None:
        return ()
    return tuple(name for name in settings.LOADER_COLUMNS if name not in spec.loader_named)


def _sections(chosen: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dotted settings ({"loader.num_workers": 2}) as the workload's and the loader's."""
    workload: dict[str, Any] = {}
    loader: dict[str, Any] = {}
    for dotted, value in chosen.items():
        section, _, name = dotted.partition(".")
        if section == "workload":
            workload[name] = value
        elif section == "loader":
            loader[name] = value
    return workload, loader


def _exclude_notes(excluded: int, hits: list[int]) -> list[str]:
    notes = [f"{excluded} combination(s) removed by exclude"] if excluded else []
    notes += [f"exclude[{i}] matched no combination; check its values" for i, n in enumerate(hits) if n == 0]
    return notes


def _matches(chosen: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    return all(chosen[k] == v for k, v in rule.items())


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _varies(column: Sequence[Any]) -> bool:
    """Whether a setting's values over the points differ once written as JSON (_canonical).
    Most settings are the very same object in every point (the spec's value, or the field's
    default), seen at once; the others are compared by _same_json's key, and the first
    difference ends the look. Writing each value (34,000 json.dumps for 1,000 points) took
    more than the plan itself (issue #36)."""
    first = column[0]
    others = [v for v in column if v is not first]
    if not others:
        return False
    key = _same_json(first)
    return any(_same_json(v) != key for v in others)


_PLAIN = (str, int, bool, type(None))
"""Types whose values JSON writes one way each, apart from each other: their type and value
are their JSON's key (true is not 1). A float is not among them: 0.0 == -0.0, written apart."""


def _same_json(value: Any) -> Any:
    """A key equal for two values exactly where their _canonical text is: cheap for the plain
    types, the text itself for the rest (mappings, lists, floats). A str's key and another
    value's text never meet: the settings hold no object that JSON writes as a string."""
    kind = type(value)
    return (kind, value) if kind in _PLAIN else _canonical(value)
