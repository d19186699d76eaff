"""YAML spec -> typed, frozen Spec. Every error names file, line, dotted field, value, allowed.

The settings, their defaults and what each allows are declared once, in
`harness_schema/settings.py`; this module checks a YAML document against them. A list under
`workload` or `loader` is an axis (the plan crosses axes), and so is one under `slurm.nodes`,
`slurm.gpus_per_node` or `slurm.tasks_per_node` (the sizes a point runs at); every other
section is scalar settings. Structural checks that need the whole spec (zip lengths, exclude and sequence
fields) happen here too, so that they can point at a line.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.config import sbatch_safe, step_source
from harness.config.overrides import Override, OverrideError, apply_overrides, dump_merged, parse_override
from harness.workloads import loader_factory, registry
from harness_schema import rungs as rung_names
from harness_schema import script_flags, settings
from harness_schema.expect import Expectation, parse_expect
from harness_schema.settings import (
    MODEL_LOSS,
    REQUIRED,
    SCALE_FIELDS,
    Limits,
    Measure,
    ProfileSpec,
    SamplerConfig,
    Scale,
    SlurmConfig,
)
from harness_schema.yaml_lines import LoadedYaml, YamlSyntaxError, load_yaml_with_lines

__all__ = [
    "Measure",
    "ProfileSpec",
    "SamplerConfig",
    "Scale",
    "SequenceStep",
    "SlurmConfig",
    "Spec",
    "SpecError",
]


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
    "expect",
    "limits",
)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""fullmatch only: `$` would let a trailing line break through, into the job's name."""

_LINE_SAFE = "a single line without control characters"

# Rungs whose code exists. A rung that is named but not built is refused, never ignored.
BUILT_RUNGS: frozenset[str] = frozenset({*rung_names.LADDER, "transform:<k>"})

# "num_workers" and "loader.num_workers" both name the same setting.
FIELDS_BY_DOTTED: dict[str, Field[Any]] = settings.setting_fields()
SHORT_TO_DOTTED: dict[str, str] = {dotted.split(".", 1)[1]: dotted for dotted in FIELDS_BY_DOTTED}


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
    field_values: Mapping[str, tuple[Any, ...]]
    """Every workload and loader setting (dotted) -> its values: one value, or an axis."""
    zip_groups: tuple[tuple[str, ...], ...]
    exclude: tuple[Mapping[str, Any], ...]
    sequence: tuple[SequenceStep, ...]
    measure: Measure
    rungs: tuple[str, ...]
    slurm: SlurmConfig
    sampler: SamplerConfig
    profile: ProfileSpec | None = None
    expect: tuple[Expectation, ...] = field(default=())
    """Bounds the results must meet (harness_schema/expect.py); checked after run and report."""
    notes: tuple[str, ...] = field(default=())
    loader_named: frozenset[str] = frozenset()
    """The loader settings the spec names (its loader section, a sequence step): with a script
    workload, the others keep the script's own values (harness/probe/recording.py)."""
    limits: Limits = field(default_factory=Limits)
    """How long a wait may last before it is a fault (not part of a point's id)."""
    scales: tuple[Scale, ...] = ()
    """The sizes the points run at: slurm.nodes, gpus_per_node and tasks_per_node crossed
    where the spec gives lists (() : the one size of `slurm`, as a Spec made in code has)."""

    def scale_axis(self) -> tuple[Scale, ...]:
        """Every size a point runs at, in the spec's order (one for a spec of integers)."""
        return self.scales or (Scale.of(self.slurm),)

    @property
    def scale_varies(self) -> bool:
        """The spec gives more than one size: a point's size is then part of its id."""
        return len(self.scale_axis()) > 1


