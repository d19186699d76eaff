"""A user's own training script, measured by the harness: a probe of a few lines.

```python
import harness.probe as probe

loader = probe.loader(dataset, batch_size=256, num_workers=4, collate_fn=collate)  # your defaults
for batch in probe.measure(loader, device):  # batches on the device
    train_step(batch)
```

**Alone** (`python train.py`): `loader` is `DataLoader(dataset, batch_size=256, ...)` with your
arguments, and `measure` yields its batches moved to `device` (`batches.to_device`), one pass
over the loader (or `epochs=`, `steps=`), timing each step as the Jean Zay course's chronometer
does (`next()` plus the copy). At the end it prints one line: what the chronometer saw.

**Under the harness** (a spec whose workload is `script: train.py`): the job sets
`HARNESS_PROBE` (harness/execution/script.py). `loader` records your dataset and your
collate_fn, sampler or batch_sampler and other arguments, and builds the DataLoader with the
point's settings in place of yours for the settings the spec names (batch_size too, where the
spec gives one); those it does not name keep your values (Point.script_keeps).
`measure` opens the point and yields from `runner.measure_point`, the same rungs, window and
rows as a built-in workload: your loop trains on the cached device batch, the cached host
batch, the cached processed sample (and the sample-level rungs your dataset offers), then the
live loader, with the loader's capacity timed alone after each sample-level rung. When the
point is done the loop ends and your script goes on to its end; a later `measure` in the same
process yields nothing. A loop that stops early (`break`) leaves failed rows that say so.

Under DDP, `init_distributed()` joins the process group from the torchrun-style variables the
job sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and returns
the rank's device; a script that calls `torch.distributed.init_process_group` itself works as
well (the probe uses its group, or joins one for its own barriers when there is none).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

from harness.config.plan import resolve_loader
from harness.config.settings import LOADER_COLUMNS
from harness.execution import batches, ladder
from harness.execution.loop import Clocked, one_step
from harness.execution.script import ProbeJob

__all__ = ["init_distributed", "loader", "measure", "under_harness"]

log = logging.getLogger(__name__)

_PARTS_ARGUMENTS = ("collate_fn", "sampler", "batch_sampler")
_POINT_OWNS = tuple(name for name in LOADER_COLUMNS if name != "non_blocking")
"""DataLoader arguments a point's settings replace (with batch_size, where the spec gives one):
every loader setting but non_blocking, which is the copy's (the probe copies)."""
_PROBE = "_harness_probe"
"""The attribute of a loader made by `loader()` under the harness: what the script gave."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Recorded:
    """What the script handed to `probe.loader`, as the point's rungs rebuild it."""

    dataset: Any
    batch_size: int | None
    parts: ladder.LoaderParts
    given: dict[str, Any]
    """The script's own values of the loader settings (those it gave): the point replaces those
    its spec names and keeps the others (Point.script_keeps)."""


_measured_here = False
"""Set once a point has been measured in this process: later `measure` calls yield nothing,
so that a script's epoch loop around `measure` ends on its own."""


def under_harness() -> bool:
    """Whether this process is a rank of a harness point (HARNESS_PROBE is set)."""
    return ProbeJob.from_environ() is not None


def loader(dataset: Any, batch_size: int | None = 1, **kwargs: Any) -> DataLoader[Any]:
    """Your DataLoader: `DataLoader(dataset, batch_size, **kwargs)` alone; under the harness,
    the same dataset, collate_fn, sampler or batch_sampler and other arguments with the
    point's DataLoader settings in place of yours."""
    job = ProbeJob.from_environ()
    if job is None:
        return DataLoader(dataset, batch_size=batch_size, **kwargs)
    job.report("reached")
    recorded = _record(dataset, batch_size, kwargs)
    point = _effective_point(job, recorded)
    where = ladder.Placement(
        device=torch.device("cuda" if torch.cuda.is_available() else "cpu"),
        rank=job.env.rank,
        world_size=job.env.world_size,
    )
    built = ladder.make_loader(dataset, point.loader, _batch_size(point, recorded), where, recorded.parts)
    setattr(built, _PROBE, recorded)
    return built


def measure(
    source: Iterable[Any],
    device: torch.device | str,
    *,
    epochs: int = 1,
    steps: int | None = None,
    non_blocking: bool | None = None,
    batch_samples: Callable[[Any], int] | None = None,
) -> Iterator[Any]:
    """Yield the batches your loop trains on, on `device`.

    Alone: `epochs` passes over `source` (at most `steps` batches), copied with
    `non_blocking` (default: when the loader pins memory), then one line on stderr.
    Under the harness: the point's rungs and window, whatever `epochs` and `steps` say.
    `batch_samples(batch) -> int` counts the samples of a batch where its tensors' leading
    dimension cannot (batches.count_samples)."""
    if epochs < 1 or (steps is not None and steps < 1):
        raise ValueError(f"epochs and steps must be >= 1 (got epochs={epochs}, steps={steps})")
    job = ProbeJob.from_environ()
    if job is not None and job.check:
        _checked(job)
    count = batch_samples or batches.count_samples
    if job is None:
        copy = non_blocking if non_blocking is not None else bool(getattr(source, "pin_memory", False))
        return _alone(source, torch.device(device), epochs, steps, copy, count)
    return _harnessed(job, source, torch.device(device), count, non_blocking)


