"""Reading a DataLoader epoch after epoch, as training does: each epoch announced to the samplers
before its iter(), a timeout on each wait for a batch, and the workers ended when a rung times
out or fails.

A concept apart from how the loader is built (dataloader.py) and what a rung caches (ladder.py,
sample_cache.py): the same reading serves the harness's loaders (LoaderStream) and a user's
own (given_loader.IterStream).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

from harness.execution import worker_deaths
from harness.execution.dataloader import WorkerTally
from harness.naming import type_name
from harness.sources.length import length


class LoaderTimeout(RuntimeError):
    """No batch came from the DataLoader's workers within `limits.batch_timeout_s`."""


TIMEOUT_SETTING = "limits.batch_timeout_s"
_TORCH_TIMEOUT = "DataLoader timed out after"
"""The start of the RuntimeError torch raises when `timeout` passes without a batch
(torch/utils/data/dataloader.py, _MultiProcessingDataLoaderIter._get_data)."""


class LoaderStream:
    """Batches from a DataLoader, epoch after epoch: a new iterator (and, without persistent
    workers, new worker processes) at each epoch end, as in training."""

    def __init__(self, loader: DataLoader[Any]) -> None:
        self.loader, self.epoch = loader, 0
        self.iterator: Any = None
        self.epoch_steps: int | None = length(loader)
        """Batches per epoch of this rank's share of the data; None for a stream that does not
        say (an IterableDataset without __len__): its epochs are counted when it ends."""
        workers = loader.num_workers
        self.stock = workers * (loader.prefetch_factor or 0) if workers else 0
        """Batches the workers can hold ready before they are asked (see loop.py)."""

    def next(self) -> Any:
        try:
            return worker_deaths.asked(self._next)
        except RuntimeError as e:
            if not is_timeout(e):
                raise
            # The stuck worker would outlive the rung (and, after a kill -9 of the harness,
            # the harness itself, reparented to init): end them all now.
            end_workers(self.iterator)
            raise timed_out(self.loader) from None

    def _next(self) -> Any:
        return next_across_epochs(self, _set_epoch, _no_batch)

    def idle_workers(self) -> int | None:
        """Workers of this loader that have delivered no batch so far (None without workers)."""
        tally = getattr(self.loader, "collate_fn", None)
        return tally.idle() if isinstance(tally, WorkerTally) else None

    def ready(self) -> int | None:
        """Batches made and not yet taken: in the result queue, and received out of order
        (PyTorch keeps those in `_task_info`). With pin_memory the workers' results pass
        through a second queue, the pin thread's: both count. None where the iterator cannot
        say (no worker processes, or a queue without qsize(), as on macOS). Private attributes
        of torch.utils.data's _MultiProcessingDataLoaderIter: read defensively."""
        queue = getattr(self.iterator, "_data_queue", None)
        info = getattr(self.iterator, "_task_info", None)
        if queue is None or not isinstance(info, dict):
            return None
        queues = [queue]
        results = getattr(self.iterator, "_worker_result_queue", None)
        if results is not None and results is not queue:
            queues.append(results)  # pinned: the workers' queue feeds the pin thread's
        try:
            queued = sum(int(q.qsize()) for q in queues)
        except (NotImplementedError, OSError, AttributeError):
            return None
        return queued + sum(1 for entry in info.values() if len(entry) == 2)

    def close(self) -> None:
        # Dropping the last references shuts the worker processes down (persistent ones too).
        self.iterator = None
        self.loader = None  # type: ignore[assignment]
        gc.collect()


def is_timeout(e: BaseException) -> bool:
    """Whether `e` is torch's error for a DataLoader's `timeout` passed without a batch."""
    return isinstance(e, RuntimeError) and str(e).startswith(_TORCH_TIMEOUT)


def timed_out(loader: DataLoader[Any]) -> LoaderTimeout:
    """The rung's error where `loader`'s workers delivered no batch within its timeout."""
    return LoaderTimeout(
        f"no batch from the DataLoader for {loader.timeout:g} s: {_stuck_where(loader.dataset)} "
        f"{TIMEOUT_SETTING} in the spec sets the wait, 0 for none)"
    )