class _Checker:
    """Holds the file and line table so that each check is one readable line."""

    def __init__(self, loaded: LoadedYaml, file: str | None) -> None:
        self.loaded, self.file = loaded, file

    def fail(self, dotted: str, message: str) -> SpecError:
        # A key may hold a line break too: the field is shown escaped, so the error is one line.
        shown = "".join(repr(ch)[1:-1] if sbatch_safe.is_control(ch) else ch for ch in dotted)
        return SpecError(message, file=self.file, line=self.loaded.line_of(dotted), field=shown)

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

    def value(self, f: Field[Any], value: Any, dotted: str) -> Any:
        rule = settings.rule_of(f)
        if not rule.check(value):
            raise self.fail(dotted, f"{_show(value)} is not allowed; expected {rule.allowed}")
        return value

    def given_or_default(self, f: Field[Any], given: Mapping[str, Any], path: str) -> Any:
        if f.name in given:
            return given[f.name]
        default = settings.default_of(f)
        if default is REQUIRED:
            raise self.fail(path, f"missing; expected {settings.rule_of(f).allowed}")
        return default

    def section(self, cls: type, raw: Any, dotted: str) -> dict[str, Any]:
        """Scalar settings of one section: defaults filled in, every value checked."""
        given = self.mapping(raw, dotted)
        self.known_keys(given, dotted, [f.name for f in fields(cls)])
        out: dict[str, Any] = {}
        for f in fields(cls):
            path = f"{dotted}.{f.name}"
            value = self.given_or_default(f, given, path)
            out[f.name] = self.value(f, value, path) if f.name in given else value
        return out

    def axes(
        self, cls: type, raw: Any, dotted: str, optional: Sequence[str] = ()
    ) -> dict[str, tuple[Any, ...]]:
        """Like section(), but a list is an axis: each of its values is checked. A required
        field named in `optional` is null when not given."""
        given = self.mapping(raw, dotted)
        self.known_keys(given, dotted, [f.name for f in fields(cls)])
        out: dict[str, tuple[Any, ...]] = {}
        for f in fields(cls):
            path = f"{dotted}.{f.name}"
            absent = f.name in optional and f.name not in given
            value = None if absent else self.given_or_default(f, given, path)
            if f.name not in given:
                out[path] = (value,)
            elif isinstance(value, list) and settings.rule_of(f).axis:
                out[path] = self.axis(f, value, path)
            else:
                out[path] = (self.value(f, value, path),)
        return out

    def axis(self, f: Field[Any], values: list[Any], path: str) -> tuple[Any, ...]:
        if not values:
            allowed = settings.rule_of(f).allowed
            raise self.fail(path, f"empty list; an axis needs at least one value of {allowed}")
        for i, item in enumerate(values):
            self.value(f, item, f"{path}[{i}]")
        if len(set(map(_freeze, values))) != len(values):
            raise self.fail(path, f"{_show(values)} repeats a value; each value once")
        return tuple(values)

    def field_name(self, name: Any, dotted: str) -> str:
        """Accept `num_workers` or `loader.num_workers`; return the dotted form."""
        if isinstance(name, str):
            if name in FIELDS_BY_DOTTED:
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


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> Spec:
    """Read and validate a spec file, with the command line's `key=value` overrides applied
    (harness/config/overrides.py); the Spec's text is then the merged spec."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SpecError(f"cannot read spec: {e.strerror}", file=str(path)) from e
    text = _spec_text(data, str(path))
    if not overrides:
        return parse_spec(text, file=str(path), path=p)
    return _with_overrides(text, str(path), p, overrides)


def _spec_text(data: bytes, file: str) -> str:
    """The spec's bytes as text: UTF-8 (YAML's own encoding), whatever the machine's locale (a
    compute node's may be C or Latin-1), a byte order mark allowed (Windows editors write
    one). Anything else, a comment saved in Latin-1 (`# réglages`), is one line naming the
    line and the byte, not a UnicodeDecodeError's traceback."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise SpecError(
            f"not UTF-8 text (byte 0x{data[e.start]:02x} at column {column}): save the spec as UTF-8",
            file=file,
            line=line,
        ) from None


def _with_overrides(text: str, file: str, path: Path, given: Sequence[str]) -> Spec:
    """The file's own YAML errors keep their lines; the merged spec is validated as a whole, and
    an error in it names the override that caused it (without a line: it is not in the file)."""
    try:
        parsed = [parse_override(o) for o in given]
        top = load_yaml_with_lines(text).data
        if not isinstance(top, Mapping):  # empty or not a mapping: the file's own error
            return parse_spec(text, file=file, path=path)
        merged = apply_overrides(top, parsed)
    except YamlSyntaxError as e:
        raise SpecError(str(e), file=file, line=e.line) from e
    except OverrideError as e:
        raise SpecError(str(e), file=file) from e
    try:
        return parse_spec(dump_merged(merged, file, parsed, text), file=file, path=path)
    except SpecError as e:
        raise _blame(e, text, file, path, top, parsed) from e


