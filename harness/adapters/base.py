"""The `Adapter` protocol: what the core asks of a library's loader or data set.

The model is pluggy's first-result hook: the core never names a library; it asks the registry
(registry.first), which asks each adapter in turn and takes the first answer that is not None.
An adapter answers only for what it recognises, None for anything else ("not mine", or "my
library has no such thing"). `NoAnswer` answers None to every question, so an adapter file
writes only the answers its library has.

Adapter modules import nothing of torch or of their library at import time: the registry is
read on a login node (the plan) and where the library is not installed. A library's own
module is found in `sys.modules` (a loader of it exists only where it was imported) or
imported inside the answer that needs it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

from harness.sources import length as lengths


class NotALoader(Exception):
    """What a factory made holds no loader (its hook returned something not iterable): the
    message says what; the core raises it as the factory's WorkloadError."""


class Adapter(Protocol):
    """A library, as the core asks about it. Every method returns None for "not mine"."""

    name: str
    """The library, as a user names it (in the registry's listing and in tests)."""

    def recognises(self, thing: Any) -> bool:
        """Whether `thing` (a loader, a data set, a transform) is one of this library's."""
        ...

    def dataloader(self, loader: Any) -> Any | None:
        """The torch DataLoader a loader of the library wraps: its settings are the loader's,
        its timeout bounds the loader's wait, and the sample-level rungs read through a copy."""
        ...

    def batch_size(self, loader: Any) -> int | None:
        """The loader's batch size, where the library says it in a way of its own."""
        ...

    def samples(self, dataset: Any) -> Any | None:
        """The data set in a form the sample-level rungs cut (workloads/contract.py: a
        SplitDataset or a WholeSampleDataset), where the library's data set is read as it is."""
        ...

    def steps(self, transform: Any) -> list[Callable[[Any], Any]] | None:
        """The steps of a transform of the library's that holds a Compose where the core does
        not look for one (the `transform:<k>` rungs cut after the k-th)."""
        ...

    def train_loader(self, made: Any, *, rank: int, world_size: int, seed: int) -> Any | None:
        """The iterable of batches in what a loader factory made, where the library's object
        is not itself one (a DataModule), on rank `rank` of `world_size`."""
        ...

    def makes_loader_holder(self, made: Any) -> bool | None:
        """Whether `made` (a factory, or the class it returns) is a holder train_loader opens
        and shards by rank itself; None where it is not the library's."""
        ...

    def ranks_fix(self) -> str | None:
        """What a user's loader factory may return instead, on several ranks, for the adapter
        to split the data by rank (`harness plan`'s advice)."""
        ...

    def described(self, loader: Any) -> str | None:
        """What the rows' `loader_given` adds to the loader's class: what the adapter did to it."""
        ...

    def sharding(self, loader: Any) -> Callable[[Any], Any] | None:
        """How a loader the library prepared shards batches between ranks: a function from a
        batch sampler to the sharded one, as the library wraps it; None where it does not."""
        ...

    def length(self, dataset: Any, world_size: int) -> int | None:
        """The data set's samples, where the library's len() says a share of them."""
        ...

    def in_threads(self, loader: Any) -> bool | None:
        """Whether the loader works in threads of the rank's own process (its CPU time is
        the rank's, not workers')."""
        ...

    def before_loop(self) -> dict[str, Callable[[Any], None]] | None:
        """For `harness plan`'s check run, which must stop at the script's loop having neither
        trained nor validated: the library's modules (by name) and what to change in each as it
        is imported, so that the library's own work before the loop is skipped."""
        ...


class NoAnswer:
    """An adapter that answers None to every question: the base of each library's."""

    name = ""

    def recognises(self, thing: Any) -> bool:
        return False

    def dataloader(self, loader: Any) -> Any | None:
        return None

    def batch_size(self, loader: Any) -> int | None:
        return None

    def samples(self, dataset: Any) -> Any | None:
        return None

    def steps(self, transform: Any) -> list[Callable[[Any], Any]] | None:
        return None

    def train_loader(self, made: Any, *, rank: int, world_size: int, seed: int) -> Any | None:
        return None

    def makes_loader_holder(self, made: Any) -> bool | None:
        return None

    def ranks_fix(self) -> str | None:
        return None

    def described(self, loader: Any) -> str | None:
        return None

    def sharding(self, loader: Any) -> Callable[[Any], Any] | None:
        return None

    def length(self, dataset: Any, world_size: int) -> int | None:
        return None

    def in_threads(self, loader: Any) -> bool | None:
        return None

    def before_loop(self) -> dict[str, Callable[[Any], None]] | None:
        return None


NOTE_HEARERS: list[Callable[[str], None]] = []
"""Who hears an adapter's notes besides the script's stderr: in `harness plan`'s check run,
its job (harness/probe/check_run.py adds it), whose report file `harness plan` reads."""


def note(line: str) -> None:
    """What an adapter's change did in `harness plan`'s check run (`before_loop`: a framework's
    validation skipped), said: one line on the script's stderr, and to each of NOTE_HEARERS,
    so that `harness plan` shows it whole however much the script prints after it (its stderr
    keeps only its end)."""
    print(line, file=sys.stderr, flush=True)
    for hearer in NOTE_HEARERS:
        hearer(line)


def module_of(thing: Any) -> str:
    """The top-level package that defines `thing`'s class ("" for a builtin)."""
    return (type(thing).__module__ or "").partition(".")[0]


class SelfShardingStream(NoAnswer):
    """A library (its top-level package: `name`) whose data set shards itself between ranks
    and workers, and whose len() is this rank's share: the data set's samples are that times
    the ranks."""

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) == self.name

    def length(self, dataset: Any, world_size: int) -> int | None:
        share = lengths.length(dataset) if self.recognises(dataset) else None  # None: it says it has none
        return None if share is None else share * world_size


def size(value: Any) -> int | None:
    """`value` where it is a batch size (a positive int), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
