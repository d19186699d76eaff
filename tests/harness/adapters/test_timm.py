"""The timm adapter: a loader that keeps its DataLoader in `.loader` (PrefetchLoader's shape)
has that DataLoader's settings; the end-to-end rungs of that shape are in
tests/harness/execution/test_given_loader.py (the wrapper serves the sample rungs)."""

from __future__ import annotations

from torch.utils.data import DataLoader

from harness.adapters import registry
from harness.adapters.timm import Timm
from harness.execution.given_loader import batch_size, wrapped_dataloader
from tests.fixtures.loaders import prefetching


def test_a_prefetch_loaders_dataloader_is_the_one_in_its_loader_attribute() -> None:
    loader = prefetching(batch_size=3)
    assert isinstance(Timm().dataloader(loader), DataLoader)
    assert wrapped_dataloader(loader) is loader.loader
    assert batch_size(loader) == 3
    assert registry.owner(loader) is not None and registry.owner(loader).name == "timm"  # type: ignore[union-attr]
    assert Timm().dataloader(loader.loader) is None
    assert Timm().dataloader(object()) is None