def _blame(
    error: SpecError, text: str, file: str, path: Path, top: Mapping[str, Any], given: Sequence[Override]
) -> SpecError:
    """Name the override an error of the merged spec comes from: the last one whose key the
    error's field is about; else the file's own error (with its line), if the file alone has
    one; else the first override whose addition makes the spec fail (an axis that no longer
    fits a zip, say)."""
    culprit = next((o for o in reversed(given) if error.field and o.touches(error.field)), None)
    if culprit is None:
        for k in range(len(given) + 1):
            try:
                if k == 0:
                    parse_spec(text, file=file, path=path)
                else:
                    parse_spec(dump_merged(apply_overrides(top, given[:k]), file, given[:k]), file=file)
            except SpecError as e:
                if k == 0:
                    return e
                culprit = given[k - 1]
                break
    where = f"override {culprit.text}" if culprit else "overrides " + " ".join(o.text for o in given)
    return SpecError(error.message, file=f"{file}: {where}", field=error.field)


def parse_spec(text: str, *, file: str | None = None, path: Path | None = None) -> Spec:
    try:
        loaded = load_yaml_with_lines(text)
    except YamlSyntaxError as e:
        raise SpecError(str(e), file=file, line=e.line) from e
    c = _Checker(loaded, file)
    top = loaded.data
    if top is None:
        raise SpecError(f"the spec is empty; expected a mapping with keys {', '.join(TOP_LEVEL)}", file=file)
    if not isinstance(top, Mapping):
        raise SpecError(f"the spec must be a mapping with keys {', '.join(TOP_LEVEL)}", file=file, line=1)
    c.known_keys(top, "", TOP_LEVEL)
    name, description = _name_and_description(c, top)
    if "workload" not in top:
        raise c.fail("workload", "missing; expected a mapping with dataset and model")
    script = _is_script(c, top.get("workload"))
    values = {
        **(
            _script_workload(c, top["workload"], path or Path(file or "spec.yaml"))
            if script
            else c.axes(
                settings.WorkloadSettings, top.get("workload"), "workload", _optional(top["workload"])
            )
        ),
        **c.axes(settings.LoaderSettings, top.get("loader"), "loader"),
    }
    zip_groups = _zip_groups(c, top.get("zip"), values)
    sequence = _sequence(c, top.get("sequence"), values)
    _check_combinations(c, values, zip_groups, len(sequence) or 1)
    notes = () if script else _check_factories(c, values)
    rungs = _rungs(c, top.get("rungs", ["full"]))
    slurm, scales = _slurm(c, top.get("slurm"))
    ranks = max(scale.world_size for scale in scales)
    notes = (*notes, *_check_loader(c, values, sequence, rungs, ranks))
    _check_pipeline(c, values, sequence)
    return Spec(
        name=name,
        description=description,
        path=path,
        text=text,
        field_values=values,
        zip_groups=zip_groups,
        exclude=_exclude(c, top.get("exclude")),
        sequence=sequence,
        measure=_measure(c, top.get("measure")),
        rungs=rungs,
        slurm=slurm,
        sampler=SamplerConfig(**c.section(SamplerConfig, top.get("sampler"), "sampler")),
        profile=_profile(c, top.get("profile"), rungs),
        expect=parse_expect(top.get("expect"), c.fail, rungs=rungs, steps=[s.name for s in sequence]),
        notes=notes,
        loader_named=_loader_named(top.get("loader"), sequence),
        limits=Limits(**c.section(Limits, top.get("limits"), "limits")),
        scales=scales,
    )


def _loader_named(raw: Any, sequence: tuple[SequenceStep, ...]) -> frozenset[str]:
    named = set(raw) if isinstance(raw, Mapping) else set()
    for step in sequence:
        named |= {k.removeprefix("loader.") for k in step.overrides if k.startswith("loader.")}
    return frozenset(named)


SCRIPT_FIELDS = ("script", "args", "batch_size", "flags")
"""What a spec may give beside `workload.script`: the script owns its dataset, model and step."""


def _is_script(c: _Checker, raw: Any) -> bool:
    given = c.mapping(raw, "workload")
    _check_flags(c, given)
    return given.get("script") is not None


