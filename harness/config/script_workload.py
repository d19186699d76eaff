"""A script's workload (`workload.script`): the script found and recorded absolute, its `args`,
`batch_size` and `flags` checked; every other workload field is the script's own business."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from harness.config.spec_checker import Checker
from harness_schema import script_flags, settings
from harness_schema.settings import REQUIRED

SCRIPT_FIELDS = ("script", "args", "batch_size", "flags")
"""What a spec may give beside `workload.script`: the script owns its dataset, model and step."""


def is_script(c: Checker, raw: Any) -> bool:
    given = c.mapping(raw, "workload")
    _check_flags(c, given)
    return given.get("script") is not None


def _check_flags(c: Checker, given: Mapping[str, Any]) -> None:
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


def script_workload(c: Checker, given: Mapping[str, Any], spec_path: Path) -> dict[str, tuple[Any, ...]]:
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
