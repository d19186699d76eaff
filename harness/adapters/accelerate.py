"""Hugging Face Accelerate: `accelerator.prepare(loader)` builds a DataLoaderShard over
`BatchSamplerShard(loader's batch sampler)`, whose len() is the inner one's divided by the
ranks, and which gives each rank its own batches whatever sampler the script gave.

Its sharding (`sharding`): where the prepared loader's batch sampler is a BatchSamplerShard
over more than one process, the function that wraps a batch sampler as that one wraps it (the
same processes, index, split_batches and even_batches). The probe rebuilds the script's
loader at each rung from its record, and a sampler of the script's own would otherwise be read
whole on every rank. Found in `sys.modules`: imported wherever a loader was prepared."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from harness.adapters.base import NoAnswer, module_of

LOADERS = "accelerate.data_loader"


class Accelerate(NoAnswer):
    name = "accelerate"

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) == "accelerate"

    def sharding(self, loader: Any) -> Callable[[Any], Any] | None:
        loaders = sys.modules.get(LOADERS)
        shard = getattr(loader, "batch_sampler", None)
        if loaders is None or not isinstance(shard, loaders.BatchSamplerShard) or shard.num_processes <= 1:
            return None

        def sharded(inner: Any) -> Any:
            return loaders.BatchSamplerShard(
                inner,
                num_processes=shard.num_processes,
                process_index=shard.process_index,
                split_batches=shard.split_batches,
                even_batches=shard.even_batches,
            )

        return sharded