def init_distributed() -> torch.device:
    """Join the process group of the torchrun-style environment (when WORLD_SIZE > 1 and no
    group is joined yet) and return this rank's device: its own GPU (made the current one),
    or the CPU where no GPU is visible. Alone, one process: the device, and no group."""
    from harness.execution.dist import DistEnv, init_process_group
    from harness.execution.train_step import choose_device

    job = ProbeJob.from_environ()
    if job is not None:
        job.report("reached")
    env = job.env if job is not None else DistEnv.from_environ()
    device = choose_device("auto", env.local_rank, env.local_world_size)
    init_process_group(env, device)
    return device


# --- alone: the chronometer, one line at the end ---------------------------------------------


class _Exhausted(Exception):
    """The user's loader has no batch left in this pass."""


class _Pass:
    """The user's iterable as the one chronometer (`loop.one_step`) reads it."""

    def __init__(self, source: Iterable[Any]) -> None:
        self.source: Iterable[Any] = source
        self.iterator: Iterator[Any] | None = None
        self.epoch = 0
        """1 once the pass has started: the chronometer marks the step that started it."""

    def next(self) -> Any:
        if self.iterator is None:
            self.iterator, self.epoch = iter(self.source), 1
        try:
            return next(self.iterator)
        except StopIteration:
            raise _Exhausted from None

    def close(self) -> None:
        self.iterator = None


def _alone(
    source: Iterable[Any],
    device: torch.device,
    epochs: int,
    steps: int | None,
    non_blocking: bool,
    count: Callable[[Any], int],
) -> Generator[Any, None, None]:
    def copy(batch: Any) -> Any:
        return batches.to_device(batch, device, non_blocking=non_blocking)

    if not _seen:  # the first pass of this process: its line is printed once, at exit
        atexit.register(_print_summary)
    taken = 0
    try:
        for _ in range(epochs):
            stream = _Pass(source)
            while steps is None or taken < steps:
                try:
                    _seen.append((yield from one_step(stream, copy, time.perf_counter, count)))
                except _Exhausted:
                    break
                taken += 1
    finally:
        _sync(device)


_seen: list[Clocked] = []
"""Every step the probe timed in this process, alone (all passes, all measure calls)."""


def _print_summary() -> None:
    print(summary(_seen), file=sys.stderr)