def _check_flags(c: _Checker, given: Mapping[str, Any]) -> None:
    """`workload.flags`, with a script only; an unknown setting or a flag that is none, named
    (harness_schema/script_flags.py)."""
    if "flags" not in given:
        return
    if given.get("script") is None:
        raise c.fail("workload.flags", "only with workload.script: the flags are your script's own")
    found = script_flags.problem(given["flags"], settings.FLAGGABLE, settings.FLAGGABLE_BOOLEANS)
    if found is not None:
        key, what = found
        raise c.fail(f"workload.flags.{key}" if key else "workload.flags", what)


def _script_workload(c: _Checker, given: Mapping[str, Any], spec_path: Path) -> dict[str, tuple[Any, ...]]:
    """The workload of a script: `script` found (relative to the spec's folder) and recorded
    absolute, `args` and `batch_size` checked; every other workload field is the script's own
    business and refused. The fields left out are null where they describe the script's
    pipeline (dataset, model; batch_size unless given: the script's own, which the probe
    records in the rows)."""
    c.known_keys(given, "workload", [f.name for f in fields(settings.WorkloadSettings)])
    for key in given:
        if key not in SCRIPT_FIELDS:
            raise c.fail(
                f"workload.{key}",
                "not allowed with workload.script: the script owns its dataset, model and "
                f"training step; beside script give {', '.join(SCRIPT_FIELDS[1:])} (and loader: settings)",
            )
    values: dict[str, tuple[Any, ...]] = {}
    for f in fields(settings.WorkloadSettings):
        dotted = f"workload.{f.name}"
        if f.name in given and isinstance(given[f.name], list) and settings.rule_of(f).axis:
            values[dotted] = c.axis(f, given[f.name], dotted)
        elif f.name in given:
            values[dotted] = (c.value(f, given[f.name], dotted),)
        else:
            default = settings.default_of(f)
            values[dotted] = (None if default is REQUIRED or f.name == "batch_size" else default,)
    script = str(given["script"])
    found = _script_path(script, spec_path.parent)
    if not found.is_file():
        raise c.fail(
            "workload.script",
            f"{script!r} not found (looked for {found}); expected a path relative to the "
            "spec's folder, or absolute",
        )
    values["workload.script"] = (str(found),)
    values["workload.args"] = (list(values["workload.args"][0]),)
    values["workload.flags"] = (script_flags.normalised(values["workload.flags"][0]),)
    return values


def _script_path(value: str, base: Path) -> Path:
    """`~` and `$VARS` expanded; a relative path is taken from the spec's folder."""
    path = Path(os.path.expandvars(os.path.expanduser(value)))
    return path if path.is_absolute() else (base.resolve() / path)


def _name_and_description(c: _Checker, top: Mapping[str, Any]) -> tuple[str, str]:
    name = top.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise c.fail("name", f"{_show(name)} is not allowed; expected letters, digits, '.', '_' or '-'")
    description = top.get("description", "")
    if not isinstance(description, str):
        raise c.fail("description", f"{_show(description)} is not allowed; expected a string")
    return name, description


def _slurm(c: _Checker, raw: Any) -> tuple[SlurmConfig, tuple[Scale, ...]]:
    """The `slurm` section, its sizes (nodes, gpus_per_node, tasks_per_node) crossed where
    the spec gives lists; the SlurmConfig holds the first size (what a spec of one size had)."""
    given = dict(c.mapping(raw, "slurm"))
    axes: dict[str, tuple[Any, ...]] = {}
    for name in SCALE_FIELDS:
        if isinstance(given.get(name), list):
            axes[name] = _scale_axis(c, given[name], f"slurm.{name}", low=0 if name == "gpus_per_node" else 1)
            given[name] = axes[name][0]
    values = c.section(SlurmConfig, given, "slurm")
    _check_sbatch_lines(c, values)
    values["setup"] = tuple(values["setup"])
    scales: list[Scale] = []
    for nodes, gpus, tasks in itertools.product(*(axes.get(n, (values[n],)) for n in SCALE_FIELDS)):
        ranks = max(1, gpus) if tasks is None else tasks
        scale = Scale(nodes=nodes, gpus_per_node=gpus, tasks_per_node=ranks)
        if scale not in scales:
            scales.append(scale)
    first = scales[0]
    values.update(nodes=first.nodes, gpus_per_node=first.gpus_per_node, tasks_per_node=first.tasks_per_node)
    return SlurmConfig(**values), tuple(scales)


