"""A DataModule's loader on several ranks, as Lightning's Trainer hands it to training
(harness/adapters/lightning.py): re-made with a DistributedSampler where its sampler is
plain, the same indices as the Trainer's own sampler; kept, and said, where it is not."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    WeightedRandomSampler,
)

from harness.adapters import lightning as trainer_sampler
from harness.adapters.lightning import as_trainer, remade, request

DATA = list(range(20))


def _collate(batch: list[int]) -> torch.Tensor:
    return torch.tensor(batch) * 10


def _shares(loaders: list[DataLoader[Any]]) -> list[list[int]]:
    return [list(loader.sampler) for loader in loaders]


def test_a_plain_loader_on_two_ranks_is_remade_with_the_trainers_sampler_its_settings_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=trainer_sampler.__name__)
    made = [
        as_trainer(
            DataLoader(DATA, batch_size=3, shuffle=False, drop_last=True, collate_fn=_collate),
            rank=rank,
            world_size=2,
            seed=7,
        )
        for rank in (0, 1)
    ]
    for rank, loader in enumerate(made):
        sampler = loader.sampler
        assert isinstance(sampler, DistributedSampler) and remade(loader)
        # shuffled whatever the loader said: the Trainer passes shuffle=True in training
        assert (sampler.rank, sampler.num_replicas, sampler.shuffle, sampler.seed) == (rank, 2, True, 7)
        assert (loader.batch_size, loader.drop_last, loader.collate_fn) == (3, True, _collate)
        assert len(loader) == 3  # 10 samples a rank, 3 whole batches of 3
    first, second = _shares(made)
    assert sorted(first + second) == DATA and first != sorted(first)  # disjoint halves, shuffled
    assert "re-made with a DistributedSampler (rank 1 of 2, shuffled, seed 7)" in caplog.text
    for loader in made:
        loader.sampler.set_epoch(1)
    again, other = _shares(made)
    assert [again, other] != [first, second] and sorted(again + other) == DATA


def test_its_indices_are_those_of_the_trainers_own_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known truth: the function Lightning's Trainer calls (data_connector._get_distributed_sampler,
    training: shuffle=True, seed PL_GLOBAL_SEED) gives each rank the same indices."""
    pytest.importorskip("lightning", reason="the optional extra `libs` (lightning) is not installed")
    from lightning.pytorch.trainer.connectors.data_connector import _get_distributed_sampler

    monkeypatch.setenv("PL_GLOBAL_SEED", "3")
    for sampler_of in (SequentialSampler, RandomSampler):
        loader = DataLoader(DATA, batch_size=4, sampler=sampler_of(DATA))
        for rank in (0, 1):
            truth = _get_distributed_sampler(
                loader, shuffle=True, overfit_batches=0, num_replicas=2, rank=rank
            )
            ours = as_trainer(loader, rank=rank, world_size=2, seed=3).sampler
            assert list(ours) == list(truth)


class _Stream(IterableDataset[int]):
    def __iter__(self) -> Iterator[int]:
        return iter(DATA)


class _OwnBatches(BatchSampler):
    pass


@pytest.mark.parametrize(
    ("loader", "said"),
    [
        (DataLoader(DATA, sampler=DistributedSampler(DATA, num_replicas=2, rank=0)), "has its own "),
        (
            DataLoader(DATA, batch_sampler=_OwnBatches(SequentialSampler(DATA), 4, False)),
            "has a batch sampler of its own (tests.harness.adapters.test_lightning._OwnBatches)",
        ),
        (DataLoader(_Stream(), batch_size=4), None),
    ],
    ids=["distributed", "custom-batch-sampler", "stream"],
)
def test_a_loader_whose_sampler_is_not_plain_is_kept_and_said(
    loader: DataLoader[Any], said: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=trainer_sampler.__name__)
    assert as_trainer(loader, rank=0, world_size=2, seed=0) is loader and not remade(loader)
    if said is None:
        assert caplog.text == ""
    else:
        assert said in caplog.text


class _Reversed(Sampler[int]):
    """A sampler of the user's own class: every index, last first, and the epochs it was told."""

    def __init__(self, size: int) -> None:
        self.size, self.epochs = size, list[int]()

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.size - 1, -1, -1))

    def __len__(self) -> int:
        return self.size

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


