"""YAML spec -> typed, frozen Spec. Every error names file, line, dotted field, value, allowed.

The settings, their defaults and what each allows are declared once, in
`harness_schema/settings.py`; this module checks a YAML document against them. A list under
`workload` or `loader` is an axis (the plan crosses axes), and so is one under `slurm.nodes`,
`slurm.gpus_per_node` or `slurm.tasks_per_node` (the sizes a point runs at); every other
section is scalar settings.

The checks that point at a line live beside it, a concept a module: the checker and its error
(spec_checker.py), the grid's zips, exclusions and sequence (spec_grid.py), a script's
workload (script_workload.py) and the workload's factories (factory_checks.py).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import sbatch_safe
from harness.config.factory_checks import check_factories, check_loader, check_pipeline, optional_fields
from harness.config.overrides import Override, OverrideError, apply_overrides, dump_merged, parse_override
from harness.config.script_workload import is_script, script_workload
from harness.config.spec_checker import Checker, SpecError, show
from harness.config.spec_grid import SequenceStep, check_combinations, exclusions, sequence_steps, zip_axes
from harness_schema import rungs as rung_names
from harness_schema import settings
from harness_schema.expect import Expectation, parse_expect
from harness_schema.settings import (
    SCALE_FIELDS,
    Limits,
    Measure,
    ProfileSpec,
    SamplerConfig,
    Scale,
    SlurmConfig,
)
from harness_schema.yaml_lines import YamlSyntaxError, load_yaml_with_lines

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

# Rungs whose code exists. A rung that is named but not built is refused, never ignored.
BUILT_RUNGS: frozenset[str] = frozenset({*rung_names.LADDER, "transform:<k>"})


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
    c = Checker(loaded, file)
    top = loaded.data
    if top is None:
        raise SpecError(f"the spec is empty; expected a mapping with keys {', '.join(TOP_LEVEL)}", file=file)
    if not isinstance(top, Mapping):
        raise SpecError(f"the spec must be a mapping with keys {', '.join(TOP_LEVEL)}", file=file, line=1)
    c.known_keys(top, "", TOP_LEVEL)
    name, description = _name_and_description(c, top)
    if "workload" not in top:
        raise c.fail("workload", "missing; expected a mapping with dataset and model")
    script = is_script(c, top.get("workload"))
    values = {
        **(
            script_workload(c, top["workload"], path or Path(file or "spec.yaml"))
            if script
            else c.axes(
                settings.WorkloadSettings, top.get("workload"), "workload", optional_fields(top["workload"])
            )
        ),
        **c.axes(settings.LoaderSettings, top.get("loader"), "loader"),
    }
    zip_groups = zip_axes(c, top.get("zip"), values)
    sequence = sequence_steps(c, top.get("sequence"), values)
    check_combinations(c, values, zip_groups, len(sequence) or 1)
    notes = () if script else check_factories(c, values)
    rungs = _rungs(c, top.get("rungs", ["full"]))
    slurm, scales = _slurm(c, top.get("slurm"))
    ranks = max(scale.world_size for scale in scales)
    notes = (*notes, *check_loader(c, values, sequence, rungs, ranks))
    check_pipeline(c, values, sequence)
    return Spec(
        name=name,
        description=description,
        path=path,
        text=text,
        field_values=values,
        zip_groups=zip_groups,
        exclude=exclusions(c, top.get("exclude")),
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


def _name_and_description(c: Checker, top: Mapping[str, Any]) -> tuple[str, str]:
    name = top.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise c.fail("name", f"{show(name)} is not allowed; expected letters, digits, '.', '_' or '-'")
    description = top.get("description", "")
    if not isinstance(description, str):
        raise c.fail("description", f"{show(description)} is not allowed; expected a string")
    return name, description


def _slurm(c: Checker, raw: Any) -> tuple[SlurmConfig, tuple[Scale, ...]]:
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


def _scale_axis(c: Checker, values: list[Any], path: str, *, low: int) -> tuple[int, ...]:
    """A size's axis: integers >= low, each once (a repeated size would plan its points twice)."""
    if not values:
        raise c.fail(path, f"empty list; an axis of sizes needs at least one integer >= {low}")
    for i, item in enumerate(values):
        if not settings.is_int(item) or item < low:
            raise c.fail(f"{path}[{i}]", f"{show(item)} is not allowed; expected an integer >= {low}")
    if len(set(values)) != len(values):
        raise c.fail(path, f"{show(values)} repeats a value; each value once")
    return tuple(values)


def _check_sbatch_lines(c: Checker, values: Mapping[str, Any]) -> None:
    """Every value that becomes a line of the sbatch script holds one line: a line break would
    start a directive or a shell command of the value's choosing. The names (partition,
    account...) hold no `%` either: no Slurm name has one, and in a job's paths it is a pattern
    (sbatch_safe.py). A setup line may hold one (`date +%s`): Slurm leaves the script's body
    alone. Checked here, before anything is rendered, written or submitted."""
    for key in ("partition", "account", "qos", "constraint", "hint", "mem", "time"):
        c.line_safe(values[key], f"slurm.{key}")
        _no_percent(c, values[key], f"slurm.{key}")
    for i, line in enumerate(values["setup"]):
        c.line_safe(line, f"slurm.setup[{i}]")
    for key, value in values["extra"].items():
        c.line_safe(key, f"slurm.extra.{key}")
        _no_percent(c, key, f"slurm.extra.{key}")
        c.line_safe(value, f"slurm.extra.{key}")


def _no_percent(c: Checker, value: Any, dotted: str) -> None:
    if isinstance(value, str) and "%" in value:
        raise c.fail(
            dotted,
            f"{show(value)} is not allowed; expected a Slurm name without '%' ({sbatch_safe.PERCENT_WHY})",
        )


def _measure(c: Checker, raw: Any) -> Measure:
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


def _window_length(c: Checker, values: dict[str, Any]) -> None:
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


def _profile(c: Checker, raw: Any, rungs: tuple[str, ...]) -> ProfileSpec | None:
    if raw is None:
        return None
    profile = ProfileSpec(**c.section(ProfileSpec, raw, "profile"))
    if profile.rung not in rungs:
        raise c.fail("profile.rung", f"{profile.rung!r} is not among the spec's rungs ({', '.join(rungs)})")
    return profile


def _rungs(c: Checker, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise c.fail("rungs", f"{show(raw)} is not allowed; expected a list of {rung_names.allowed_text()}")
    out: list[str] = []
    for i, name in enumerate(raw):
        path = f"rungs[{i}]"
        if not isinstance(name, str) or not rung_names.is_rung(name):
            raise c.fail(path, f"{show(name)} is not a rung; expected {rung_names.allowed_text()}")
        cut = rung_names.transform_cut(name)
        if cut is not None and cut < 1:
            raise c.fail(path, f"{show(name)}: transform:<k> needs k >= 1 (k transforms cached)")
        base = "transform:<k>" if cut is not None else name
        if base not in BUILT_RUNGS:
            built = ", ".join(sorted(BUILT_RUNGS))
            raise c.fail(path, f"rung {name!r} is not built yet in this version; available: {built}")
        if name in out:
            raise c.fail(path, f"{name!r} is listed twice")
        out.append(name)
    # Run in ladder order whatever the order given, so neighbouring rungs are adjacent in time.
    return tuple(sorted(out, key=rung_names.ladder_position))
