"""The rungs a spec's dataset cannot serve, said by `harness plan` before anything runs.

At run time a sample-level rung the dataset cannot serve gives a skipped row saying why
(harness/execution/sample_cache.py: the stage split of harness/workloads/contract.py). Most of what
decides it is a method of the dataset's class (load_raw, iter_raw, read_bytes, decode), so
where the spec names a built-in (known here as data, torch-free) or a dataset class (already
imported to check its arguments), the plan can say the same before anything runs. A factory
function's dataset is only known once built: nothing is said for it, and its rows say why.
Only absences are concluded: `transform` and `transform_sample` are often set per instance in
__init__, so the class cannot tell that they are missing.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

from harness.workloads import registry
from harness_schema import rungs as rung_names

_SPLIT = (
    "needs a dataset with load_raw(index) and transform, or load_raw(index) and "
    "transform_sample(raw) (see docs/guides/own-workload.md)"
)
_STREAM_SPLIT = "needs a stream with iter_raw() and transform_sample(raw) (see docs/guides/own-workload.md)"
_BYTES = "needs a file-backed dataset with read_bytes(index) and decode(bytes), map-style"


@dataclass(frozen=True, slots=True)
class _Methods:
    """What the dataset's class tells about the stage split."""

    stream: bool
    split: bool
    """load_raw (map-style) or iter_raw (a stream): False only where the class has none."""
    file_backed: bool


def skipped_rungs(dataset: str, rungs: Sequence[str]) -> list[tuple[str, str]]:
    """(rung, why) for each of `rungs` that the dataset named `dataset` will not serve."""
    methods = _methods(dataset)
    if methods is None:
        return []
    skipped = []
    for rung in rungs:
        why = _why(rung, methods)
        if why is not None:
            skipped.append((rung, f"{dataset} {why}"))
    return skipped


def _why(rung: str, methods: _Methods) -> str | None:
    split_rung = rung == "raw_sample" or rung_names.transform_cut(rung) is not None
    if split_rung or rung == "raw_bytes":
        if methods.stream and not methods.split:
            return f"is a stream without iter_raw(): rung {rung} {_STREAM_SPLIT}"
        if not methods.split:
            return f"has no load_raw(index): rung {rung} {_SPLIT}"
    if rung == "raw_bytes" and methods.stream:
        return f"is a stream: rung raw_bytes {_BYTES}"
    if rung == "raw_bytes" and not methods.file_backed:
        return f"has no read_bytes(index) and decode(bytes): rung raw_bytes {_BYTES}"
    return None


def _methods(dataset: str) -> _Methods | None:
    if dataset in registry.DATASETS:  # the built-ins are map-style, each with load_raw
        return _Methods(stream=False, split=True, file_backed=dataset in registry.BYTES_DATASETS)
    try:
        factory = registry.resolve(dataset, registry.DATASETS, "dataset")
    except registry.FactoryError:
        return None  # the spec check has said so already
    if not inspect.isclass(factory) or _from(factory, "torchvision.datasets", "DatasetFolder"):
        return None  # a function's dataset, or a stock image folder (split by the ladder itself)
    stream = _from(factory, "torch.utils.data", "IterableDataset")
    split = hasattr(factory, "iter_raw" if stream else "load_raw")
    file_backed = hasattr(factory, "read_bytes") and hasattr(factory, "decode")
    return _Methods(stream=stream, split=split, file_backed=file_backed)


def _from(cls: type, package: str, name: str) -> bool:
    """`cls` derives from `package`'s class `name`: told from its bases' names, no import."""
    return any(base.__name__ == name and base.__module__.startswith(package) for base in cls.__mro__)


def plan_notes(datasets: Sequence[str | None], rungs: Sequence[str]) -> list[str]:
    """One line per rung and dataset that will be skipped: `rung raw_sample will be skipped: ...`."""
    return [
        f"rung {rung} will be skipped: {why}"
        for dataset in datasets
        if dataset is not None
        for rung, why in skipped_rungs(dataset, rungs)
    ]
