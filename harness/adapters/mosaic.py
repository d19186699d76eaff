"""MosaicML Streaming: its StreamingDataset shards itself between ranks and workers (it takes
batch_size, and a dataset factory is given it where its signature names it:
loader_factory.DATASET_PLACE), and its len() is this rank's share: the data set's samples are
that times the ranks. Its iteration starts threads that hold locks, so it is never read in the
rank's process before the workers fork (issue 27: a worker forked then inherits the locks
held, not the threads, and hangs); the core reads only its len() between rungs."""

from __future__ import annotations

from harness.adapters.base import SelfShardingStream


class Mosaic(SelfShardingStream):
    name = "streaming"
