"""Batches of any structure: the copy to the device, and the samples a batch holds.

A batch is what the DataLoader's collate function returns: a tensor, or a tuple, list, dict,
named tuple or dataclass of them, nested (a padded text batch is a dict of `input_ids`,
`attention_mask`, `labels`; a detection batch a tuple of images and a list of target dicts).
PyTorch's own DataLoader walks the same structures when it pins memory
(`torch.utils.data._utils.pin_memory.pin_memory`, which also calls a user batch type's
`pin_memory()`); the copy here walks them the same way, so that `loading_time` covers the copy
of every tensor a step will use, with the point's `non_blocking`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

from harness.naming import type_name


class BatchError(ValueError):
    """A batch the harness cannot count or copy; the message says what to give instead."""


def to_device(
    batch: Any,
    device: torch.device,
    *,
    non_blocking: bool = False,
    memory_format: torch.memory_format | None = None,
) -> Any:
    """`batch` with every tensor in it on `device`; every other leaf (strings, ids) as is.

    A user type with its own `to(device, ...)` (a tokenizer's BatchEncoding, a custom batch
    class) moves itself, as it would in the user's own loop. `memory_format` is given to the
    copy of every tensor it applies to (`torch.channels_last`: the 4-D ones, the images; a
    course copies `images.to(gpu, memory_format=torch.channels_last)` as part of loading)."""

    def move(item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            if memory_format is not None and _FORMAT_RANK.get(memory_format, item.dim()) == item.dim():
                return item.to(device, non_blocking=non_blocking, memory_format=memory_format)
            return item.to(device, non_blocking=non_blocking)
        if isinstance(item, (str, bytes)):
            return item
        if isinstance(item, Mapping):
            moved = {k: move(v) for k, v in item.items()}
            try:
                return type(item)(moved)  # type: ignore[call-arg]
            except TypeError:  # a mapping type that cannot be built from a dict
                return moved
        if isinstance(item, tuple) and hasattr(item, "_fields"):  # a named tuple
            return type(item)(*(move(v) for v in item))
        if isinstance(item, (tuple, list)):
            return type(item)(move(v) for v in item)
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            changes = {f.name: move(getattr(item, f.name)) for f in dataclasses.fields(item) if f.init}
            return dataclasses.replace(item, **changes)
        own_to = getattr(item, "to", None)
        if callable(own_to):
            try:
                return own_to(device, non_blocking=non_blocking)
            except TypeError:  # a `to` without non_blocking
                return own_to(device)
        return item

    return move(batch)


_FORMAT_RANK = {torch.channels_last: 4, torch.channels_last_3d: 5}
"""The tensors a memory format applies to (PyTorch refuses channels_last on other ranks)."""


def leaves(batch: Any, path: str = "batch") -> list[tuple[str, torch.Tensor]]:
    """Every tensor in `batch`, with the path a user would write to reach it (batch['x'][0])."""
    if isinstance(batch, torch.Tensor):
        return [(path, batch)]
    if isinstance(batch, (str, bytes)):
        return []
    if isinstance(batch, Mapping):
        return [leaf for k, v in batch.items() for leaf in leaves(v, f"{path}[{k!r}]")]
    if isinstance(batch, (tuple, list)):
        return [leaf for i, v in enumerate(batch) for leaf in leaves(v, f"{path}[{i}]")]
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        fields = dataclasses.fields(batch)
        return [leaf for f in fields for leaf in leaves(getattr(batch, f.name), f"{path}.{f.name}")]
    return []


def _per_sample_lists(batch: Any, path: str) -> list[tuple[str, int]]:
    """The lists (or tuples) of dicts in `batch`, with their paths and lengths: a dict per
    sample. Only containers are walked, not the dicts' own values (a sample's fields)."""
    if isinstance(batch, (tuple, list)):
        if batch and all(isinstance(v, Mapping) for v in batch):
            return [(path, len(batch))]
        return [found for i, v in enumerate(batch) for found in _per_sample_lists(v, f"{path}[{i}]")]
    if isinstance(batch, Mapping):
        return [found for k, v in batch.items() for found in _per_sample_lists(v, f"{path}[{k!r}]")]
    return []


def _tensors(batch: Any) -> list[torch.Tensor]:
    """Every tensor in `batch` (as `leaves`, without the paths)."""
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, (tuple, list)):
        return [t for v in batch for t in _tensors(v)]
    if isinstance(batch, Mapping):
        return [t for v in batch.values() for t in _tensors(v)]
    if isinstance(batch, (str, bytes)) or not dataclasses.is_dataclass(batch) or isinstance(batch, type):
        return []
    return [t for f in dataclasses.fields(batch) for t in _tensors(getattr(batch, f.name))]


def count_samples(batch: Any) -> int:
    """Samples in a batch: the leading dimension its tensors share.

    So a partial last batch counts what it holds, and a padded one counts sequences, not
    tokens. Where the tensors disagree (a detection batch: images of B, boxes of N per
    image), the count is ambiguous and the user says how to count (`workload.batch_samples`).
    """
    # A list of per-sample dicts (torchvision detection's targets, after its reference collate
    # `tuple(zip(*batch))`) is the batch's own count: a dict per sample. Its tensors' first
    # dimension (3 boxes) is not, nor are its sibling images' (3 channels). PyTorch's
    # default_collate never leaves a list of dicts (it makes one dict of stacked values).
    per_sample = _per_sample_lists(batch, "batch")
    if per_sample:
        lengths = {n for _, n in per_sample}
        if len(lengths) == 1:
            return lengths.pop()
        shown = ", ".join(f"{path}: {n}" for path, n in per_sample[:4])
        raise BatchError(
            f"the batch's lists of per-sample dicts disagree on the number of samples ({shown}); "
            'give workload.batch_samples: "package.module:function" (a batch in, its number of '
            "samples out)"
        )
    # Once per step, in the loop: the leading dimensions first, without the paths (building
    # them cost ~30 us a batch on a 2-core machine); the paths only for an error message.
    firsts = {t.shape[0] for t in _tensors(batch) if t.dim() >= 1}
    if len(firsts) == 1:
        return int(firsts.pop())
    sized = [(path, t) for path, t in leaves(batch) if t.dim() >= 1]
    if not sized:
        raise BatchError(
            "cannot count the samples of a batch with no tensor of at least one dimension "
            f'({type_name(batch)}); give workload.batch_samples: "package.module:function" '
            "(a batch in, its number of samples out)"
        )
    firsts = {t.shape[0] for _, t in sized}
    if len(firsts) > 1:
        shown = ", ".join(f"{path}: {t.shape[0]}" for path, t in sized[:4])
        raise BatchError(
            f"the batch's tensors disagree on the number of samples ({shown}); give "
            'workload.batch_samples: "package.module:function" (a batch in, its number of '
            "samples out)"
        )
    return int(firsts.pop())


SampleCounter = Callable[[Any], int]


def nbytes(value: Any) -> int | None:
    """Bytes a sample (or any cached value) holds in memory: tensors and arrays by their data,
    bytes by their length, PIL images by their pixels, containers summed. None where any part
    is of a type whose size cannot be told (the caching what-if then says nothing)."""
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.numel()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, (int, float, bool, str)) or value is None:
        return 8 if not isinstance(value, str) else len(value)
    array_bytes = getattr(value, "nbytes", None)  # numpy arrays
    if isinstance(array_bytes, int):
        return array_bytes
    if hasattr(value, "getbands") and hasattr(value, "size"):  # a PIL image, decoded
        width, height = value.size
        return int(width * height * len(value.getbands()))
    if isinstance(value, Mapping):
        parts = [nbytes(v) for v in value.values()]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = [nbytes(getattr(value, f.name)) for f in dataclasses.fields(value)]
    elif isinstance(value, (tuple, list)):
        parts = [nbytes(v) for v in value]
    else:
        return None
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
