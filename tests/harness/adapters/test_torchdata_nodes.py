"""The torchdata.nodes adapter: its Loader works in threads of the rank's own process."""

from __future__ import annotations

from torch.utils.data import DataLoader

from harness.adapters.torchdata_nodes import TorchdataNodes
from harness.execution.given_loader import in_threads


def test_a_nodes_loader_works_in_threads_and_a_dataloader_does_not() -> None:
    class Loader:
        def __iter__(self) -> object:
            return iter(())

    Loader.__module__ = "torchdata.nodes.loader"
    assert TorchdataNodes().in_threads(Loader()) is True and in_threads(Loader())
    assert TorchdataNodes().in_threads(DataLoader([1])) is None and not in_threads(DataLoader([1]))
