"""The Hugging Face datasets adapter: a `datasets.Dataset` formatted by a transform of the
user's is read in the whole-sample form as it is (moved from tests/harness/examples/test_hf_text.py
with hf_split)."""

from __future__ import annotations

import pytest
import torch

datasets = pytest.importorskip("datasets", reason="the optional extra `libs` (datasets) is not installed")

from harness.examples.hf_text import make_bare  # noqa: E402


def test_a_bare_dataset_with_transform_is_split_at_its_transform() -> None:
    # No class of the harness's around it: the row is the raw sample, the transform on it as a
    # batch of one is the processed sample, as datasets' own formatter gives it.
    from harness.adapters.hf_datasets import hf_split
    from harness.workloads.contract import WholeSampleDataset

    bare = make_bare(size=16)
    split = hf_split(bare)
    assert isinstance(split, WholeSampleDataset) and len(split) == 16
    raw = split.load_raw(3)
    assert set(raw) == {"text"} and isinstance(raw["text"], str)
    assert torch.equal(split.transform_sample(raw)["input_ids"], bare[3]["input_ids"])
    assert hf_split(bare.with_format(None)) is None  # no transform: nothing to split
    assert hf_split(bare.with_format("torch")) is None


def test_the_registry_asks_it_for_a_bare_dataset_and_nothing_else() -> None:
    from harness.adapters import registry

    bare = make_bare(size=4)
    assert registry.first(lambda adapter: adapter.samples(bare)) is not None
    assert registry.owner(bare) is not None and registry.owner(bare).name == "datasets"  # type: ignore[union-attr]
    assert registry.first(lambda adapter: adapter.samples([1, 2, 3])) is None
