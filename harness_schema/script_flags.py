"""A script's own flags for the point's settings (`workload.flags`), so that a script whose
flags already name every DataLoader setting (the Jean Zay course's `--num-workers
--persistent-workers --pin-memory --non-blocking --prefetch-factor --drop-last`) follows the
point with no change but the probe's lines: its own logging, its other loaders (validation)
and its own copy then see the point's values.

```yaml
workload:
  script: dlojz.py
  flags: {num_workers: --num-workers, persistent_workers: --persistent-workers, batch_size: -b}
```

How each value is written (`arguments`):

- `"--x"`: a number as `--x 4`; a boolean as `--x` / `--no-x` (argparse's
  BooleanOptionalAction);
- `"--x="`: `--x=4`, a boolean as `--x=true` / `--x=false` (a `type=str2bool` flag);
- `{true: "--x", false: null}`: a boolean's flag for each value, null for none (argparse's
  `store_true`; `{true: null, false: "--no-x"}` for `store_false`).

Only the settings the spec names (its loader section, a sequence step; batch_size where it gives
one) are passed: the others keep the script's own values, as `probe.loader` keeps them
(Point.script_keeps); a null value (prefetch_factor without workers) passes nothing.
Torch-free: settings.py checks a spec's mapping with `problem`, the plan and the job write
the arguments with `arguments`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def problem(flags: Any, names: Sequence[str], booleans: Sequence[str]) -> tuple[str, str] | None:
    """(key, what is wrong) with a spec's `flags` mapping, or None where it is right. `names`:
    the settings that may be mapped; `booleans`: those of them that are true or false."""
    if not isinstance(flags, Mapping):
        return "", "is not a mapping; expected setting: --flag"
    for name, flag in flags.items():
        if name not in names:
            return str(name), f"{name!r} is not a setting; allowed: {', '.join(names)}"
        if isinstance(flag, Mapping):
            if name not in booleans:
                return str(name), "a {true: ..., false: ...} mapping is for a boolean setting only"
            if set(flag) - {True, False, "true", "false"} or not all(
                f is None or _is_flag(f) for f in flag.values()
            ):
                return str(name), f"{flag!r}: expected {{true: --flag or null, false: --flag or null}}"
        elif not _is_flag(flag):
            return str(name), f"{flag!r} is not a flag; expected a string starting with -"
        elif name in booleans and not str(flag).startswith("--"):
            return str(
                name
            ), f"{flag!r}: a boolean as --x/--no-x needs a long flag (or {{true: {flag}, false: null}})"
    return None


def _is_flag(flag: Any) -> bool:
    return isinstance(flag, str) and flag.startswith("-") and flag.strip("-=") != ""


def arguments(flags: Mapping[str, Any], values: Mapping[str, Any]) -> list[str]:
    """The script's arguments for the settings in `values` (setting -> the point's value) that
    `flags` maps, in the mapping's order."""
    out: list[str] = []
    for name, flag in flags.items():
        if name not in values or values[name] is None:
            continue
        value = values[name]
        if isinstance(flag, Mapping):
            chosen = normalised(flag).get(_word(bool(value)))
            out += [chosen] if chosen else []
        elif flag.endswith("="):
            out.append(f"{flag}{_word(value)}")
        elif isinstance(value, bool):
            out.append(flag if value else f"--no-{flag.removeprefix('--')}")
        else:
            out += [flag, str(value)]
    return out


def normalised(flags: Mapping[Any, Any]) -> dict[str, Any]:
    """The mapping with its keys as the point's JSON keeps them: "true" and "false" for a
    boolean's {true: ..., false: ...} (YAML reads them as booleans, JSON writes them as text)."""
    return {
        _word(key): normalised(flag) if isinstance(flag, Mapping) else flag for key, flag in flags.items()
    }


def _word(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
