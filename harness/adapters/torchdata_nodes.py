"""torchdata.nodes: a `Loader` over a graph of nodes (ParallelMapper, PinMemory, Prefetcher)
that work in threads of the rank's own process, not in DataLoader workers: the host sampler
counts the rank's own CPU time as the loader's. Measured as given (its `set_epoch`, where it
has one, told each epoch); it exposes no map-style data set, so the sample-level rungs say so."""

from __future__ import annotations

from typing import Any

from harness.adapters.base import NoAnswer, module_of


class TorchdataNodes(NoAnswer):
    name = "torchdata"

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) == "torchdata"

    def in_threads(self, loader: Any) -> bool | None:
        return True if self.recognises(loader) else None