def _stuck_where(dataset: Any) -> str:
    """Where a worker that delivers nothing is stuck, as the dataset's kind says."""
    if isinstance(dataset, IterableDataset):
        # A stream whose iteration starts threads that hold locks (a streaming library's), read
        # in the process the workers forked from: they inherit the locks held, not the threads.
        return (
            f"a worker stuck in {type_name(dataset)}.__iter__? (a read that never returns, or a "
            "lock the stream's threads held when the workers were forked: a stream read in the "
            "parent process before the fork;"
        )
    return "a worker stuck in __getitem__? (a read that never returns;"


def end_workers(iterator: Any) -> None:
    """Shut a multi-process iterator's workers down, and kill those that do not stop: a
    worker blocked in __getitem__ ignores the polite request (torch's shutdown then sends
    SIGTERM, which a user's handler may catch). Private attributes of torch.utils.data's
    _MultiProcessingDataLoaderIter, read defensively."""
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if callable(shutdown):
        shutdown()
    for worker in getattr(iterator, "_workers", None) or ():
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=5)


def kill_workers(iterator: Any) -> None:
    """SIGKILL a multi-process iterator's live workers, for a rung that has failed: nothing they
    hold is wanted. Its shutdown then finds them gone (`end_workers` asks them first)."""
    for worker in getattr(iterator, "_workers", None) or ():
        if worker.is_alive():
            worker.kill()
            worker.join(timeout=5)


def next_across_epochs(stream: Any, announce: Callable[[Any, int], None], empty: Callable[[Any], str]) -> Any:
    """The next batch of `stream.loader`, epoch after epoch, as a training loop takes them:
    each epoch announced to the loader's parts (`announce(loader, epoch)`) before its iter(),
    the first (0) too, as `for epoch in range(n): sampler.set_epoch(epoch)` does: a part whose
    own count does not start at 0 (a streaming library's starts at 1) would otherwise be
    told 1 at the second epoch and read the first's order again. An iterator that yields
    nothing even after a restart raises RuntimeError(`empty(loader)`). `stream` keeps `loader`,
    `iterator` and `epoch` (LoaderStream, given_loader.IterStream)."""
    if stream.iterator is None:
        announce(stream.loader, stream.epoch)
        stream.iterator = iter(stream.loader)
    try:
        return next(stream.iterator)
    except StopIteration:
        stream.epoch += 1
        announce(stream.loader, stream.epoch)
        stream.iterator = iter(stream.loader)
        try:
            return next(stream.iterator)
        except StopIteration:
            raise RuntimeError(empty(stream.loader)) from None


def _no_batch(loader: DataLoader[Any]) -> str:
    """Why an epoch ended before its first batch, in the words of what the user can change."""
    if isinstance(loader.dataset, IterableDataset):
        return (
            f"the stream yields no batch: {type_name(loader.dataset)} ended before a first batch "
            f"(batch_size {loader.batch_size}, drop_last {loader.drop_last}) on this rank; a stream "
            "sharded between ranks and workers needs at least one sample per reader"
        )
    if loader.batch_size is None:  # a user's batch sampler
        return (
            f"the loader yields no batch: the batch sampler gave no batch for {len(loader.dataset)} samples"  # type: ignore[arg-type]
        )
    return (
        f"the loader yields no batch: {len(loader.sampler)} samples per rank, "  # type: ignore[arg-type]
        f"batch_size {loader.batch_size}, drop_last {loader.drop_last}"
    )


def _set_epoch(loader: DataLoader[Any], epoch: int) -> None:
    """Tell the samplers a new epoch starts, as a training loop does (DistributedSampler
    reshuffles only then): the loader's sampler, its batch sampler and the sampler that one
    wraps, and a stream that reshuffles by epoch (a library's stream of shards), each once,
    wherever they have `set_epoch`."""
    stream = loader.dataset if isinstance(loader.dataset, IterableDataset) else None
    found = (loader.sampler, loader.batch_sampler, getattr(loader.batch_sampler, "sampler", None), stream)
    done: list[int] = []
    for sampler in found:
        set_epoch = getattr(sampler, "set_epoch", None)
        if callable(set_epoch) and id(sampler) not in done:
            done.append(id(sampler))
            set_epoch(epoch)