def summary(clocked: Sequence[Clocked]) -> str:
    """One line: steps, samples/s in the loop and the course's loading_time (next() plus the
    copy) as a share of a step. Each pass's first step (the iterator and its workers starting)
    is shown on its own, not in the means."""
    if not clocked:
        return "harness.probe: no batch"
    body = [c for c in clocked if not c.new_epoch] or list(clocked)
    firsts = [c.next_s for c in clocked if c.new_epoch]
    step = sum(c.total_s for c in body) / len(body)
    loading = sum(c.next_s + c.copy_s for c in body) / len(body)
    samples = sum(c.samples for c in clocked)
    looped = sum(c.total_s for c in clocked)
    return (
        f"harness.probe: {len(clocked)} steps, {samples} samples in {looped:.1f} s "
        f"({samples / looped:.1f} samples/s); loading_time {loading:.4f} s/step "
        f"(next() + copy, {loading / step:.0%} of a step); first batch of a pass "
        f"{max(firsts, default=0.0):.2f} s"
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- under the harness: the point's rungs through measure_point ------------------------------


def _harnessed(
    job: ProbeJob, source: Any, device: torch.device, count: Callable[[Any], int], non_blocking: bool | None
) -> Iterator[Any]:
    global _measured_here
    if _measured_here:
        log.info("harness.probe: the point is measured; this loop gets no batch")
        return iter(())
    _measured_here = True
    recorded = getattr(source, _PROBE, None) or _from_dataloader(source)
    return _point_batches(job, recorded, device, count, non_blocking)


def _point_batches(
    job: ProbeJob,
    recorded: _Recorded,
    device: torch.device,
    count: Callable[[Any], int],
    non_blocking: bool | None,
) -> Generator[Any, None, None]:
    from harness.execution.dist import init_process_group
    from harness.execution.meta import collect_meta, git_commit
    from harness.execution.runner import measure_point, open_point
    from harness.storage import layout

    point = _effective_point(job, recorded, non_blocking)
    opened = open_point(point, job.sweep_dir, job.env, job.skip_done)
    job.report("reached")
    replaced = {k: v for k, v in recorded.given.items() if k not in point.script_keeps}
    if replaced:
        log.info("harness.probe: the point's settings replace the script's %s", replaced)
    try:
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        opened.rows.device = str(device)
        init_process_group(job.env, device)  # nothing to do where the script joined one
        meta = collect_meta(device, job.env)
        meta.update(script=str(job.script), script_git_commit=git_commit(job.script.parent))
        layout.write_meta(opened.path, job.env.rank, meta)
        opened.rows.transform_names = ladder.transform_names(recorded.dataset)
    except Exception as e:
        opened.fail_all(e)
        return

    def copy(batch: Any) -> Any:
        return batches.to_device(batch, device, non_blocking=point.loader.non_blocking)

    rank = opened.rank(
        dataset=recorded.dataset, device=device, to_device=copy, count=count, parts=recorded.parts
    )
    point_batches = measure_point(rank)
    served = 0
    try:
        for batch in point_batches:
            served += 1
            yield batch
    except GeneratorExit:
        # The user's loop let go of the probe (a break, or its step raised): the rung in
        # progress is closed (its loader, the sampler, the timeline), and the job told how far
        # it got; it writes the failed rows, with the exit status where the script failed.
        point_batches.close()
        job.report(f"left:{served}")
        raise
    job.report("done")


def _record(dataset: Any, batch_size: int | None, kwargs: dict[str, Any]) -> _Recorded:
    """The script's DataLoader arguments split into LoaderParts and the settings the point
    replaces (DataLoader's own rule: a batch_sampler comes without batch_size)."""
    sampler, batch_sampler = kwargs.get("sampler"), kwargs.get("batch_sampler")
    if kwargs.get("shuffle") and (sampler is not None or batch_sampler is not None):
        raise ValueError("DataLoader: shuffle=True cannot go with a sampler or a batch_sampler")
    parts = ladder.LoaderParts(
        collate_fn=kwargs.get("collate_fn"),
        sampler=(lambda _dataset, _where: sampler) if sampler is not None else None,
        batch_sampler=(lambda _d, _w, _b, _l: batch_sampler) if batch_sampler is not None else None,
        extra={k: v for k, v in kwargs.items() if k not in (*_PARTS_ARGUMENTS, *_POINT_OWNS, "shuffle")},
    )
    return _Recorded(
        dataset=dataset,
        batch_size=None if batch_sampler is not None else batch_size,
        parts=parts,
        given={k: kwargs[k] for k in _POINT_OWNS if k in kwargs},
    )


def _from_dataloader(source: Any) -> _Recorded:
    """A DataLoader the script built itself: its dataset, batch size, collate_fn, worker_init_fn
    and its own sampler (not the default one that shuffle made) are what the rungs rebuild."""
    if not isinstance(source, DataLoader):
        raise TypeError(
            f"harness.probe.measure needs the script's DataLoader (made by probe.loader or "
            f"torch's DataLoader) under the harness; got {type(source).__name__}"
        )
    own_sampler = not isinstance(source.sampler, (RandomSampler, SequentialSampler))
    kwargs: dict[str, Any] = {"collate_fn": source.collate_fn, "worker_init_fn": source.worker_init_fn}
    kwargs.update({k: getattr(source, k) for k in _POINT_OWNS if hasattr(source, k)})
    if own_sampler and source.batch_size is not None:
        kwargs["sampler"] = source.sampler
    if source.batch_size is None:
        kwargs["batch_sampler"] = source.batch_sampler
    return _record(source.dataset, source.batch_size, kwargs)


def _effective_point(job: ProbeJob, recorded: _Recorded, non_blocking: bool | None = None) -> Any:
    """The point as it runs: the batch size the spec gives, else the script's; the loader
    settings the spec names, and the script's own for the others (Point.script_keeps), with
    PyTorch's rules applied again. non_blocking, when the spec names none: `measure`'s
    argument, else whether the loader pins memory (as alone)."""
    point = job.point
    if point.workload.batch_size is None:
        script_batch = recorded.batch_size if recorded.batch_size is not None else 0
        point = replace(point, workload=replace(point.workload, batch_size=script_batch))
    kept = {k: v for k, v in recorded.given.items() if k in point.script_keeps}
    if "non_blocking" in point.script_keeps:
        pinned = kept.get("pin_memory", point.loader.pin_memory)
        kept["non_blocking"] = non_blocking if non_blocking is not None else pinned
    if kept:
        loader, adjustments = resolve_loader({**asdict(point.loader), **kept})
        point = replace(point, loader=loader, adjustments=(*point.adjustments, *adjustments))
    return point


def _batch_size(point: Any, recorded: _Recorded) -> int:
    return int(point.workload.batch_size or recorded.batch_size or 1)


def _checked(job: ProbeJob) -> None:
    """`harness plan`'s check run ends here, at the script's loop: it parsed its flags and
    built its loaders (probe.loader's with the point's settings), and it neither trains nor
    validates nor saves. os._exit: no `finally` or atexit of the script's runs (a checkpoint)."""
    job.report("reached")
    job.report("checked")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _say_imported() -> None:
    """Under the harness, tell the job that the script imports the probe: a script that ends
    without reaching it is then told apart from one that lacks the probe's lines."""
    job = ProbeJob.from_environ()
    if job is not None:
        job.report("imported")


_say_imported()
