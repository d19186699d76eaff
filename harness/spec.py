"""YAML spec -> typed, frozen Spec. Every error names file, line, dotted field, value, allowed.

A list under `workload` or `loader` is an axis (the plan crosses axes); every other section is
scalar settings. Structural checks that need the whole spec (zip lengths, exclude and sequence
fields) happen here too, so that they can point at a line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import rungs as rung_names
from harness.workloads import registry
from harness.yaml_lines import LoadedYaml, YamlSyntaxError, load_yaml_with_lines


class SpecError(ValueError):
    """A spec that cannot run. str() is the one line a user sees."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file, self.line, self.field, self.message = file, line, field, message
        where = file or "<spec>"
        if line is not None:
            where += f":{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


_REQUIRED = object()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True, slots=True)
class FieldRule:
    """One field of a section: its default, its check, and the words for what is allowed."""

    name: str
    default: Any
    check: Callable[[Any], bool]
    allowed: str
    axis: bool = False  # may be given as a list of values


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SLURM_TIME = re.compile(r"^(\d+-)?(\d+)(:\d{2}){0,2}$")
_SLURM_MEM = re.compile(r"^\d+[KMGT]?$")


def _dataset_name(v: Any) -> bool:
    return isinstance(v, str) and (v in registry.DATASETS or registry.is_factory_path(v))


def _model_name(v: Any) -> bool:
    return isinstance(v, str) and (v in registry.MODELS or registry.is_factory_path(v))


WORKLOAD_FIELDS: tuple[FieldRule, ...] = (
    FieldRule(
        "dataset",
        _REQUIRED,
        _dataset_name,
        f'one of {", ".join(registry.DATASETS)} or "package.module:factory"',
        axis=True,
    ),
    FieldRule("dataset_args", {}, lambda v: isinstance(v, Mapping), "a mapping", axis=True),
    FieldRule(
        "model",
        _REQUIRED,
        _model_name,
        f'one of {", ".join(registry.MODELS)} or "package.module:factory"',
        axis=True,
    ),
    FieldRule("model_args", {}, lambda v: isinstance(v, Mapping), "a mapping", axis=True),
    FieldRule("batch_size", 32, lambda v: _is_int(v) and v > 0, "an integer > 0", axis=True),
    FieldRule("device", "auto", lambda v: v in ("auto", "cpu", "cuda"), "auto, cpu or cuda"),
    FieldRule("amp", False, lambda v: v is False or v in ("bf16", "fp16"), "false, bf16 or fp16", True),
    FieldRule("compile", False, lambda v: isinstance(v, bool), "true or false", axis=True),
    FieldRule("channels_last", False, lambda v: isinstance(v, bool), "true or false", axis=True),
    # PyTorch 2's default; the optimisation sequence of 002_* starts from false.
    FieldRule("zero_grad_set_to_none", True, lambda v: isinstance(v, bool), "true or false", axis=True),
    FieldRule("gpu_normalize", False, lambda v: isinstance(v, bool), "true or false", axis=True),
)

LOADER_FIELDS: tuple[FieldRule, ...] = (
    FieldRule("num_workers", 0, lambda v: _is_int(v) and v >= 0, "an integer >= 0", axis=True),
    FieldRule("persistent_workers", False, lambda v: isinstance(v, bool), "true or false", True),
    FieldRule("pin_memory", False, lambda v: isinstance(v, bool), "true or false", axis=True),
    FieldRule("non_blocking", False, lambda v: isinstance(v, bool), "true or false", axis=True),
    FieldRule(
        "prefetch_factor",
        2,
        lambda v: v is None or (_is_int(v) and v >= 1),
        "an integer >= 1 or null",
        axis=True,
    ),
    FieldRule("drop_last", False, lambda v: isinstance(v, bool), "true or false", axis=True),
)

