"""Lightning: a DataModule opened as its Trainer opens it, and its training loader on several
ranks as the Trainer hands it to training.

A `workload.loader` factory (or a script's probe.measure) may give a DataModule: an object
that is not iterable but has `train_dataloader()`. It is asked for that loader after its
`prepare_data()` and `setup("fit")`, as Lightning's Trainer calls them.

The harness calls a DataModule's `train_dataloader()` without a Trainer. Lightning's Trainer
(`use_distributed_sampler=True`, its default), on more than one rank, does not use that
DataLoader as it is: it re-makes it with a DistributedSampler (lightning 2.6,
`lightning.pytorch.trainer.connectors.data_connector`: `_requires_distributed_sampler`,
`_get_distributed_sampler`, `_update_dataloader`; `fit_loop` calls `_set_sampler_epoch`). So a
DataModule written as Lightning's documentation writes one (a plain `shuffle=True` loader, no
sampler of its own) would, kept as it is, have every rank read the whole training set: an
epoch `world_size` times longer than in the user's training, and each sample read on every
rank. Here the harness does what the Trainer does:

- only a torch DataLoader over a map-style dataset whose sampler is not a DistributedSampler
  already (an IterableDataset shards itself: the Trainer leaves it, so do we);
- a RandomSampler or SequentialSampler (a plain loader's, `shuffle=True` or not) becomes
  `DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)`:
  the Trainer shuffles the training loader whatever it said (`_process_dataloader` passes
  `shuffle=True` for the training stage), pads the last share to an even split (the sampler's
  `drop_last=False`), and keeps the loader's batch size, `drop_last`, workers and collate_fn;
  its seed is `PL_GLOBAL_SEED` (seed_everything's, else 0), ours is the point's, the same on
  every rank as a DistributedSampler needs;
- a sampler of the user's own class is wrapped, as the Trainer wraps it, in Lightning's
  `DistributedSamplerWrapper` (`lightning.fabric.utilities.distributed`): each rank reads its
  share of what that sampler yields. The log says so, and that a sampler already splitting by
  rank (written for `use_distributed_sampler=False`, which the harness cannot see) is now split
  twice: a DistributedSampler subclass is kept, as the Trainer keeps it. Without lightning the
  loader is kept as given, said in the log;
- each epoch the sampler is told its number (`set_epoch`, loader_stream.LoaderStream does it; the
  wrapper passes it on to the user's sampler).

Where the Trainer would go further, the harness keeps the loader as given and says so in the
log: a batch sampler of the user's own class (the Trainer injects the DistributedSampler into
it, re-making the batch sampler from its recorded arguments).

A loader a factory returns itself (not from a DataModule) is never re-made: nothing says a
Trainer will handle it (torchrun with plain DDP keeps the loader as it is), and the factory is
given `rank` and `world_size` to shard by.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import typing
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from harness.adapters.base import NoAnswer, NotALoader, module_of, note
from harness.naming import type_name

if TYPE_CHECKING:
    from torch.utils.data import DataLoader, DistributedSampler

log = logging.getLogger(__name__)

_REMADE: weakref.WeakSet[DataLoader[Any]] = weakref.WeakSet()
"""The loaders this module re-made, for their rows' `loader_given` (remade())."""

_TWICE = (
    "; a sampler that splits by rank already (for use_distributed_sampler=False) is now split "
    "twice: make it a DistributedSampler subclass, which is kept"
)


def request(hook: Callable[[], Any], world_size: int) -> Any:
    """`train_dataloader()` called as the Trainer calls it on several ranks: under Lightning's
    recording of DataLoader's and BatchSampler's constructor arguments (`_request_dataloader`),
    so that a DataLoader subclass can be re-made with its own arguments. On one rank, or
    without lightning, the hook is simply called."""
    with _recording() if world_size > 1 else contextlib.nullcontext():
        return hook()


@contextlib.contextmanager
def _recording() -> Iterator[None]:
    from torch.utils.data import BatchSampler, DataLoader

    data = _lightning_data()
    if data is None:  # no lightning: a plain DataLoader is re-made from its attributes
        yield
        return
    with data._replace_dunder_methods(DataLoader, "dataset"), data._replace_dunder_methods(BatchSampler):
        yield


