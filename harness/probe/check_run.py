"""`harness plan`'s check run, before the script's loop: what the adapters ask to change in a
library as it is imported (`before_loop`: a framework's own work that runs before it asks for
the loader, such as a validation pass), so that the run reaches `probe.measure` having neither
trained nor validated. The script may import the library before or after the probe: a module
already imported is changed at once, one imported later as its import ends. What a change says
it did (an adapter's `note`) is told to the job too, for `harness plan` to show."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from harness.adapters import base
from harness.adapters import registry as adapters
from harness.execution.probe_job import ProbeJob

Change = Callable[[Any], None]


def install(job: ProbeJob | None = None) -> None:
    """Every adapter's changes, made now or as their modules are imported; their notes told to
    `job` (its report file) as well as said on stderr."""
    if job is not None:
        base.NOTE_HEARERS.append(job.note)
    changes: dict[str, Change] = {}
    for asked in adapters.every(lambda adapter: adapter.before_loop()):
        changes.update(asked)
    waiting = {}
    for name, change in changes.items():
        module = sys.modules.get(name)
        if module is not None:
            change(module)
        else:
            waiting[name] = change
    if waiting:
        sys.meta_path.insert(0, AfterImport(waiting))


class AfterImport(importlib.abc.MetaPathFinder):
    """A finder that finds nothing itself: for a module it waits for, it asks the finders after
    it, and makes the module's change once the module has run."""

    def __init__(self, changes: dict[str, Change]) -> None:
        self.changes = changes

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        change = self.changes.pop(fullname, None)
        if change is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                _after(spec.loader, change)
                return spec
            if spec is not None:
                return spec
        return None


def _after(loader: Any, change: Change) -> None:
    run = loader.exec_module

    def exec_module(module: ModuleType) -> None:
        run(module)
        change(module)

    loader.exec_module = exec_module