def _scale_axis(c: _Checker, values: list[Any], path: str, *, low: int) -> tuple[int, ...]:
    """A size's axis: integers >= low, each once (a repeated size would plan its points twice)."""
    if not values:
        raise c.fail(path, f"empty list; an axis of sizes needs at least one integer >= {low}")
    for i, item in enumerate(values):
        if not settings.is_int(item) or item < low:
            raise c.fail(f"{path}[{i}]", f"{_show(item)} is not allowed; expected an integer >= {low}")
    if len(set(values)) != len(values):
        raise c.fail(path, f"{_show(values)} repeats a value; each value once")
    return tuple(values)


def _check_sbatch_lines(c: _Checker, values: Mapping[str, Any]) -> None:
    """Every value that becomes a line of the sbatch script holds one line: a line break would
    start a directive or a shell command of the value's choosing. The names (partition,
    account...) hold no `%` either: no Slurm name has one, and in a job's paths it is a pattern
    (sbatch_safe.py). A setup line may hold one (`date +%s`): Slurm leaves the script's body
    alone. Checked here, before anything is rendered, written or submitted."""
    for key in ("partition", "account", "qos", "constraint", "hint", "mem", "time"):
        _line_safe(c, values[key], f"slurm.{key}")
        _no_percent(c, values[key], f"slurm.{key}")
    for i, line in enumerate(values["setup"]):
        _line_safe(c, line, f"slurm.setup[{i}]")
    for key, value in values["extra"].items():
        _line_safe(c, key, f"slurm.extra.{key}")
        _no_percent(c, key, f"slurm.extra.{key}")
        _line_safe(c, value, f"slurm.extra.{key}")


def _line_safe(c: _Checker, value: Any, dotted: str) -> None:
    if isinstance(value, str) and sbatch_safe.has_line_break(value):
        raise c.fail(dotted, f"{_show(value)} is not allowed; expected {_LINE_SAFE}")


def _no_percent(c: _Checker, value: Any, dotted: str) -> None:
    if isinstance(value, str) and "%" in value:
        raise c.fail(
            dotted,
            f"{_show(value)} is not allowed; expected a Slurm name without '%' ({sbatch_safe.PERCENT_WHY})",
        )


def _measure(c: _Checker, raw: Any) -> Measure:
    """`repeats: auto` is read as the first round (settings.FIRST_ROUND) with its budget in
    `max_repeats`. Where `repeats` is not given, one repeat each, then the contenders' follow-up
    (`decide`, settings.DEFAULT_DECIDE unless given); a number of repeats given keeps its
    meaning: that many, no follow-up unless `decide` is given too. A budget that nothing would
    spend would be silently ignored: refused."""
    values = c.section(Measure, raw, "measure")
    given = raw if isinstance(raw, Mapping) else {}
    _window_length(c, values)
    if values["repeats"] == settings.AUTO_REPEATS:
        if values["decide"] is not None:
            raise c.fail(
                "measure.decide",
                f"{values['decide']} is the follow-up of the contenders alone; repeats: auto already "
                "measures every undecided point again (its most is measure.max_repeats)",
            )
        values["repeats"] = settings.FIRST_ROUND
        values["max_repeats"] = values["max_repeats"] or settings.DEFAULT_MAX_REPEATS
        return Measure(**values)
    if values["max_repeats"] is not None:
        raise c.fail(
            "measure.max_repeats",
            f"{values['max_repeats']} is the most repeats of repeats: auto: it needs measure.repeats: "
            f"auto (measure.repeats is {values['repeats']}); the contenders' most is measure.decide",
        )
    if "repeats" not in given and "decide" not in given:
        values["decide"] = settings.DEFAULT_DECIDE
    if values["decide"] is not None and values["decide"] <= values["repeats"]:
        raise c.fail(
            "measure.decide",
            f"{values['decide']} leaves no repeat to add after the first {values['repeats']} "
            "(measure.repeats); expected more than measure.repeats, or null",
        )
    if values["budget_minutes"] is not None and values["decide"] is None:
        raise c.fail(
            "measure.budget_minutes",
            f"{values['budget_minutes']} is a budget of more repeats: it needs measure.repeats: auto, "
            f"measure.decide, or no measure.repeats (measure.repeats is {values['repeats']})",
        )
    return Measure(**values)


