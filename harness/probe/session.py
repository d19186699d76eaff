"""What the probe holds in this process from one call to the next: the windows' clock (with
the time spent in `untimed()` taken out), the device of the running `measure`, the script's
own settings (its first `probe.loader` and `probe.settings` calls), and whether a point has
been measured here."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from harness.execution.loader_record import LoaderRecord, of_values, overlay


class Clock:
    """time.perf_counter with the time spent in `untimed()` taken out (the windows' clock)."""

    def __init__(self) -> None:
        self.paused_s = 0.0
        self.since: float | None = None
        self.depth = 0

    def __call__(self) -> float:
        now = self.since if self.since is not None else time.perf_counter()
        return now - self.paused_s

    def pause(self) -> None:
        if self.depth == 0:
            self.since = time.perf_counter()
        self.depth += 1

    def resume(self) -> None:
        self.depth -= 1
        if self.depth == 0 and self.since is not None:
            self.paused_s += time.perf_counter() - self.since
            self.since = None


@dataclass(kw_only=True, slots=True)
class State:
    """This process's probe, between calls."""

    device: torch.device | None = None
    """The device of the running `measure` (untimed syncs it)."""
    given: LoaderRecord | None = None
    """The script's own settings, from its first `probe.loader` and `probe.settings` calls."""
    measured: bool = False
    """Set once the loop takes its first batch of a point in this process: later `measure`
    calls yield nothing, so that a script's epoch loop around `measure` ends on its own."""
    pending: Any = None
    """The `measure` of the point (its `yielded.Batches`) while no batch has been taken from it:
    a later `measure` takes its place (a framework's `iter()` that probes the loader is not a
    pass), and it is retired."""


clock = Clock()
state = State()
"""Read as `session.state` at each call (a test gives the process a fresh one)."""


def remember(given: Mapping[str, Any]) -> LoaderRecord:
    """The script's own settings: the first value given for each name is kept. Returns them,
    with `given`'s own values in place of the first (what this call asks about)."""
    fresh = of_values(given)
    known = state.given
    state.given = fresh if known is None else overlay(fresh, known, known.known)
    return overlay(state.given, fresh, fresh.known)


def given_non_blocking() -> bool | None:
    """The non_blocking the script gave (`probe.settings`), None where it gave none."""
    return state.given.non_blocking if state.given is not None else None


def sync(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
