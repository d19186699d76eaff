"""Hugging Face datasets: a `datasets.Dataset` whose format is a transform of the user's
(`with_transform(f)`/`set_transform(f)`, on every column) is read in the whole-sample form:
its row as Python values (the Arrow read and the features' decoding: an `Image` column's PIL
image) is the raw sample, and the transform, on that row as a batch of one, is
`transform_sample`, as the formatter calls it. Told without importing `datasets`: by the
format it carries."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.adapters.base import NoAnswer, module_of

if TYPE_CHECKING:
    from harness.workloads.contract import WholeSampleDataset


class HFDatasets(NoAnswer):
    name = "datasets"

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) == "datasets"

    def samples(self, dataset: Any) -> WholeSampleDataset | None:
        return hf_split(dataset)


def hf_split(dataset: Any) -> WholeSampleDataset | None:
    """A `datasets.Dataset` formatted by a transform of the user's, in the whole-sample form;
    None for any other dataset, and where the transform is given columns (the format then
    mixes formatted and plain columns)."""
    if hasattr(dataset, "load_raw") or not callable(getattr(dataset, "with_format", None)):
        return None
    if (
        getattr(dataset, "_format_type", None) != "custom"
        or getattr(dataset, "_format_columns", 0) is not None
    ):
        return None
    transform = getattr(dataset, "_format_kwargs", {}).get("transform")
    return _HFTransformed(dataset, transform) if callable(transform) else None


class _HFTransformed:
    """`Dataset.__getitem__` under a custom format, split: the row the Python formatter gives
    (`with_format(None)`), then the transform on it as a batch of one, its first row taken
    (datasets' CustomFormatter.format_row)."""

    def __init__(self, dataset: Any, transform: Callable[[dict[str, list[Any]]], Any]) -> None:
        self.plain = dataset.with_format(None)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.plain)

    def load_raw(self, index: int) -> Any:
        return self.plain[index]

    def transform_sample(self, raw: dict[str, Any]) -> dict[str, Any]:
        batch = self.transform({key: [value] for key, value in raw.items()})
        return {key: values[0] for key, values in batch.items()}