def _window_length(c: _Checker, values: dict[str, Any]) -> None:
    """`steps: auto` is read as its least steps (settings.AUTO_MIN_BLOCKS blocks), its least
    duration in `seconds` and its most in `max_seconds`, defaults filled in; a most beside a
    fixed number of steps would be silently ignored, and one under the least never used:
    refused."""
    if values["steps"] != settings.AUTO_STEPS:
        if values["max_seconds"] is not None:
            raise c.fail(
                "measure.max_seconds",
                f"{values['max_seconds']} is the most an auto window lasts: it needs measure.steps: "
                f"auto (measure.steps is {values['steps']})",
            )
        return
    values["steps"] = settings.AUTO_MIN_BLOCKS * settings.AUTO_BLOCK_STEPS
    values["seconds"] = values["seconds"] or settings.AUTO_SECONDS
    values["max_seconds"] = values["max_seconds"] or max(settings.AUTO_MAX_SECONDS, values["seconds"])
    if values["max_seconds"] < values["seconds"]:
        raise c.fail(
            "measure.max_seconds",
            f"{values['max_seconds']} is less than measure.seconds ({values['seconds']}), the least an "
            "auto window lasts; expected a number of seconds >= measure.seconds",
        )


def _profile(c: _Checker, raw: Any, rungs: tuple[str, ...]) -> ProfileSpec | None:
    if raw is None:
        return None
    profile = ProfileSpec(**c.section(ProfileSpec, raw, "profile"))
    if profile.rung not in rungs:
        raise c.fail("profile.rung", f"{profile.rung!r} is not among the spec's rungs ({', '.join(rungs)})")
    return profile


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


MAX_COMBINATIONS = 250_000
"""The most combinations a spec's axes may cross into (before its exclusions). A plan of
100,000 points takes about 15 s and 250 MB (benchmarks/plan_scale.py); a grid of 40 values on
each of four axes would cross into millions, and `plan` would run for hours, out of memory,
where one line was due (issue 37)."""


def _check_combinations(
    c: _Checker, axes: Mapping[str, tuple[Any, ...]], zipped: tuple[tuple[str, ...], ...], steps: int
) -> None:
    """Refuse a spec whose axes (zipped ones counted once, times its sequence steps) cross
    into more than MAX_COMBINATIONS, naming each axis's length."""
    in_zip = {name for group in zipped for name in group}
    lengths = {name: len(v) for name, v in axes.items() if len(v) > 1 and name not in in_zip}
    lengths |= {" + ".join(group): len(axes[group[0]]) for group in zipped}
    total = steps * math.prod(lengths.values())
    if total <= MAX_COMBINATIONS:
        return
    factors = " × ".join(f"{name} {n}" for name, n in lengths.items())
    if steps > 1:
        factors += f" × sequence {steps}"
    first = next(iter(lengths), "sequence")
    raise c.fail(
        first.split(" + ")[0],
        f"the axes cross into {total:,} combinations ({factors}); at most {MAX_COMBINATIONS:,} are "
        "planned: narrow an axis, zip axes that go together, or split the sweep",
    )


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
            c.value(FIELDS_BY_DOTTED[dotted], value, f"{path}.{key}")
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
        # A step's name is a cell of every table and a word of the recommendation's lines: a
        # line break there split the console's one-line answer in two (issue 37's hostile name).
        _line_safe(c, label, f"{path}.name")
        overrides: dict[str, Any] = {}
        for key, value in item.items():
            if key == "name":
                continue
            dotted = c.field_name(key, f"{path}.{key}")
            if len(axes[dotted]) > 1:
                raise c.fail(f"{path}.{key}", f"{dotted} is an axis; a sequence step cannot also set it")
            c.value(FIELDS_BY_DOTTED[dotted], value, f"{path}.{key}")
            overrides[dotted] = value
        steps.append(SequenceStep(name=label, overrides=overrides))
    if len({s.name for s in steps}) != len(steps):
        raise c.fail("sequence", "step names must be distinct")
    return tuple(steps)


