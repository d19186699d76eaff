"""The loader factory's calling convention (harness/workloads/loader_factory.py)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.workloads import loader_factory
from harness.workloads.build import WorkloadError
from tests.fixtures import loaders


def test_the_harness_passes_only_what_the_factory_accepts() -> None:
    assert loader_factory.passed(loaders.dataloader) == (
        "batch_size",
        "num_workers",
        "prefetch_factor",
        "drop_last",
    )
    assert loader_factory.untaken(loaders.dataloader) == ("persistent_workers", "pin_memory")
    assert loader_factory.passed(loaders.fixed_workers, with_dataset=True) == ("batch_size", "dataset")
    # **kwargs takes everything: nothing is left to the loader.
    assert loader_factory.untaken(loaders.datamodule) == ()
    made = loader_factory.call(
        loaders.dataloader,
        "f",
        {"size": 8},
        {
            "batch_size": 4,
            "num_workers": 0,
            "prefetch_factor": None,
            "drop_last": True,
            "pin_memory": True,
            "rank": 0,
        },
    )
    assert (made.batch_size, made.drop_last, made.pin_memory, len(made)) == (4, True, False, 2)


def test_a_datamodule_is_set_up_for_fit_before_its_train_dataloader() -> None:
    loader = loader_factory.train_loader(loaders.Module(batch_size=2))
    assert len(loader) == 5


def test_what_is_no_loader_is_named() -> None:
    with pytest.raises(WorkloadError, match=r"loader 'f' failed to build: TypeError: .*'root'"):
        loader_factory.call(loaders.needs, "f", {}, {"batch_size": 2})

    class Module:
        def train_dataloader(self) -> Any:
            return 3

    with pytest.raises(
        WorkloadError, match=r"Module.train_dataloader\(\) returned int, which is not iterable"
    ):
        loader_factory.train_loader(Module())


def test_a_loader_that_can_be_read_once_is_refused_with_what_to_give_instead() -> None:
    # A generator (a loop's progress logger wrapped around the loader) or Python's own iterator
    # is spent after one pass: the rungs and epochs after the first would read nothing.
    def log_every(loader: Any) -> Any:
        yield from loader

    for once, name in (
        (log_every([1, 2]), "generator"),
        (iter([1, 2]), "list_iterator"),
        (map(int, "12"), "map"),
    ):
        with pytest.raises(
            WorkloadError,
            match=rf"the loader is a {name}, an iterator that can be read once: the harness reads the "
            r"loader again at every rung and epoch .*give the loader itself",
        ):
            loader_factory.train_loader(once)

    class Restarting:  # DALI's iterators are their own iterators and start a new pass at the end
        def __iter__(self) -> Restarting:
            return self

        def __next__(self) -> int:
            raise StopIteration

    restarting = Restarting()
    assert loader_factory.train_loader(restarting) is restarting


def _datamodule_annotated(*, batch_size: int) -> loaders.Module:
    return loaders.Module(batch_size)


def _with_rank(*, batch_size: int, rank: int, world_size: int) -> Any:
    return [batch_size, rank, world_size]


@pytest.mark.parametrize(
    ("factory", "ranks", "said"),
    [
        (loaders.dataloader, 4, True),  # a plain DataLoader: each of the 4 ranks would read it whole
        (loaders.dataloader, 1, False),  # one rank: the whole data set is its share
        (_with_rank, 4, False),  # it is given the rank's place to split by
        (loaders.datamodule, 4, False),  # **kwargs: given rank and world_size too
        (_datamodule_annotated, 4, False),  # a DataModule: the harness re-makes its loader
        (loaders.Module, 4, False),  # the DataModule's class itself
    ],
    ids=["plain", "one-rank", "takes-rank", "kwargs", "returns-datamodule", "datamodule-class"],
)
def test_the_plan_says_when_a_factory_cannot_split_the_data_between_ranks(
    factory: Any, ranks: int, said: bool
) -> None:
    note = loader_factory.ranks_note("f", factory, ranks)
    if not said:
        assert note is None
        return
    assert note == (
        "f takes neither rank nor world_size, and the spec runs 4 ranks (slurm.nodes × "
        "slurm.tasks_per_node, on Slurm and with --backend local; an inline run has one): unless its loader splits the data by rank itself (a DistributedSampler "
        "over the process group, a stream sharded by node), each rank reads the whole data set, an "
        "epoch 4 times the training's; accept rank and world_size and split by them, or return a "
        "DataModule, whose loader the harness re-makes with a DistributedSampler as Lightning's "
        "Trainer does"
    )
