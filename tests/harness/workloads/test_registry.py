from __future__ import annotations

import pytest

from harness.config.plan import WorkloadSettings
from harness.workloads import registry
from harness.workloads.build import WorkloadError, build_dataset, build_model


def settings(**overrides: object) -> WorkloadSettings:
    values: dict[str, object] = dict(
        dataset="fake_cifar",
        dataset_args={"size": 4, "image_size": 8, "resize": None},
        model="linear",
        model_args={},
        batch_size=2,
        device="cpu",
        amp=False,
        compile=False,
    )
    values.update(overrides)
    return WorkloadSettings(**values)  # type: ignore[arg-type]


def test_resolve_registered_and_user_factories() -> None:
    assert registry.resolve("fake_cifar", registry.DATASETS, "dataset").__name__ == "FakeCIFAR"
    factory = registry.resolve("tests.fixtures.workloads:plain_dataset", registry.DATASETS, "dataset")
    assert len(factory(size=5)) == 5


def test_unknown_name_lists_the_choices() -> None:
    with pytest.raises(
        registry.FactoryError, match=r"unknown dataset 'cifar'; expected one of fake_cifar, image_folder"
    ):
        registry.resolve("cifar", registry.DATASETS, "dataset")


def test_a_factory_that_raises_is_named() -> None:
    with pytest.raises(
        WorkloadError,
        match=r"dataset 'tests.fixtures.workloads:broken_dataset' failed to build: ValueError: no such bucket",
    ):
        build_dataset(settings(dataset="tests.fixtures.workloads:broken_dataset", dataset_args={}))


def test_a_model_factory_must_return_a_module() -> None:
    with pytest.raises(WorkloadError, match=r"returned str, not a torch.nn.Module"):
        build_model(settings(model="tests.fixtures.workloads:not_a_model"), num_classes=10)
