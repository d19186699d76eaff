"""One record of a loader's DataLoader settings and batch size (`LoaderRecord`), whichever way
the loader reached the harness: the values a script gave (`probe.loader`'s arguments,
`probe.settings`'), the attributes a loader says of itself (a script's own DataLoader, a
factory's or a library's loader measured as given), and the point's settings laid over either
where the harness applies them (`overlay`).

The rule for the unknown: `known` names the settings whose value is known (said, read or
applied); every other holds None, which a row writes as an empty cell. A None that is known is
a value: prefetch_factor without workers, as PyTorch holds it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from harness_schema.settings import LOADER_COLUMNS, LoaderSettings

NAMES: tuple[str, ...] = (*LOADER_COLUMNS, "batch_size")
"""What a record holds: every loader setting, and the batch size."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LoaderRecord(LoaderSettings):
    """A loader's settings and batch size as far as known (the module says the rule)."""

    batch_size: int | None = None
    known: frozenset[str] = frozenset()
    """The names (of NAMES) whose value is known; the others hold None."""

    def values(self, names: Collection[str] = NAMES) -> dict[str, Any]:
        """The known values among `names`, by name, in `names`' order."""
        return {name: getattr(self, name) for name in names if name in self.known}

    def loader_settings(self) -> LoaderSettings:
        """Its loader settings alone (None where unknown), as a point and its rows hold them."""
        return LoaderSettings(**{f.name: getattr(self, f.name) for f in fields(LoaderSettings)})


_NOTHING: dict[str, Any] = dict.fromkeys(NAMES)
UNKNOWN = LoaderRecord(**_NOTHING)
"""A record that knows nothing."""


def of_values(values: Mapping[str, Any]) -> LoaderRecord:
    """The record of the values a script gave: those of NAMES it gave are known (None too)."""
    given = {name: values[name] for name in NAMES if name in values}
    return replace(UNKNOWN, **given, known=frozenset(given))


def of_attributes(loader: Any, names: Collection[str] = NAMES, inner: Any = None) -> LoaderRecord:
    """The record of what a loader says of itself: each of `names` its attribute, else that of
    the DataLoader it wraps (`inner`, where it wraps one), unknown where neither has it."""
    said: dict[str, Any] = {}
    for name in names:
        for holder in (loader, inner):
            if holder is not None and hasattr(holder, name):
                said[name] = getattr(holder, name)
                break
    return replace(UNKNOWN, **said, known=frozenset(said))


def overlay(record: LoaderRecord, over: LoaderSettings, applied: Collection[str]) -> LoaderRecord:
    """The point's settings (`over`; or another record's) laid over the record where the
    harness applies them: `over`'s value for each of `applied` that it knows (a plain
    LoaderSettings knows all of its own), the record's for the others (unknown stays unknown)."""
    known = over.known if isinstance(over, LoaderRecord) else frozenset(f.name for f in fields(over))
    laid = {name: getattr(over, name) for name in applied if name in known}
    return replace(record, **laid, known=record.known | frozenset(laid))
