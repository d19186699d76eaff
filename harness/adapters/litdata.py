"""LitData: its StreamingDataset shards itself between ranks and workers, and its len() is
this rank's share (what its StreamingDataLoader's len needs): the data set's samples are that
times the ranks. Its StreamingDataLoader is a DataLoader subclass whose constructor is its
own, so a script's loader of it is measured as given (its set_epoch told each epoch, as the
core tells any loader that has one; its own count starts at 1, which the core's announcing
epoch 0 first accounts for)."""

from __future__ import annotations

from harness.adapters.base import SelfShardingStream


class LitData(SelfShardingStream):
    name = "litdata"
