"""Whether a torch DataLoader's sampling is PyTorch's plain one or the user's own class: a
plain sampler and batch sampler split nothing by rank (a factory's loader kept as given reads
the whole data set on every rank), and a sampler of the user's own class is theirs to shard."""

from __future__ import annotations

from typing import Any

from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

from harness.naming import type_name

OWN_SAMPLER = "a sampler of its own"


def custom(loader: DataLoader[Any]) -> str | None:
    """What of the loader's sampling is the user's own class (its sampler, else its batch
    sampler), said for a log line; None where both are PyTorch's plain ones."""
    if not isinstance(loader.sampler, (RandomSampler, SequentialSampler)):
        return f"{OWN_SAMPLER} ({type_name(loader.sampler)})"
    batch_sampler = loader.batch_sampler
    if batch_sampler is not None and type(batch_sampler) is not BatchSampler:
        return f"a batch sampler of its own ({type_name(batch_sampler)})"
    return None


def unsplit(loader: Any) -> bool:
    """Whether `loader` is a torch DataLoader over a map-style data set whose sampler and batch
    sampler are PyTorch's plain ones: nothing in it splits the data by rank."""
    if not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
        return False
    return custom(loader) is None
