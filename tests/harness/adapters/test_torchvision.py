"""The torchvision adapter: its data sets read in the (input, target) form as they are (a
stock ImageFolder, CIFAR10: moved from tests/harness/execution/test_ladder.py with
folder_split and memory_split), and a recipe's preset cut by the `transform:<k>` rungs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harness.adapters import registry
from harness.adapters.torchvision import TorchVision
from harness.execution import sample_cache
from harness.workloads.make_data import make_image_folder
from tests.fixtures import pipelines


def test_a_stock_torchvision_image_folder_gets_every_sample_rung_as_it_is(tmp_path: Path) -> None:
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder

    make_image_folder(tmp_path, images=4, classes=2, size=16)
    steps = [T.CenterCrop(8), T.ToTensor()]
    folder = ImageFolder(str(tmp_path), transform=T.Compose(steps), target_transform=lambda t: t + 10)
    whole = folder[1]
    for rung in ("raw_sample", "raw_bytes", "transform:1"):
        cached = sample_cache.sample_dataset(rung, folder)  # no load_raw from the user
        image, target = cached[3]  # any index serves the cached sample 0, finished afresh
        assert image.shape == whole[0].shape == (3, 8, 8) and target == folder[0][1] == 10
        assert torch.equal(image, folder[0][0])
    assert sample_cache.transform_names(folder) == "CenterCrop,ToTensor"


def test_an_image_folder_with_its_own_getitem_is_not_cut_behind_its_back(tmp_path: Path) -> None:
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder

    class Mine(ImageFolder):
        def __getitem__(self, index: int) -> Any:
            return super().__getitem__(index)

    make_image_folder(tmp_path, images=2, classes=1, size=16)
    with pytest.raises(
        sample_cache.RungUnavailable,
        match=r"rung raw_sample needs a dataset with load_raw.*; tests\.harness\.adapters\.test_torchvision\..*<locals>\.Mine has not",
    ):
        sample_cache.sample_dataset("raw_sample", Mine(str(tmp_path), transform=T.ToTensor()))


def test_a_stock_torchvision_cifar10_gets_every_sample_rung_as_it_is() -> None:
    """CIFAR10 (the course's cifar10.py, the tutorials') holds its images in memory and makes a
    PIL image of each in its own __getitem__, then transforms it: raw_sample caches that PIL
    image and runs the transforms at every item, as a stock ImageFolder is cut. Before, it
    had no sample rung below processed_sample (no load_raw)."""
    cifar = pipelines.cifar10(8)
    assert sample_cache.transform_names(cifar) == "RandomHorizontalFlip,RandomCrop,SleepSample,ToTensor"
    for rung in ("raw_sample", "transform:2"):
        image, target = sample_cache.sample_dataset(rung, cifar)[5]  # the cached sample 0, finished
        assert image.shape == (3, 32, 32) and image.dtype == torch.float32
        assert target == cifar[0][1]
    assert cifar.transform is not None  # the split's copy lost its transform, not the data set
    with pytest.raises(sample_cache.RungUnavailable, match=r"rung raw_bytes needs a file-backed dataset"):
        sample_cache.sample_dataset("raw_bytes", cifar)


def test_a_cifar10_with_its_own_getitem_is_not_cut_behind_its_back() -> None:
    from torchvision.datasets import CIFAR10

    class Mine(CIFAR10):
        def __getitem__(self, index: int) -> Any:
            return super().__getitem__(index)

    mine = pipelines.cifar10(4)
    mine.__class__ = Mine
    with pytest.raises(
        sample_cache.RungUnavailable, match=r"rung raw_sample needs a dataset with load_raw.*Mine has not"
    ):
        sample_cache.sample_dataset("raw_sample", mine)


def test_a_recipes_preset_is_cut_after_each_step_of_the_compose_it_holds(tmp_path: Path) -> None:
    """torchvision's reference recipes hand ImageFolder `presets.ClassificationPresetTrain`,
    whose Compose sits in `.transforms`: the transform:<k> rungs were skipped ("needs a
    transform that is a torchvision Compose; ImageFolder's is presets.ClassificationPresetTrain").
    Its steps are now the Compose's, and each cut serves the preset's sample."""
    from torchvision.datasets import ImageFolder

    from tests.fixtures.recipe.presets import ClassificationPresetTrain

    make_image_folder(tmp_path, images=4, classes=2, size=16)
    preset = ClassificationPresetTrain(crop_size=8)
    folder = ImageFolder(str(tmp_path), transform=preset)
    assert (
        sample_cache.transform_names(folder)
        == "RandomResizedCrop,RandomHorizontalFlip,PILToTensor,ConvertImageDtype"
    )
    for rung in ("raw_sample", "transform:1", "transform:3"):
        image, target = sample_cache.sample_dataset(rung, folder)[2]
        assert image.shape == (3, 8, 8) and image.dtype == torch.float32 and target == folder[0][1]
    with pytest.raises(
        sample_cache.RungUnavailable, match=r"the Compose has 4 transforms, so k must be in 1\.\.3"
    ):
        sample_cache.sample_dataset("transform:4", folder)


def test_only_a_preset_shape_is_looked_into() -> None:
    """A callable of any other module, or a preset whose `.transforms` holds no list of steps,
    is not cut: the rung says the transform is no Compose, as before."""
    import torchvision.transforms as T

    from tests.fixtures.recipe.presets import ClassificationPresetTrain

    preset = ClassificationPresetTrain(crop_size=8)
    assert TorchVision().steps(preset) == preset.transforms.transforms
    assert registry.first(lambda adapter: adapter.steps(preset)) == preset.transforms.transforms

    class Elsewhere:
        transforms = T.Compose([T.ToTensor()])

    assert registry.first(lambda adapter: adapter.steps(Elsewhere())) is None
    broken = ClassificationPresetTrain(crop_size=8)
    broken.transforms = T.ToTensor()  # type: ignore[assignment]
    assert TorchVision().steps(broken) is None


def test_the_registry_reads_a_stock_folder_through_this_adapter(tmp_path: Path) -> None:
    from torchvision.datasets import ImageFolder

    make_image_folder(tmp_path, images=2, classes=1, size=8)
    folder = ImageFolder(str(tmp_path))
    split = registry.first(lambda adapter: adapter.samples(folder))
    assert split is not None and hasattr(split, "read_bytes")
    assert registry.owner(folder) is not None and registry.owner(folder).name == "torchvision"  # type: ignore[union-attr]
    assert TorchVision().samples(pipelines.cifar10(2)) is not None
    assert TorchVision().samples(list(range(3))) is None