def _check_factories(c: _Checker, axes: dict[str, tuple[Any, ...]]) -> tuple[str, ...]:
    """Fail at load time, with a line, on a user factory that cannot import or bind, or a
    dataset class that cannot yield uint8 when gpu_normalize asks it to. A step_ms taken from
    a sweep is resolved here to its number (step_source.py); returns where it came from."""
    try:
        bases = (Path.cwd(), *([Path(c.file).parent] if c.file else []))
        resolved = step_source.resolve_model_args(
            axes["workload.model_args"], models=axes["workload.model"], bases=bases
        )
    except step_source.StepSourceError as e:
        raise c.fail("workload.model_args", str(e)) from e
    axes["workload.model_args"] = resolved.args
    if True in axes["workload.gpu_normalize"]:
        for name in axes["workload.dataset"]:
            if name is not None and not _yields_uint8(name):
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
            if name is not None:  # a dataset left to workload.loader's factory
                _check_factory(c, (kind, table, path, args_field), name, axes[args_field])
    return resolved.notes


def _yields_uint8(name: str) -> bool:
    if name in registry.DATASETS:  # a built-in: known without importing it (and torch)
        return name in registry.UINT8_DATASETS
    factory = registry.resolve(name, registry.DATASETS, "dataset")
    return not isinstance(factory, type) or hasattr(factory, "to_uint8")


def _check_factory(
    c: _Checker, where: tuple[str, Mapping[str, str], str, str], name: str, all_args: tuple[Any, ...]
) -> None:
    """Each of the spec's argument mappings binds to the factory: a built-in's signature is
    data (registry.BUILTIN_PARAMETERS); a user's factory is imported."""
    kind, table, path, args_field = where
    factory: Any = None
    if name not in table:
        try:
            factory = registry.resolve(name, table, kind)
        except registry.FactoryError as e:
            raise c.fail(path, str(e)) from e
    place = loader_factory.dataset_place(factory) if kind == "dataset" and factory is not None else ()
    for args in all_args:
        call_args = dict(args)
        if kind == "model" and (factory is None or registry.accepts(factory, "num_classes")):
            call_args.setdefault("num_classes", 10)
        own = [name for name in place if name in call_args]
        if own:
            raise c.fail(
                args_field,
                f"{own[0]} is the point's own: dataset {name!r} asks for it, so the harness passes "
                f"it (workload.batch_size, the rank's place); remove it from dataset_args",
            )
        call_args.update(dict.fromkeys(place, 1))
        try:
            if factory is None:
                registry.check_builtin(name, table, kind, call_args)
            else:
                registry.check_arguments(factory, call_args)
        except registry.FactoryError as e:
            raise c.fail(args_field, f"does not fit {kind} {name!r}: {e}") from e


def _check_pipeline(
    c: _Checker, axes: Mapping[str, tuple[Any, ...]], sequence: tuple[SequenceStep, ...]
) -> None:
    """The factories of a user's pipeline (collate, sampler, batch_sampler, loss, step,
    batch_samples), each imported and bound to what the harness passes it plus each of the
    spec's `<field>_args`; and the pairs that cannot go together. One line each, naming the
    field and the factory (registry.PIPELINE_CALLS: how each is called)."""
    given = {kind: _pipeline_values(c, axes, sequence, kind) for kind in registry.PIPELINE_FIELDS}
    for kind, names in given.items():
        for name, path in names:
            if kind == "loss" and name == MODEL_LOSS:
                continue  # the model's own loss: no factory to load
            try:
                factory = registry.resolve(name, {}, kind)
            except registry.FactoryError as e:
                raise c.fail(path, f"cannot load {kind} {name!r}: {e}") from e
            args_values = (
                () if kind == "batch_samples" else _all_values(axes, sequence, f"workload.{kind}_args")
            )
            for args in args_values or ({},):
                try:
                    registry.check_pipeline_call(kind, factory, args)
                except registry.FactoryError as e:
                    raise c.fail(
                        f"workload.{kind}_args" if args else path, f"does not fit {kind} {name!r}: {e}"
                    ) from e
        args_field = f"workload.{kind}_args"
        if not names and any(axes.get(args_field, ({},))):
            raise c.fail(args_field, f"{kind}_args given without workload.{kind} (the factory they are for)")
    for first, second, why in _PIPELINE_CONFLICTS:
        if given[first] and given[second]:
            raise c.fail(given[second][0][1], f"give {first} or {second}, not both: {why}")
    if given["step"] and "fp16" in axes["workload.amp"]:
        raise c.fail(
            "workload.amp",
            f"fp16 with step {given['step'][0][0]!r}: loss scaling (a GradScaler) is the step's own "
            "business; use amp: bf16, or autocast and scale in your step with amp: false",
        )