def _lightning_data() -> Any:
    """Lightning's data helpers, the ones its Trainer uses (underscored, but the same since
    lightning 2.0): lightning's, else the standalone lightning_fabric's (pytorch_lightning's);
    None without either. Ours would drift from Lightning's where it changes; a fallback of our
    own is kept for a plain DataLoader only (_rebuilt)."""
    for name in ("lightning.fabric.utilities.data", "lightning_fabric.utilities.data"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def as_trainer(loader: Any, *, rank: int, world_size: int, seed: int) -> Any:
    """`loader` as the Trainer would give it to training on rank `rank` of `world_size` (the
    module's docstring says when that is a new DataLoader with a DistributedSampler)."""
    from torch.utils.data import DataLoader, DistributedSampler, IterableDataset

    from harness.execution import splits

    if world_size <= 1 or not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
        return loader
    if isinstance(loader.sampler, DistributedSampler):
        log.info("the DataModule's %s has its own %s: kept", type_name(loader), type_name(loader.sampler))
        return loader
    custom = splits.custom(loader)
    if custom is not None and not custom.startswith(splits.OWN_SAMPLER):
        log.warning(
            "the DataModule's %s has %s: kept as given on %d ranks (Lightning's Trainer would put its "
            "DistributedSampler into it unless use_distributed_sampler=False); if it does not split "
            "by rank, every rank reads the whole data set",
            type_name(loader),
            custom,
            world_size,
        )
        return loader
    sampler = _distributed(loader, rank=rank, world_size=world_size, seed=seed)
    remade = None if sampler is None else _update(loader, sampler)
    if sampler is None or remade is None:
        log.warning(
            "the DataModule's %s kept as given on %d ranks: without lightning installed only a plain "
            "DataLoader can be re-made with a DistributedSampler%s; every rank reads the whole data set",
            type_name(loader),
            world_size,
            f" ({custom}: Lightning's DistributedSamplerWrapper would split it)" if custom else "",
        )
        return loader
    _REMADE.add(remade)
    log.info(
        "the DataModule's %s had %s: re-made with a %s (rank %d of %d, shuffled, seed %d) as "
        "Lightning's Trainer does on several ranks (use_distributed_sampler=True)%s",
        type_name(loader),
        custom or f"a {type(loader.sampler).__name__}",
        type(sampler).__name__,
        rank,
        world_size,
        seed,
        _TWICE if custom else "",
    )
    return remade


def _distributed(
    loader: DataLoader[Any], *, rank: int, world_size: int, seed: int
) -> DistributedSampler[Any] | None:
    """The sampler the Trainer puts in the training loader (data_connector._get_distributed_sampler,
    shuffle=True): a DistributedSampler over the data set in place of a plain sampler, Lightning's
    DistributedSamplerWrapper around a sampler of the user's own class (each rank its share of
    what that sampler yields); None for the latter without lightning."""
    from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler

    if isinstance(loader.sampler, (RandomSampler, SequentialSampler)):
        return DistributedSampler(loader.dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    wrapper = _wrapper()
    if wrapper is None:
        return None
    return wrapper(loader.sampler, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)


def _wrapper() -> Any:
    """Lightning's DistributedSamplerWrapper (lightning's, else lightning_fabric's); None without."""
    for name in ("lightning.fabric.utilities.distributed", "lightning_fabric.utilities.distributed"):
        try:
            return importlib.import_module(name).DistributedSamplerWrapper
        except ImportError:
            continue
    return None


def remade(loader: Any) -> bool:
    """Whether `loader` is one as_trainer re-made with a DistributedSampler."""
    try:
        return loader in _REMADE
    except TypeError:  # not weakly referenceable: not ours
        return False


def _update(loader: DataLoader[Any], sampler: DistributedSampler[Any]) -> DataLoader[Any] | None:
    """The loader re-made with `sampler`, by Lightning's own helper where it is installed (the
    Trainer's: it re-makes a subclass with its recorded arguments, keeps every attribute), else
    a plain DataLoader rebuilt from its attributes (None for a subclass: its constructor is
    its own)."""
    data = _lightning_data()
    if data is None:
        return _rebuilt(loader, sampler)
    return data._update_dataloader(loader, sampler)


def _rebuilt(loader: DataLoader[Any], sampler: DistributedSampler[Any]) -> DataLoader[Any] | None:
    """Without lightning (a DataModule of the standalone pytorch_lightning, or a look-alike):
    a plain DataLoader, whose constructor arguments are all attributes; None for a subclass."""
    from torch.utils.data import DataLoader

    if type(loader) is not DataLoader:
        return None
    workers = loader.num_workers
    return DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        sampler=sampler,
        num_workers=workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context if workers else None,
        generator=loader.generator,
        prefetch_factor=loader.prefetch_factor if workers else None,
        persistent_workers=loader.persistent_workers,
        pin_memory_device=loader.pin_memory_device,
        in_order=loader.in_order,
    )


class Lightning(NoAnswer):
    name = "lightning"

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) in ("lightning", "pytorch_lightning", "lightning_fabric") or remade(thing)

    def train_loader(self, made: Any, *, rank: int, world_size: int, seed: int) -> Any | None:
        """A DataModule's train_dataloader(), after its prepare_data() and setup("fit"), on
        several ranks with the DistributedSampler the Trainer would put in it; NotALoader where
        it returns no iterable. None for anything without train_dataloader()."""
        make = getattr(made, "train_dataloader", None)
        if not callable(make):
            return None
        for hook, hook_args in (("prepare_data", ()), ("setup", ("fit",))):
            method = getattr(made, hook, None)
            if callable(method):
                method(*hook_args)
        loader = request(make, world_size)
        if not callable(getattr(loader, "__iter__", None)):
            raise NotALoader(
                f"{type_name(made)}.train_dataloader() returned {type_name(loader)}, which is not iterable"
            )
        return as_trainer(loader, rank=rank, world_size=world_size, seed=seed)

    def makes_loader_holder(self, made: Any) -> bool | None:
        """Whether the factory is, or is annotated to return, a class with train_dataloader()."""
        if not inspect.isclass(made):
            try:
                made = typing.get_type_hints(made).get("return")
            except Exception:  # an annotation that does not resolve: not known
                return None
        return True if inspect.isclass(made) and callable(getattr(made, "train_dataloader", None)) else None

    def ranks_fix(self) -> str | None:
        return (
            "return a DataModule, whose loader the harness re-makes with a DistributedSampler as "
            "Lightning's Trainer does"
        )

    def before_loop(self) -> dict[str, Callable[[Any], None]] | None:
        """The Trainer's sanity validation (`num_sanity_val_steps`, 2 by default) runs in
        `Trainer.fit` before the fit loop asks for the train loader (lightning 2.6,
        `Trainer._run_stage`: `_run_sanity_check()`, then `fit_loop.run()`, whose `setup_data`
        calls `train_dataloader()`): the check run skips it, and reaches the loader."""
        return {
            f"{package}.trainer.trainer": _no_sanity_check
            for package in ("lightning.pytorch", "pytorch_lightning")
        }

    def described(self, loader: Any) -> str | None:
        if not remade(loader):
            return None
        ranks = getattr(loader.sampler, "num_replicas", "several")
        sampler = type(loader.sampler).__name__
        return f"re-made with a {sampler} over {ranks} ranks as Lightning's Trainer does"


SANITY_SKIPPED = (  # a note (base.note): harness plan says it
    "harness.probe: harness plan's check run skips Lightning's sanity validation "
    "(num_sanity_val_steps): the check neither validates nor trains"
)


def _no_sanity_check(module: Any) -> None:
    """The Trainer of `module` (lightning.pytorch.trainer.trainer) without its sanity validation."""

    def skipped(trainer: Any) -> None:
        note(SANITY_SKIPPED)

    module.Trainer._run_sanity_check = skipped