MEASURE_FIELDS: tuple[FieldRule, ...] = (
    FieldRule("warmup_steps", 5, lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    FieldRule("steps", 50, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    FieldRule("repeats", 1, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
)

SAMPLER_FIELDS: tuple[FieldRule, ...] = (
    FieldRule("hz", 10.0, lambda v: _is_number(v) and 0 < v <= 1000, "a number in (0, 1000]"),
    FieldRule("gpu", True, lambda v: isinstance(v, bool), "true or false"),
    FieldRule("host", True, lambda v: isinstance(v, bool), "true or false"),
)


def _optional_str(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip() != "")


SLURM_FIELDS: tuple[FieldRule, ...] = (
    FieldRule("nodes", 1, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    FieldRule("gpus_per_node", 1, lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    FieldRule(
        "tasks_per_node",
        None,
        lambda v: v is None or (_is_int(v) and v >= 1),
        "an integer >= 1, or null for one task per GPU",
    ),
    FieldRule("cpus_per_task", None, lambda v: v is None or (_is_int(v) and v >= 1), "an integer >= 1"),
    FieldRule(
        "mem",
        None,
        lambda v: v is None or (isinstance(v, str) and _SLURM_MEM.match(v) is not None),
        'a Slurm memory size such as "40G", or null',
    ),
    FieldRule(
        "time",
        "00:20:00",
        lambda v: (_is_int(v) and v > 0) or (isinstance(v, str) and _SLURM_TIME.match(v) is not None),
        'minutes, or "HH:MM:SS" / "D-HH:MM:SS"',
    ),
    FieldRule("partition", None, _optional_str, "a partition name or null"),
    FieldRule("account", None, _optional_str, "an account name or null"),
    FieldRule("qos", None, _optional_str, "a QoS name or null"),
    FieldRule("constraint", None, _optional_str, "a constraint expression or null"),
    FieldRule("hint", None, _optional_str, "a Slurm --hint value (e.g. nomultithread) or null"),
    FieldRule("exclusive", False, lambda v: isinstance(v, bool), "true or false"),
    FieldRule("array_parallelism", 16, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    FieldRule(
        "setup",
        (),
        lambda v: isinstance(v, Sequence) and not isinstance(v, str) and all(isinstance(s, str) for s in v),
        "a list of shell lines",
    ),
    FieldRule(
        "extra",
        {},
        lambda v: isinstance(v, Mapping) and all(isinstance(x, (str, int, bool)) for x in v.values()),
        "a mapping of extra sbatch options to values",
    ),
)

PROFILE_FIELDS: tuple[FieldRule, ...] = (
    FieldRule(
        "rung", "full", lambda v: isinstance(v, str) and rung_names.is_rung(v), rung_names.allowed_text()
    ),
    FieldRule("wait", 1, lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    FieldRule("warmup", 1, lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    FieldRule("active", 3, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    FieldRule("repeat", 1, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
)

TOP_LEVEL = (
    "name",
    "description",
    "workload",
    "measure",
    "rungs",
    "loader",
    "zip",
    "exclude",
    "sequence",
    "slurm",
    "sampler",
    "profile",
)

# Rungs whose code exists. A rung that is named but not built is refused, never ignored.
BUILT_RUNGS: frozenset[str] = frozenset({*rung_names.LADDER, "transform:<k>"})

# "num_workers" and "loader.num_workers" both name the same axis.
FIELD_SECTIONS: dict[str, tuple[FieldRule, ...]] = {
    "workload": WORKLOAD_FIELDS,
    "loader": LOADER_FIELDS,
}
SHORT_TO_DOTTED: dict[str, str] = {
    rule.name: f"{section}.{rule.name}" for section, rules in FIELD_SECTIONS.items() for rule in rules
}
RULES_BY_DOTTED: dict[str, FieldRule] = {
    f"{section}.{rule.name}": rule for section, rules in FIELD_SECTIONS.items() for rule in rules
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Measure:
    warmup_steps: int
    """Steps run before timing starts (worker start-up, allocator, autotuning)."""
    steps: int
    """Measured steps per rung and repeat."""
    repeats: int
    """How many times each rung is measured in the same process."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SamplerConfig:
    hz: float
    """Sampling rate of the GPU and host samplers."""
    gpu: bool
    host: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileSpec:
    """torch.profiler capture of one rung, in an extra untimed pass (so the measured steps
    never carry the profiler's overhead): skip `wait` steps, `warmup`, record `active`."""

    rung: str
    wait: int
    warmup: int
    active: int
    repeat: int


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmConfig:
    nodes: int
    gpus_per_node: int
    tasks_per_node: int
    """One rank per task; defaults to one per GPU (or 1 without GPUs)."""
    cpus_per_task: int | None
    mem: str | None
    time: str | int
    partition: str | None
    account: str | None
    qos: str | None
    constraint: str | None
    hint: str | None
    exclusive: bool
    array_parallelism: int
    setup: tuple[str, ...]
    extra: Mapping[str, str | int | bool]


@dataclass(frozen=True, kw_only=True, slots=True)
class SequenceStep:
    name: str
    overrides: Mapping[str, Any]
    """Dotted field -> value set at this step; later steps keep it (cumulative)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Spec:
    name: str
    description: str
    path: Path | None
    text: str
    """The YAML as given, saved beside the results."""
    axes: Mapping[str, tuple[Any, ...]]
    """Every workload and loader field (dotted) -> its values; a single value is not an axis."""
    zip_groups: tuple[tuple[str, ...], ...]
    exclude: tuple[Mapping[str, Any], ...]
    sequence: tuple[SequenceStep, ...]
    measure: Measure
    rungs: tuple[str, ...]
    slurm: SlurmConfig
    sampler: SamplerConfig
    profile: ProfileSpec | None = None
    notes: tuple[str, ...] = field(default=())


class _Checker:
    """Holds the file and line table so that each check is one readable line."""

    def __init__(self, loaded: LoadedYaml, file: str | None) -> None:
        self.loaded, self.file = loaded, file

    def fail(self, dotted: str, message: str) -> SpecError:
        return SpecError(message, file=self.file, line=self.loaded.line_of(dotted), field=dotted)

    def mapping(self, value: Any, dotted: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(dotted, f"{_show(value)} is not allowed; expected a mapping")
        return value

    def known_keys(self, section: Mapping[str, Any], dotted: str, valid: Sequence[str]) -> None:
        for key in section:
            if key not in valid:
                path = f"{dotted}.{key}" if dotted else str(key)
                raise self.fail(path, f"unknown key; valid keys: {', '.join(valid)}")

    def value(self, rule: FieldRule, value: Any, dotted: str) -> Any:
        if not rule.check(value):
            raise self.fail(dotted, f"{_show(value)} is not allowed; expected {rule.allowed}")
        return value

    def section(self, rules: Sequence[FieldRule], raw: Any, dotted: str) -> dict[str, Any]:
        """Scalar settings: defaults filled in, every value checked."""
        given = self.mapping(raw, dotted)
        self.known_keys(given, dotted, [r.name for r in rules])
        out: dict[str, Any] = {}
        for rule in rules:
            path = f"{dotted}.{rule.name}"
            if rule.name not in given:
                if rule.default is _REQUIRED:
                    raise self.fail(path, f"missing; expected {rule.allowed}")
                out[rule.name] = rule.default
                continue
            out[rule.name] = self.value(rule, given[rule.name], path)
        return out

    def axes(self, rules: Sequence[FieldRule], raw: Any, dotted: str) -> dict[str, tuple[Any, ...]]:
        """Like section(), but a list is an axis: each of its values is checked."""
        given = self.mapping(raw, dotted)
        self.known_keys(given, dotted, [r.name for r in rules])
        out: dict[str, tuple[Any, ...]] = {}
        for rule in rules:
            path = f"{dotted}.{rule.name}"
            if rule.name not in given:
                if rule.default is _REQUIRED:
                    raise self.fail(path, f"missing; expected {rule.allowed}")
                out[path] = (rule.default,)
                continue
            value = given[rule.name]
            if isinstance(value, list):
                if not value:
                    raise self.fail(path, f"empty list; an axis needs at least one value of {rule.allowed}")
                for i, item in enumerate(value):
                    self.value(rule, item, f"{path}[{i}]")
                if len(set(map(_freeze, value))) != len(value):
                    raise self.fail(path, f"{_show(value)} repeats a value; each value once")
                out[path] = tuple(value)
            else:
                out[path] = (self.value(rule, value, path),)
        return out

    def field_name(self, name: Any, dotted: str) -> str:
        """Accept `num_workers` or `loader.num_workers`; return the dotted form."""
        if isinstance(name, str):
            if name in RULES_BY_DOTTED:
                return name
            if name in SHORT_TO_DOTTED:
                return SHORT_TO_DOTTED[name]
        raise self.fail(
            dotted,
            f"{_show(name)} is not a workload or loader field; valid: {', '.join(SHORT_TO_DOTTED)}",
        )


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value).replace("None", "null")
    if isinstance(value, bool):
        text = str(value).lower()
    return text if len(text) <= 60 else text[:57] + "..."


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def load_spec(path: str | Path) -> Spec:
    """Read and validate a spec file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SpecError(f"cannot read spec: {e.strerror}", file=str(path)) from e
    return parse_spec(text, file=str(path), path=p)


def parse_spec(text: str, *, file: str | None = None, path: Path | None = None) -> Spec:
    try:
        loaded = load_yaml_with_lines(text)
    except YamlSyntaxError as e:
        raise SpecError(str(e), file=file, line=e.line) from e
    c = _Checker(loaded, file)
    top = loaded.data
    if not isinstance(top, Mapping):
        raise SpecError(f"the spec must be a mapping with keys {', '.join(TOP_LEVEL)}", file=file, line=1)
    c.known_keys(top, "", TOP_LEVEL)

    name = top.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise c.fail("name", f"{_show(name)} is not allowed; expected letters, digits, '.', '_' or '-'")
    description = top.get("description", "")
    if not isinstance(description, str):
        raise c.fail("description", f"{_show(description)} is not allowed; expected a string")

    if "workload" not in top:
        raise c.fail("workload", "missing; expected a mapping with dataset and model")
    axes = {
        **c.axes(WORKLOAD_FIELDS, top.get("workload"), "workload"),
        **c.axes(LOADER_FIELDS, top.get("loader"), "loader"),
    }
    _check_factories(c, axes)

    measure = Measure(**c.section(MEASURE_FIELDS, top.get("measure"), "measure"))
    sampler = SamplerConfig(**c.section(SAMPLER_FIELDS, top.get("sampler"), "sampler"))
    slurm_values = c.section(SLURM_FIELDS, top.get("slurm"), "slurm")
    if slurm_values["tasks_per_node"] is None:
        slurm_values["tasks_per_node"] = max(1, slurm_values["gpus_per_node"])
    slurm_values["setup"] = tuple(slurm_values["setup"])
    slurm = SlurmConfig(**slurm_values)

    rungs = _rungs(c, top.get("rungs", ["full"]))
    profile = None
    if top.get("profile") is not None:
        profile = ProfileSpec(**c.section(PROFILE_FIELDS, top["profile"], "profile"))
        if profile.rung not in rungs:
            raise c.fail(
                "profile.rung", f"{profile.rung!r} is not among the spec's rungs ({', '.join(rungs)})"
            )
    zip_groups = _zip_groups(c, top.get("zip"), axes)
    exclude = _exclude(c, top.get("exclude"))
    sequence = _sequence(c, top.get("sequence"), axes)

    return Spec(
        name=name,
        description=description,
        path=path,
        text=text,
        axes=axes,
        zip_groups=zip_groups,
        exclude=exclude,
        sequence=sequence,
        measure=measure,
        rungs=rungs,
        slurm=slurm,
        sampler=sampler,
        profile=profile,
    )


def _rungs(c: _Checker, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise c.fail("rungs", f"{_show(raw)} is not allowed; expected a list of {rung_names.allowed_text()}")
    out: list[str] = []
    for i, name in enumerate(raw):
        path = f"rungs[{i}]"
        if not isinstance(name, str) or not rung_names.is_rung(name):
            raise c.fail(path, f"{_show(name)} is not a rung; expected {rung_names.allowed_text()}")
        cut = rung_names.transform_cut(name)
        if cut is not None and cut < 1:
            raise c.fail(path, f"{_show(name)}: transform:<k> needs k >= 1 (k transforms cached)")
        base = "transform:<k>" if cut is not None else name
        if base not in BUILT_RUNGS:
            built = ", ".join(sorted(BUILT_RUNGS))
            raise c.fail(path, f"rung {name!r} is not built yet in this version; available: {built}")
        if name in out:
            raise c.fail(path, f"{name!r} is listed twice")
        out.append(name)
    # Run in ladder order whatever the order given, so neighbouring rungs are adjacent in time.
    return tuple(sorted(out, key=rung_names.ladder_position))


def _zip_groups(c: _Checker, raw: Any, axes: Mapping[str, tuple[Any, ...]]) -> tuple[tuple[str, ...], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(g, list) for g in raw):
        raise c.fail("zip", f"{_show(raw)} is not allowed; expected a list of lists of axis names")
    groups: list[tuple[str, ...]] = []
    used: set[str] = set()
    for i, group in enumerate(raw):
        path = f"zip[{i}]"
        if len(group) < 2:
            raise c.fail(path, f"{_show(group)} zips fewer than two axes")
        names = tuple(c.field_name(n, f"{path}[{j}]") for j, n in enumerate(group))
        lengths = {n: len(axes[n]) for n in names}
        if any(length == 1 for length in lengths.values()):
            single = next(n for n, length in lengths.items() if length == 1)
            raise c.fail(path, f"{single} is not an axis (a single value); zip needs lists")
        if len(set(lengths.values())) != 1:
            shown = ", ".join(f"{n} has {length}" for n, length in lengths.items())
            raise c.fail(path, f"zipped axes must have the same length: {shown}")
        if used & set(names):
            raise c.fail(path, f"{sorted(used & set(names))[0]} is already zipped in another group")
        used |= set(names)
        groups.append(names)
    return tuple(groups)


def _exclude(c: _Checker, raw: Any) -> tuple[Mapping[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise c.fail("exclude", f"{_show(raw)} is not allowed; expected a list of mappings")
    out: list[Mapping[str, Any]] = []
    for i, item in enumerate(raw):
        path = f"exclude[{i}]"
        if not isinstance(item, Mapping) or not item:
            raise c.fail(path, f"{_show(item)} is not allowed; expected a mapping of field: value")
        resolved: dict[str, Any] = {}
        for key, value in item.items():
            dotted = c.field_name(key, f"{path}.{key}")
            c.value(RULES_BY_DOTTED[dotted], value, f"{path}.{key}")
            resolved[dotted] = value
        out.append(resolved)
    return tuple(out)


def _sequence(c: _Checker, raw: Any, axes: Mapping[str, tuple[Any, ...]]) -> tuple[SequenceStep, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise c.fail("sequence", f"{_show(raw)} is not allowed; expected a list of override mappings")
    steps: list[SequenceStep] = []
    for i, item in enumerate(raw):
        path = f"sequence[{i}]"
        if not isinstance(item, Mapping):
            raise c.fail(path, f"{_show(item)} is not allowed; expected a mapping of field: value")
        label = item.get("name", f"step{i}")
        if not isinstance(label, str) or not label:
            raise c.fail(f"{path}.name", f"{_show(label)} is not allowed; expected a string")
        overrides: dict[str, Any] = {}
        for key, value in item.items():
            if key == "name":
                continue
            dotted = c.field_name(key, f"{path}.{key}")
            if len(axes[dotted]) > 1:
                raise c.fail(f"{path}.{key}", f"{dotted} is an axis; a sequence step cannot also set it")
            c.value(RULES_BY_DOTTED[dotted], value, f"{path}.{key}")
            overrides[dotted] = value
        steps.append(SequenceStep(name=label, overrides=overrides))
    if len({s.name for s in steps}) != len(steps):
        raise c.fail("sequence", "step names must be distinct")
    return tuple(steps)


def _check_factories(c: _Checker, axes: Mapping[str, tuple[Any, ...]]) -> None:
    """Fail at load time, with a line, on a user factory that cannot import or bind, or a
    dataset class that cannot yield uint8 when gpu_normalize asks it to."""
    if True in axes["workload.gpu_normalize"]:
        for name in axes["workload.dataset"]:
            factory = registry.resolve(name, registry.DATASETS, "dataset")
            if isinstance(factory, type) and not hasattr(factory, "to_uint8"):
                raise c.fail(
                    "workload.gpu_normalize",
                    f"dataset {name!r} cannot yield uint8 images (it has no to_uint8() method); "
                    "gpu_normalize needs fake_cifar, image_folder or a dataset that has one",
                )
    for kind, table, args_field in (
        ("dataset", registry.DATASETS, "workload.dataset_args"),
        ("model", registry.MODELS, "workload.model_args"),
    ):
        for i, name in enumerate(axes[f"workload.{kind}"]):
            path = f"workload.{kind}" if len(axes[f"workload.{kind}"]) == 1 else f"workload.{kind}[{i}]"
            try:
                factory = registry.resolve(name, table, kind)
            except registry.FactoryError as e:
                raise c.fail(path, str(e)) from e
            for args in axes[args_field]:
                call_args = dict(args)
                if kind == "model":
                    call_args.setdefault("num_classes", 10)
                try:
                    registry.check_arguments(factory, call_args)
                except registry.FactoryError as e:
                    raise c.fail(args_field, f"does not fit {kind} {name!r}: {e}") from e