def test_a_sampler_of_its_own_on_two_ranks_is_wrapped_as_the_trainer_wraps_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Known truth: the Trainer's own call (data_connector._get_distributed_sampler) wraps a
    sampler of the user's class in a DistributedSamplerWrapper; each of 2 ranks reads the same
    share as under the Trainer, disjoint, every index once (the old harness kept the loader:
    each rank read all 20), and the log and the rows' loader_given say so."""
    pytest.importorskip("lightning", reason="the optional extra `libs` (lightning) is not installed")
    from lightning.pytorch.trainer.connectors.data_connector import _get_distributed_sampler

    from harness.execution.given_loader import loader_given

    monkeypatch.setenv("PL_GLOBAL_SEED", "3")
    caplog.set_level(logging.INFO, logger=trainer_sampler.__name__)
    own = _Reversed(len(DATA))
    loader = DataLoader(DATA, batch_size=4, sampler=own, collate_fn=_collate)
    made = [as_trainer(loader, rank=rank, world_size=2, seed=3) for rank in (0, 1)]
    for rank, ours in enumerate(made):
        truth = _get_distributed_sampler(loader, shuffle=True, overfit_batches=0, num_replicas=2, rank=rank)
        assert type(ours.sampler) is type(truth) and type(truth).__name__ == "DistributedSamplerWrapper"
        assert list(ours.sampler) == list(truth) and remade(ours)
        assert (ours.batch_size, ours.collate_fn, len(ours)) == (4, _collate, 3)  # 10 a rank
    first, second = _shares(made)
    assert sorted(first + second) == DATA
    made[0].sampler.set_epoch(1)
    assert own.epochs[-1] == 1  # the wrapper tells the user's sampler the epoch
    assert (
        "had a sampler of its own (tests.harness.adapters.test_lightning._Reversed): re-made "
        "with a DistributedSamplerWrapper (rank 1 of 2, shuffled, seed 3) as Lightning's Trainer does "
        "on several ranks (use_distributed_sampler=True); a sampler that splits by rank already (for "
        "use_distributed_sampler=False) is now split twice: make it a DistributedSampler subclass, "
        "which is kept"
    ) in caplog.text
    assert loader_given(made[1]) == (
        "torch.utils.data.dataloader.DataLoader, re-made with a DistributedSamplerWrapper over 2 ranks "
        "as Lightning's Trainer does"
    )


def test_without_lightning_a_sampler_of_its_own_is_kept_and_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(trainer_sampler, "_lightning_data", lambda: None)
    monkeypatch.setattr(trainer_sampler, "_wrapper", lambda: None)
    loader = DataLoader(DATA, sampler=WeightedRandomSampler([1.0] * 20, 20))
    assert as_trainer(loader, rank=0, world_size=2, seed=0) is loader and not remade(loader)
    assert (
        "kept as given on 2 ranks: without lightning installed only a plain DataLoader can be re-made "
        "with a DistributedSampler (a sampler of its own (torch.utils.data.sampler.WeightedRandomSampler): "
        "Lightning's DistributedSamplerWrapper would split it); every rank reads the whole data set"
    ) in caplog.text


def test_one_rank_keeps_the_loader() -> None:
    loader = DataLoader(DATA, batch_size=4, shuffle=True)
    assert as_trainer(loader, rank=0, world_size=1, seed=0) is loader


class SizedLoader(DataLoader[Any]):
    """A DataLoader subclass whose constructor is its own (`size` is no attribute)."""

    def __init__(self, size: int, **kwargs: Any) -> None:
        super().__init__(list(range(size)), **kwargs)


def test_a_subclass_made_in_train_dataloader_is_remade_with_its_own_arguments() -> None:
    """request() records the constructor's arguments, as the Trainer does around the hook:
    the subclass is re-made as itself, with its `size`."""
    pytest.importorskip("lightning", reason="the optional extra `libs` (lightning) is not installed")
    loader = request(lambda: SizedLoader(12, batch_size=2, shuffle=True), world_size=2)
    made = as_trainer(loader, rank=1, world_size=2, seed=0)
    assert type(made) is SizedLoader and isinstance(made.sampler, DistributedSampler) and len(made) == 3


def test_without_lightning_a_plain_loader_is_rebuilt_and_a_subclass_kept(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    plain = DataLoader(DATA, batch_size=3, shuffle=True, drop_last=True, collate_fn=_collate)
    with_lightning = as_trainer(plain, rank=1, world_size=2, seed=5)  # the fallback where absent
    monkeypatch.setattr(trainer_sampler, "_lightning_data", lambda: None)
    made = as_trainer(plain, rank=1, world_size=2, seed=5)
    assert type(made) is DataLoader and isinstance(made.sampler, DistributedSampler) and remade(made)
    assert (made.batch_size, made.drop_last, made.collate_fn, made.sampler.rank) == (3, True, _collate, 1)
    assert list(made.sampler) == list(with_lightning.sampler) and len(made) == len(with_lightning)
    own = SizedLoader(12, batch_size=2)
    assert as_trainer(own, rank=0, world_size=2, seed=0) is own
    assert "without lightning installed only a plain DataLoader can be re-made" in caplog.text
