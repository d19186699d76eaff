from __future__ import annotations

import inspect
import subprocess
import sys

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


def test_an_attribute_path_after_the_colon_is_walked_and_a_missing_name_is_the_one_named() -> None:
    """`datasets:Dataset.from_dict` is how Hugging Face's factories are named."""
    built = build_dataset(
        settings(dataset="tests.fixtures.workloads:TensorPairs.of_size", dataset_args={"size": 5})
    )
    assert len(built) == 5
    with pytest.raises(
        registry.FactoryError, match=r"^'tests.fixtures.workloads:TensorPairs' has no attribute 'from_dict'$"
    ):
        registry.resolve("tests.fixtures.workloads:TensorPairs.from_dict", registry.DATASETS, "dataset")
    with pytest.raises(registry.FactoryError, match=r"^'tests.fixtures.workloads' has no attribute 'Nope'$"):
        registry.resolve("tests.fixtures.workloads:Nope.of_size", registry.DATASETS, "dataset")


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


@pytest.mark.parametrize("name", [*registry.DATASETS, *registry.MODELS])
def test_the_builtins_accepted_arguments_are_their_real_signatures(name: str) -> None:
    """The data that lets a spec be checked without importing torch, against the code itself."""
    table = registry.DATASETS if name in registry.DATASETS else registry.MODELS
    factory = registry.resolve(name, table, "x")
    real = inspect.signature(factory)

    def shape(signature: inspect.Signature) -> list[tuple[str, object, bool]]:
        return [(p.name, p.kind, p.default is not p.empty) for p in signature.parameters.values()]

    assert shape(registry.builtin_signature(name)) == shape(real), (
        f"update registry.BUILTIN_PARAMETERS[{name!r}] to {name}'s signature: {real}"
    )
    if table is registry.DATASETS:
        assert (name in registry.UINT8_DATASETS) == hasattr(factory, "to_uint8")
        file_backed = hasattr(factory, "read_bytes") and hasattr(factory, "decode")
        assert (name in registry.BYTES_DATASETS) == file_backed


def test_a_builtin_is_checked_with_the_words_of_its_real_signature() -> None:
    with pytest.raises(
        registry.FactoryError,
        match=r"got an unexpected keyword argument 'widht'; accepted: num_classes, width, depth",
    ):
        registry.check_builtin("toy_conv", registry.MODELS, "model", {"num_classes": 10, "widht": 3})
    with pytest.raises(registry.FactoryError, match=r"missing a required argument: 'root'"):
        registry.check_builtin("image_folder", registry.DATASETS, "dataset", {})


VALIDATE_IMPORTS = """
import sys
from harness.config.plan import expand
from harness.config.spec import parse_spec
spec = parse_spec('''
name: t
workload:
  dataset: [fake_cifar, starved]
  dataset_args: {size: 4}
  model: [resnet50, toy_conv, emulated]
  gpu_normalize: false
''')
expand(spec)
print(sorted(m for m in ("torch", "torchvision", "pandas") if m in sys.modules))
"""


def test_a_spec_of_builtins_is_validated_without_importing_torch() -> None:
    out = subprocess.run(
        [sys.executable, "-c", VALIDATE_IMPORTS], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
