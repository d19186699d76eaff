"""The `LoaderSource` protocol: what the runner asks of a point's loader on this rank."""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

from harness.execution import given_loader, ladder, loader_stream

Stream: TypeAlias = loader_stream.LoaderStream | ladder.RepeatStream | given_loader.IterStream
"""A rung's batches, as the timed window reads them (`next()`, `ready()`, `close()`)."""


class LoaderSource(Protocol):
    """A point's loader on this rank, bound to its placement, settings, batch size and the
    wait allowed for each batch (limits.batch_timeout_s)."""

    @property
    def dataset(self) -> Any:
        """The data set the rows and the caching what-if read (a map-style one or a stream);
        None where the loader exposes none."""
        ...

    def stream(self, rung: str) -> Stream:
        """The rung's stream of batches; sample_cache.RungUnavailable where this loader cannot serve
        it (the row is then skipped, saying why)."""
        ...

    def in_threads(self) -> bool:
        """Whether the loader may work in threads of this process (the sampler counts them as
        the loader's)."""
        ...
