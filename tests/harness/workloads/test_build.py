from __future__ import annotations

import pytest
import torch
from torch.utils.data import IterableDataset

from harness.config.plan import WorkloadSettings
from harness.workloads.build import (
    WorkloadError,
    build_callable,
    build_dataset,
    build_model,
    pipeline_factory,
)

P = "tests.fixtures.pipelines"


def settings(**overrides: object) -> WorkloadSettings:
    values: dict[str, object] = {"dataset": f"{P}:tokens", "model": f"{P}:tiny_lm", "device": "cpu"}
    values.update(overrides)
    return WorkloadSettings(**values)  # type: ignore[arg-type]


def test_a_stream_is_a_dataset_and_a_generator_is_not() -> None:
    assert isinstance(build_dataset(settings(dataset=f"{P}:token_stream")), IterableDataset)
    with pytest.raises(
        WorkloadError,
        match=rf"dataset '{P}:not_a_dataset' returned generator, which is neither map-style "
        r"\(__getitem__ and __len__\) nor a torch.utils.data.IterableDataset",
    ):
        build_dataset(settings(dataset=f"{P}:not_a_dataset"))


def test_num_classes_goes_only_to_a_model_factory_that_takes_it() -> None:
    assert build_model(settings(), num_classes=7).head.out_features == 2  # tiny_lm: none asked
    linear = build_model(settings(model="linear"), num_classes=7)
    assert list(linear.parameters())[-1].shape == (7,)


def test_a_factory_gets_its_args_and_what_it_makes_must_be_callable() -> None:
    collate = build_callable(settings(collate=f"{P}:pad_collate", collate_args={"pad": -1}), "collate", "c")
    batch = collate(
        [
            {"input_ids": torch.arange(2), "label": torch.tensor(0)},
            {"input_ids": torch.arange(3), "label": torch.tensor(1)},
        ]
    )
    assert batch["input_ids"][0].tolist() == [0, 1, -1]
    assert build_callable(settings(), "collate", "c") is None and pipeline_factory(settings(), "loss") is None
    with pytest.raises(WorkloadError, match=rf"collate '{P}:count_labels' failed to build: TypeError"):
        build_callable(settings(collate=f"{P}:count_labels"), "collate", "collate_fn(list of samples)")
    with pytest.raises(
        WorkloadError,
        match=rf"loss '{P}:plain_stream' returned tests\.fixtures\.pipelines\.PlainStream, not a callable loss_fn\(output, batch\)",
    ):
        build_callable(settings(loss=f"{P}:plain_stream"), "loss", "loss_fn(output, batch)")


def test_a_dataset_factory_naming_batch_size_rank_or_world_size_gets_the_points() -> None:
    # MosaicML's StreamingDataset takes batch_size: it was given twice by hand (issue 27).
    place = {"batch_size": 8, "rank": 1, "world_size": 2}
    built = build_dataset(settings(dataset="tests.fixtures.loaders:sized", dataset_args={"size": 5}), place)
    assert built.asked == {"batch_size": 8, "rank": 1, "world_size": 2} and len(built) == 5  # type: ignore[attr-defined]
    # A factory that does not name them gets none of them.
    assert len(build_dataset(settings(dataset="tests.fixtures.loaders:squares"), place)) == 40  # type: ignore[arg-type]
