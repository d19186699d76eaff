"""harness/execution/loader_record.py: one record of a loader's settings, whichever way the
loader came: what the script gave, what the loader says of itself, the point's laid over."""

from __future__ import annotations

import dataclasses

import torch
from torch.utils.data import DataLoader, TensorDataset

from harness.execution.loader_record import UNKNOWN, of_attributes, of_values, overlay
from harness_schema.settings import LoaderSettings


def test_what_a_script_gave_is_known_and_the_rest_is_none() -> None:
    given = of_values({"num_workers": 0, "prefetch_factor": None, "batch_size": 8, "shuffle": True})
    assert given.known == {"num_workers", "prefetch_factor", "batch_size"}
    assert given.values() == {"num_workers": 0, "prefetch_factor": None, "batch_size": 8}
    # Unknown: None, whatever LoaderSettings' default (pin_memory False, prefetch_factor 2).
    assert (given.pin_memory, given.drop_last, given.non_blocking) == (None, None, None)
    assert UNKNOWN.known == frozenset() and UNKNOWN.prefetch_factor is None
    # The rows hold the loader settings alone: no batch_size, no `known` column.
    assert dataclasses.asdict(given.loader_settings()) == {
        "num_workers": 0,
        "persistent_workers": None,
        "pin_memory": None,
        "non_blocking": None,
        "prefetch_factor": None,
        "drop_last": None,
    }


class Wrapper:
    """A library's loader around a DataLoader, which says its own pin_memory only."""

    def __init__(self, inner: DataLoader[tuple[torch.Tensor, ...]]) -> None:
        self.loader = inner
        self.pin_memory = True


def test_a_loader_says_its_own_settings_else_its_dataloaders_and_nothing_else() -> None:
    inner = DataLoader(TensorDataset(torch.zeros(4)), batch_size=2, num_workers=0)
    said = of_attributes(Wrapper(inner), ("num_workers", "pin_memory", "prefetch_factor"), inner=inner)
    assert said.values() == {"num_workers": 0, "pin_memory": True, "prefetch_factor": None}
    alone = of_attributes(Wrapper(inner), ("num_workers", "pin_memory"))
    assert alone.known == {"pin_memory"} and alone.num_workers is None


def test_the_points_settings_are_laid_over_where_applied_and_unknown_stays_unknown() -> None:
    point = LoaderSettings(num_workers=4, pin_memory=True, prefetch_factor=3)
    own = of_values({"num_workers": 0, "batch_size": 8})
    ran = overlay(own, point, ("num_workers", "pin_memory"))
    assert ran.values() == {"num_workers": 4, "pin_memory": True, "batch_size": 8}
    assert ran.prefetch_factor is None and "prefetch_factor" not in ran.known
    # Another record laid over: only what it knows.
    first = overlay(
        own, of_values({"num_workers": 2, "drop_last": True}), ("num_workers", "drop_last", "pin_memory")
    )
    assert first.values() == {"num_workers": 2, "drop_last": True, "batch_size": 8}