def _optional(raw: Any) -> tuple[str, ...]:
    """With workload.loader, the dataset may be left to the loader's factory."""
    return ("dataset",) if isinstance(raw, Mapping) and raw.get("loader") is not None else ()


_LOADER_OWNS = ("collate", "sampler", "batch_sampler")
"""What a loader factory's loader does itself: given beside it, they would not be used."""


def _check_loader(
    c: _Checker,
    axes: Mapping[str, tuple[Any, ...]],
    sequence: tuple[SequenceStep, ...],
    rungs: Sequence[str],
    ranks: int,
) -> list[str]:
    """workload.loader's factory: imported, bound to what the harness passes it and each
    loader_args; no axis over a setting it does not take; nothing beside it that its loader
    would ignore. Returns the plan's lines on the settings it leaves to its loader, and on the
    data it cannot split between the point's `ranks`."""
    names = _pipeline_values(c, axes, sequence, "loader")
    if not names:
        if any(_all_values(axes, sequence, "workload.loader_args")):
            raise c.fail(
                "workload.loader_args", "loader_args given without workload.loader (the factory they are for)"
            )
        return []
    for field_name in _LOADER_OWNS:
        if _pipeline_values(c, axes, sequence, field_name):
            raise c.fail(
                f"workload.{field_name}",
                f"not used with workload.loader: the factory's loader does its own {field_name}; "
                "give yours to the factory (through loader_args)",
            )
    with_dataset = any(name is not None for name in _all_values(axes, sequence, "workload.dataset"))
    loader_axes = {k.removeprefix("loader."): v for k, v in axes.items() if k.startswith("loader.")}
    notes: list[str] = []
    for name, path in names:
        try:
            factory = registry.resolve(name, {}, "loader")
        except registry.FactoryError as e:
            raise c.fail(path, f"cannot load loader {name!r}: {e}") from e
        for args in _all_values(axes, sequence, "workload.loader_args"):
            try:
                loader_factory.check_call(factory, args, with_dataset=with_dataset)
            except registry.FactoryError as e:
                raise c.fail(
                    "workload.loader_args" if args else path, f"does not fit loader {name!r}: {e}"
                ) from e
        refused = loader_factory.axis_over_untaken(name, factory, loader_axes)
        if refused is not None:
            setting = refused.split(" ", 1)[0]
            raise c.fail(f"loader.{setting}", refused)
        for note in (
            loader_factory.untaken_note(name, factory),
            *loader_factory.rung_notes(name, rungs),
            loader_factory.ranks_note(name, factory, ranks),
        ):
            if note is not None and note not in notes:
                notes.append(note)
    return notes


def _all_values(
    axes: Mapping[str, tuple[Any, ...]], sequence: tuple[SequenceStep, ...], dotted: str
) -> tuple[Any, ...]:
    return (*axes[dotted], *(step.overrides[dotted] for step in sequence if dotted in step.overrides))


_PIPELINE_CONFLICTS = (
    ("sampler", "batch_sampler", "the batch sampler chooses the indices itself"),
    ("step", "loss", "the step computes its own loss"),
)


def _pipeline_values(
    c: _Checker, axes: Mapping[str, tuple[Any, ...]], sequence: tuple[SequenceStep, ...], field: str
) -> list[tuple[str, str]]:
    """(factory name, the dotted path where the spec gives it) for each non-null value of
    workload.<field>, on its axis and in the sequence's steps."""
    dotted = f"workload.{field}"
    values = axes[dotted]
    found = [
        (name, dotted if len(values) == 1 else f"{dotted}[{i}]")
        for i, name in enumerate(values)
        if name is not None
    ]
    for i, step in enumerate(sequence):
        name = step.overrides.get(dotted)
        if name is not None:
            keys = (f"sequence[{i}].{dotted}", f"sequence[{i}].{field}")
            found.append((name, next((k for k in keys if k in c.loaded.lines), keys[0])))
    return found
