"""A user's own training script, measured by the harness: a probe of a few lines.

```python
import harness.probe as probe

loader = probe.loader(dataset, batch_size=256, num_workers=4, collate_fn=collate)  # your defaults
for i, batch in enumerate(probe.measure(loader, device)):  # batches on the device
    train_step(batch)
    if i == len(loader) - 1:
        with probe.untimed():  # your own periodic work, out of the measured windows
            validate()
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
live loader, with the loader's capacity timed alone after each sample-level rung.

The loop contract: the loader's `len()` is the number of batches `measure` yields to the loop
(`loop_length.batches_per_loop`; untimed batches fill what a short warmup did not take, and one
closes the loop), so that code sized by it (an LR schedule, "the last batch of the epoch")
lands where the script expects. When the loop asks for the batch after the last, the point is
measured and written: the probe ends the process (SystemExit(0)) unless `keep_running=True`,
so that no epoch, validation or checkpoint runs after the measurement. A loop that stops early
(`break`) leaves failed rows that say so.

Under DDP, `init_distributed()` joins the process group from the torchrun-style variables the
job sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and returns
the rank's device; a script that calls `torch.distributed.init_process_group` itself works as
well (the probe uses its group, or joins one for its own barriers when there is none). A
script that launches ranks of its own (mp.spawn, a `tcp://` group of another size) is refused.
"""

from __future__ import annotations

import atexit
import contextlib
import copy as copying
import json
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

from harness.adapters import registry as adapters
from harness.config.plan import Point, resolve_loader
from harness.execution import batches, given_loader, ladder, termination
from harness.execution.loop import Clocked, one_step
from harness.execution.loop_length import CLOSING, batches_per_loop
from harness.execution.script import ProbeEnvironmentError, ProbeJob
from harness.naming import type_name
from harness.workloads.loader_factory import one_shot, train_loader
from harness_schema.settings import LOADER_COLUMNS, LoaderSettings

__all__ = [
    "Settings",
    "batches_per_loop",
    "init_distributed",
    "loader",
    "measure",
    "settings",
    "under_harness",
    "untimed",
]

log = logging.getLogger(__name__)

_PARTS_ARGUMENTS = ("collate_fn", "sampler", "batch_sampler")
_POINT_OWNS = tuple(name for name in LOADER_COLUMNS if name != "non_blocking")
"""DataLoader arguments a point's settings replace (with batch_size, where the spec gives one):
every loader setting but non_blocking, which is the copy's (the probe copies)."""
_PROBE = "_harness_probe"
"""The attribute of a loader made by `loader()` under the harness: what the script gave."""

Copy = Callable[..., Any]
"""`copy(batch, non_blocking=...) -> batch on the device`: the script's own copy, timed as
loading (the course's `images.to(gpu, non_blocking=..., memory_format=torch.channels_last)`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Recorded:
    """What the script handed to `probe.loader`, as the point's rungs rebuild it."""

    dataset: Any
    batch_size: int | None
    parts: ladder.LoaderParts
    given: dict[str, Any]
    """The script's own values of the loader settings (those it gave): the point replaces those
    its spec names and keeps the others (Point.script_keeps)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings(LoaderSettings):
    """The DataLoader settings a loop runs with (every loader setting, and the batch size): the
    point's under the harness (what its rows record), the script's own alone."""

    batch_size: int | None = None

    def dataloader(self) -> dict[str, Any]:
        """The DataLoader keywords among them, for the script's other loaders (validation):
        `DataLoader(val, batch_size=250, shuffle=False, **probe.settings().dataloader())`."""
        return {name: getattr(self, name) for name in _POINT_OWNS}


_SETTING_NAMES = tuple(f.name for f in fields(Settings))


class _Clock:
    """time.perf_counter with the time spent in `untimed()` taken out (the windows' clock)."""

    def __init__(self) -> None:
        self.paused_s = 0.0
        self.since: float | None = None
        self.depth = 0

    def __call__(self) -> float:
        now = self.since if self.since is not None else time.perf_counter()
        return now - self.paused_s

    def pause(self) -> None:
        if self.depth == 0:
            self.since = time.perf_counter()
        self.depth += 1

    def resume(self) -> None:
        self.depth -= 1
        if self.depth == 0 and self.since is not None:
            self.paused_s += time.perf_counter() - self.since
            self.since = None


_clock = _Clock()
_state: dict[str, Any] = {"device": None, "given": None}
"""The device of the running `measure` (untimed syncs it); the script's own settings, from
its first `probe.loader` and `probe.settings` calls."""
_measured_here = False
"""Set once a point has been measured in this process: later `measure` calls yield nothing,
so that a script's epoch loop around `measure` ends on its own."""


def under_harness() -> bool:
    """Whether this process is a rank of a harness point (HARNESS_PROBE is set)."""
    return _environ_job() is not None


def loader(dataset: Any, batch_size: int | None = 1, **kwargs: Any) -> DataLoader[Any]:
    """Your DataLoader: `DataLoader(dataset, batch_size, **kwargs)` alone; under the harness,
    the same dataset, collate_fn, sampler or batch_sampler and other arguments with the
    point's DataLoader settings in place of yours, and a `len()` that is the number of batches
    `measure` will yield to your loop."""
    job = _job()
    _remember({"batch_size": batch_size, **{k: kwargs[k] for k in _POINT_OWNS if k in kwargs}})
    if job is None:
        return DataLoader(dataset, batch_size=batch_size, **kwargs)
    recorded = _record(dataset, batch_size, kwargs)
    point = _effective_point(job, recorded, (_state["given"] or {}).get("non_blocking"))
    where = ladder.Placement(
        device=torch.device("cuda" if torch.cuda.is_available() else "cpu"),
        rank=job.env.rank,
        world_size=job.env.world_size,
    )
    built = ladder.make_loader(
        dataset,
        point.loader,
        _batch_size(point, recorded),
        where,
        recorded.parts,
        timeout_s=point.limits.batch_timeout_s,
    )
    _report_settings(job, point)
    setattr(built, _PROBE, recorded)
    length = loop_length(batches_per_loop(point, _done(job)), _length(built))
    built.__class__ = _Announced
    built._harness_length = length
    if built.batch_sampler is not None:
        # DataLoader refuses a new batch_sampler once built (its __setattr__): the wrapper
        # yields the same batches, so the loader is the same loader.
        wrapped = _AnnouncedBatches(built.batch_sampler, length * job.env.world_size, recorded)
        object.__setattr__(built, "batch_sampler", wrapped)
    return built


def loop_length(announced: int, epoch: int | None) -> int:
    """What `len()` of the probe's loader says: the script's own epoch (`epoch`, the loader's
    len() with the point's settings) or the batches the probe yields to the loop (`announced`),
    whichever is more.

    The contract with a script's arithmetic on len(loader), at any window: the loop never
    receives more batches than len() said, so a schedule sized by it
    (`OneCycleLR(total_steps=len(loader) * epochs)`, `steps_per_epoch=len(loader)`) never steps
    past its end; and len() is never less than the epoch the script would see alone, so
    "every len(loader) // 10 batches" is as safe as without the harness. The price: where the
    epoch is the longer, the loop ends (the point measured) before its "last batch of the
    epoch", and the validation there does not run, as it would not inside a measured window.
    The yielded count alone broke a print frequency of `len // 10` at a short window (the
    course's dlojz2_1.py: 9 batches, `(i + 1) % 0`); the epoch alone, a schedule at a long one.
    """
    return max(announced, epoch or 0)


class _Announced(DataLoader[Any]):
    """The point's DataLoader, whose length is the probe's (`loop_length`)."""

    def __len__(self) -> int:
        return int(self._harness_length)  # type: ignore[attr-defined]


class _AnnouncedBatches(BatchSampler):
    """The batch sampler of `probe.loader`'s loader: its batches as they are, with the script's
    record, and a len() of the batches the probe yields to each rank's loop times the ranks.

    Why: a library may re-make the loader around its batch sampler, in a shard of it whose
    len() is this one's divided by the ranks (this one itself on one rank): so `len()` of the
    prepared loader, which such scripts read after prepare to size their schedule and their
    `max_train_steps`, is the probe's number; and `measure` finds the record through it
    (_probe_record) and measures the point as probe.loader's."""

    def __init__(self, inner: Iterable[list[int]], length: int, recorded: _Recorded) -> None:
        # BatchSampler.__init__ would check a sampler and a batch size: this one delegates.
        self.inner = inner
        self.length = length
        self.sampler = getattr(inner, "sampler", None)  # type: ignore[assignment]
        self.batch_size = getattr(inner, "batch_size", None)  # type: ignore[assignment]  # a shard reads it
        self.drop_last = bool(getattr(inner, "drop_last", False))
        setattr(self, _PROBE, recorded)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.inner)

    def __len__(self) -> int:
        return self.length


def _probe_record(source: Any) -> _Recorded | None:
    """What the script gave `probe.loader`, found on its loader, or on a loader a library
    re-made around that loader's batch sampler (its batch sampler a shard whose
    `batch_sampler` is ours); None for any other loader."""
    found = getattr(source, _PROBE, None)
    batches = getattr(source, "batch_sampler", None)
    for _ in range(3):  # the loader's batch sampler, and the one a shard of it wraps
        if found is not None or batches is None:
            break
        found = getattr(batches, _PROBE, None)
        batches = getattr(batches, "batch_sampler", None)
    return found if isinstance(found, _Recorded) else None


def _sharded_as_prepared(recorded: _Recorded, source: Any) -> _Recorded:
    """probe.loader's record, its own sampler or batch sampler sharded as the prepared loader
    shards it: each rung reads this rank's share of the batches.

    Why: a library that prepares a loader for several ranks may wrap its batch sampler in a
    shard of its own (each rank its own batches) whatever sampler the script gave, and a
    trainer built on it may give a sampler of its own and rely on that. The rungs rebuild the
    loader from the record, and a sampler of the script's is used as it is (LoaderParts: it
    shards itself), so every rank read the whole data set. Without a sampler of the script's,
    the rungs' own sampler is a DistributedSampler already: the record is left as it is, as on
    one rank. How the library shards is its adapter's (`sharding`)."""
    parts = recorded.parts
    if parts.sampler is None and parts.batch_sampler is None:
        return recorded
    shard = adapters.first(lambda adapter: adapter.sharding(source))
    if shard is None:
        return recorded
    sampler, batch_sampler = parts.sampler, parts.batch_sampler

    def sharded(dataset: Any, where: ladder.Placement, batch_size: int, drop_last: bool) -> Any:
        if batch_sampler is not None:
            return shard(batch_sampler(dataset, where, batch_size, drop_last))
        assert sampler is not None
        return shard(BatchSampler(sampler(dataset, where), batch_size, drop_last))

    return replace(recorded, parts=replace(parts, sampler=None, batch_sampler=sharded))


def measure(
    source: Iterable[Any],
    device: torch.device | str,
    *,
    epochs: int = 1,
    steps: int | None = None,
    non_blocking: bool | None = None,
    batch_samples: Callable[[Any], int] | None = None,
    memory_format: torch.memory_format | None = None,
    copy: Copy | None = None,
    keep_running: bool = False,
) -> Iterator[Any]:
    """Yield the batches your loop trains on, on `device`.

    Alone: `epochs` passes over `source` (at most `steps` batches), copied with
    `non_blocking` (default: the one given to `settings()`, else when the loader pins memory),
    then one line on stderr. Under the harness: the point's rungs and window, whatever `epochs`
    and `steps` say, then the process ends (`keep_running=True`: the loop ends and the script
    goes on). The copy is `copy(batch, non_blocking=...)` where given, else every tensor to
    `device` (with `memory_format` on those it applies to): either way timed as loading.
    `batch_samples(batch) -> int` counts the samples of a batch where its tensors' leading
    dimension cannot (batches.count_samples)."""
    if epochs < 1 or (steps is not None and steps < 1):
        raise ValueError(f"epochs and steps must be >= 1 (got epochs={epochs}, steps={steps})")
    job = _job()
    if job is not None and (once := one_shot(source)):
        _refuse(job, once)  # before the check run stops: `harness plan` refuses it
    if job is not None and job.check:
        _checked(job)
    count = batch_samples or batches.count_samples
    target = torch.device(device)
    _state["device"] = target
    if non_blocking is None:
        non_blocking = (_state["given"] or {}).get("non_blocking")
    if job is None:
        pinned = bool(getattr(source, "pin_memory", False))
        mover = _mover(target, memory_format, copy, non_blocking if non_blocking is not None else pinned)
        passes = _alone(source, target, epochs, steps, mover, count)
        return _Batches(passes, lambda: _passes_length(source, epochs, steps))
    how = _How(device=target, memory_format=memory_format, copy=copy, keep_running=keep_running)
    return _harnessed(job, source, how, count, non_blocking)


class _Batches(Iterator[Any]):
    """What `measure` returns: its batches, and a `len()` where the number is known. Loops
    wrapped around it ask it (torchvision's references, DETR, DeiT, MAE...:
    `MetricLogger.log_every(iterable, ...)` calls `len(iterable)` before and at every step), as
    they ask the loader; a bare generator has none. Under the harness it is the number of
    batches the probe yields, as `len()` of `probe.loader`'s loader says."""

    def __init__(self, batches: Iterator[Any], length: Callable[[], int | None]) -> None:
        self._batches = batches
        self._length = length  # asked only when len() is: a loader's own len() may cost or fail

    def __next__(self) -> Any:
        return next(self._batches)

    def __len__(self) -> int:
        length = self._length()
        if length is None:
            raise TypeError("len() of probe.measure(...): its loader has no len() (a stream)")
        return length

    def close(self) -> None:
        """As a generator's close(): the loop lets go of the probe (a break)."""
        closing = getattr(self._batches, "close", None)
        if closing is not None:
            closing()


def _passes_length(source: Any, epochs: int, steps: int | None) -> int | None:
    """The batches `_alone` yields: `epochs` passes of len(source), at most `steps` in all."""
    per_pass = _length(source)
    if per_pass is None:
        return None
    return per_pass * epochs if steps is None else min(steps, per_pass * epochs)


@contextlib.contextmanager
def untimed() -> Iterator[None]:
    """Your own periodic work (validation, a checkpoint, logging) out of the measured window:
    the window's clock stops inside (the device synchronised on entry, so the step before is
    counted whole, and on exit, so the work's queued kernels are not charged to the next)."""
    device = _state["device"]
    _sync(device)
    _clock.pause()
    try:
        yield
    finally:
        _sync(device)
        _clock.resume()


def settings(**mine: Any) -> Settings:
    """The DataLoader settings your loop runs with. Give your own values (as your flags say
    them: `settings(num_workers=args.num_workers, non_blocking=args.non_blocking, ...)`; those
    you leave out are your first `probe.loader`'s, else PyTorch's defaults): alone they come
    back as they are; under the harness, the point's, as its rows record them."""
    unknown = sorted(set(mine) - set(_SETTING_NAMES))
    if unknown:
        raise TypeError(
            f"probe.settings: unknown setting(s) {', '.join(unknown)}; allowed: {', '.join(_SETTING_NAMES)}"
        )
    _remember(mine)
    given = {**(_state["given"] or {}), **mine}
    job = _job()
    if job is None:
        return _settings_alone(given)
    recorded = _Recorded(
        dataset=None,
        batch_size=given.get("batch_size"),
        parts=ladder.LoaderParts(),
        given={k: v for k, v in given.items() if k in _POINT_OWNS},
    )
    return _settings_of(_effective_point(job, recorded, given.get("non_blocking")))


def init_distributed() -> torch.device:
    """Join the process group of the torchrun-style environment (when WORLD_SIZE > 1 and no
    group is joined yet) and return this rank's device: its own GPU (made the current one),
    or the CPU where no GPU is visible. Alone, one process: the device, and no group."""
    from harness.execution.dist import DistEnv, init_process_group
    from harness.execution.train_step import choose_device

    job = _job()
    env = job.env if job is not None else DistEnv.from_environ()
    device = choose_device("auto", env.local_rank, env.local_world_size)
    init_process_group(env, device)
    return device


def _remember(given: dict[str, Any]) -> None:
    """The script's own settings: the first value given for each name is kept."""
    known = _state["given"] if _state["given"] is not None else {}
    _state["given"] = {**{k: v for k, v in given.items() if k in _SETTING_NAMES}, **known}


def _settings_alone(given: dict[str, Any]) -> Settings:
    pin = bool(given.get("pin_memory", False))
    return Settings(
        batch_size=given.get("batch_size", 1),
        num_workers=int(given.get("num_workers", 0)),
        persistent_workers=bool(given.get("persistent_workers", False)),
        pin_memory=pin,
        non_blocking=bool(given.get("non_blocking", pin)),
        prefetch_factor=given.get("prefetch_factor"),
        drop_last=bool(given.get("drop_last", False)),
    )


def _settings_of(point: Point) -> Settings:
    return Settings(batch_size=point.workload.batch_size or None, **asdict(point.loader))


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


def _mover(
    device: torch.device, memory_format: Any, copy: Copy | None, non_blocking: bool
) -> Callable[[Any], Any]:
    """The copy the chronometer times: the script's own, else the generic one."""
    if copy is not None:
        own = copy
        return lambda batch: own(batch, non_blocking=non_blocking)
    return lambda batch: batches.to_device(
        batch, device, non_blocking=non_blocking, memory_format=memory_format
    )


def _alone(
    source: Iterable[Any],
    device: torch.device,
    epochs: int,
    steps: int | None,
    copy: Callable[[Any], Any],
    count: Callable[[Any], int],
) -> Generator[Any, None, None]:
    if not _seen:  # the first pass of this process: its line is printed once, at exit
        atexit.register(_print_summary)
    taken = 0
    try:
        for _ in range(epochs):
            stream = _Pass(source)
            while steps is None or taken < steps:
                try:
                    _seen.append((yield from one_step(stream, copy, _clock, count)))
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


def _sync(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


# --- under the harness: the point's rungs through measure_point ------------------------------


def _job() -> ProbeJob | None:
    """This process's job (None alone). A process the harness did not start as the point's
    rank is refused (_own_ranks). `harness plan`'s check run goes on through the loaders and
    stops at `measure` (_checked)."""
    job = _environ_job()
    if job is None:
        return None
    refused = _own_ranks(job)
    if refused:
        _refuse(
            job,
            f"{refused}: under the harness every rank is a process the harness starts with "
            "torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK for the "
            "device): launch no ranks yourself (no mp.spawn, no --multiprocessing-distributed) and "
            "join with init_method='env://' (or probe.init_distributed())",
        )
    job.report("reached")
    return job


def _own_ranks(job: ProbeJob) -> str:
    """Why this process is not the rank the harness started ("" when it is): a process the
    script started itself (mp.spawn, multiprocessing), or a process group of the script's own
    whose world or rank is not the point's."""
    if multiprocessing.parent_process() is not None:
        return "this process was started by the script (mp.spawn or multiprocessing), not by the harness"
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        world, rank = dist.get_world_size(), dist.get_rank()
        if (world, rank) != (job.env.world_size, job.env.rank):
            return (
                f"the script's process group has {world} rank(s) (this one {rank}) where the point "
                f"runs {job.env.world_size} (this one {job.env.rank})"
            )
    return ""


def _refuse(job: ProbeJob, why: str) -> None:
    """One line, a failed row for every unit of this rank, exit status 2 (`harness plan`'s
    check run: its refusal, check_refusal)."""
    line = f"harness.probe: {why}"
    print(line, file=sys.stderr, flush=True)
    if not job.check:
        from harness.execution.point import open_point

        open_point(job.point, job.sweep_dir, job.env, job.skip_done).fail_missing(line)
    raise SystemExit(2)


@dataclass(frozen=True, kw_only=True, slots=True)
class _How:
    """How `measure` was asked to copy, and whether the script goes on after the point."""

    device: torch.device
    memory_format: Any
    copy: Copy | None
    keep_running: bool


def _harnessed(
    job: ProbeJob, source: Any, how: _How, count: Callable[[Any], int], non_blocking: bool | None
) -> Iterator[Any]:
    global _measured_here
    if _measured_here:
        if not how.keep_running:
            _end()
        log.info("harness.probe: the point is measured; this loop gets no batch")
        return _Batches(iter(()), lambda: 0)
    _measured_here = True
    made = _probe_record(source)  # probe.loader's loader, or a library's prepared one of it
    if made is not None:
        made = _sharded_as_prepared(made, source)
    given = None if made is not None else _given(source, job)
    recorded = made or (_from_given(given) if given else _from_dataloader(source))
    point = _effective_point(job, recorded, non_blocking)
    if given is not None:
        point = replace(
            point,
            # its own batch size, where it says one (None: an empty cell, not the spec's)
            workload=replace(point.workload, batch_size=recorded.batch_size),  # type: ignore[arg-type]
            loader=replace(given.recorded, non_blocking=point.loader.non_blocking),
        )
    announced = batches_per_loop(point, _done(job))
    own = _length(source)  # probe.loader's: already its loop_length
    if made is None:
        _say_length(own, announced)
    length = loop_length(announced, own)
    return _Batches(_point_batches(job, recorded, point, how, count, announced, given), lambda: length)


def _say_length(length: int | None, announced: int) -> None:
    """Where the loader's own len() is less than the batches the probe yields, say so: a
    schedule sized by it would step past its end (a len() of more is the contract, loop_length)."""
    if length is None:
        log.warning(
            "harness.probe: the loader has no len() (a stream); the probe yields %d batches to this "
            "loop, whatever number of batches the script expects an epoch to hold",
            announced,
        )
    elif length < announced:
        log.warning(
            "harness.probe: len(loader) says %d batches where the probe yields %d to this loop; "
            "build the loader with probe.loader(...) for len() to say so",
            length,
            announced,
        )


def _given(source: Any, job: ProbeJob) -> given_loader.GivenLoader | None:
    """The script's loader measured as it is given (None for a plain DataLoader, whose parts the
    rungs rebuild with the point's settings): a DataLoader subclass (its constructor is its own,
    so the point's settings cannot be swapped in), a loader of threads or any iterable of
    batches, a holder of loaders an adapter opens (a DataModule's train_dataloader(), on several
    ranks with the sampler its trainer would give it)."""
    if type(source) is DataLoader:
        return None
    loader = train_loader(source, rank=job.env.rank, world_size=job.env.world_size)
    return given_loader.GivenLoader(
        loader=loader,
        name=type_name(loader),
        recorded=given_loader.own_settings(loader, LoaderSettings()),
    )


def _from_given(given: given_loader.GivenLoader) -> _Recorded:
    """A given loader as the probe records it: its own batch size (None where it does not say)."""
    return _Recorded(
        dataset=given.dataset,
        batch_size=given_loader.batch_size(given.loader),
        parts=ladder.LoaderParts(),
        given={},
    )


def _point_batches(
    job: ProbeJob,
    recorded: _Recorded,
    point: Point,
    how: _How,
    count: Callable[[Any], int],
    announced: int,
    given: given_loader.GivenLoader | None = None,
) -> Generator[Any, None, None]:
    opened, device = _opened(job, recorded, point, how.device, given)
    if opened is None:
        return _finish(how)
    host: list[Any] = [None]  # the last batch as the loader gave it: the untimed batches' source
    mover = _mover(device, how.memory_format, how.copy, point.loader.non_blocking)

    def copy(batch: Any) -> Any:
        host[0] = batch
        return mover(batch)

    served = yield from _measured(job, opened, recorded, device, copy, count, given)
    job.report("done")
    if served > announced - CLOSING:
        log.warning("harness.probe: %d batches yielded where %d were announced", served, announced)
    try:
        for _ in range(max(announced - served, 0)):
            if host[0] is None:
                host[0] = _any_batch(recorded, point, device)
                if host[0] is None:
                    break
            # Untimed: the point is measured. A copy to a GPU is a new batch each time; on the
            # CPU the batch itself would be handed out again, and a step that changes it in place
            # (a normalisation) would change it again at every step.
            yield mover(copying.deepcopy(host[0]) if device.type == "cpu" else host[0])
    except GeneratorExit:
        return None  # the loop stopped at len(loader): the point is whole
    return _finish(how)


def _measured(
    job: ProbeJob,
    opened: Any,
    recorded: _Recorded,
    device: torch.device,
    copy: Callable[[Any], Any],
    count: Callable[[Any], int],
    given: given_loader.GivenLoader | None = None,
) -> Generator[Any, None, int]:
    """The point's rungs from measure_point; the batches it yielded."""
    from harness.execution.runner import measure_point, open_rank

    rank = open_rank(
        opened,
        dataset=recorded.dataset,
        device=device,
        to_device=copy,
        count=count,
        parts=recorded.parts,
        given=given,
        clock=_clock,
    )
    point_batches = measure_point(rank)
    served = 0
    try:
        # A SIGTERM (preemption, scancel) noted, the script's own handling kept: the death of
        # a worker by it is the termination, not the loader's failed row (termination.py).
        with termination.noted():
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
    return served


def _opened(
    job: ProbeJob,
    recorded: _Recorded,
    point: Point,
    device: torch.device,
    given: given_loader.GivenLoader | None = None,
) -> tuple[Any, torch.device]:
    """The point opened on this rank, its meta written and one line said; None where it could
    not start (its rows then say why)."""
    from harness.execution.meta import git_commit
    from harness.execution.point import open_point

    opened = open_point(point, job.sweep_dir, job.env, job.skip_done)
    _say(job, point, recorded, given)
    if given is not None:
        opened.rows.loader_given = given_loader.loader_given(given.loader)
    try:
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        # the process group: nothing to do where the script joined one
        opened.start(device, script=str(job.script), script_git_commit=git_commit(job.script.parent))
        opened.rows.transform_names = ladder.transform_names(recorded.dataset)
    except Exception as e:
        opened.fail_all(e)
        return None, device
    return opened, device


def _say(
    job: ProbeJob, point: Point, recorded: _Recorded, given: given_loader.GivenLoader | None = None
) -> None:
    """The settings this rank runs with, once: on the script's stderr (its log), and to the
    job, whose failed rows then record them too (script.account)."""
    ran = _report_settings(job, point)
    kept = [k for k in point.script_keeps if k in recorded.given or k == "non_blocking"]
    own = f" (the script's own: {', '.join(kept)})" if kept else ""
    if given is not None:
        own = (
            f" (measured as given: {given.name} is not torch's DataLoader, so the point's settings "
            "cannot be swapped into it; these are its own, empty where it does not say)"
        )
    said = ", ".join(f"{k}={v}" for k, v in ran.items())
    print(f"harness.probe: point {point.id} rank {job.env.rank}: {said}{own}", file=sys.stderr, flush=True)


def _report_settings(job: ProbeJob, point: Point) -> dict[str, Any]:
    """Tell the job the settings this rank runs with (the last said is the one)."""
    ran = asdict(_settings_of(point))
    job.report("settings:" + json.dumps(ran, separators=(",", ":")))
    return ran


def _any_batch(recorded: _Recorded, point: Point, device: torch.device) -> Any:
    """A batch for the untimed ones where the point yielded none (every rung failed or was
    done): the loader's first, or None where it has none."""
    try:
        where = ladder.Placement(device=device)
        stream = ladder.build_stream(
            "host_batch",
            recorded.dataset,
            point.loader,
            _batch_size(point, recorded),
            where,
            recorded.parts,
            timeout_s=point.limits.batch_timeout_s,
        )
        return stream.next()
    except Exception as e:
        log.warning("harness.probe: no batch for the rest of the loop: %s", e)
        return None


def _finish(how: _How) -> None:
    if not how.keep_running:
        _end()


def _end() -> None:
    """The point is measured and its rows written: the script ends here, status 0."""
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(0)


def _done(job: ProbeJob) -> set[tuple[str, int]]:
    """The units every rank of the point has a row for (a resumed point skips them)."""
    from harness_schema import layout
    from harness_schema.rows import completed_units

    if not job.skip_done:
        return set()
    return completed_units(layout.point_dir(job.sweep_dir, job.point.id), job.env.world_size)


def _length(source: Any) -> int | None:
    try:
        return len(source)
    except TypeError:
        return None


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
        batch_size=given_loader.said_batch_size(batch_sampler) if batch_sampler is not None else batch_size,
        parts=parts,
        given={k: kwargs[k] for k in _POINT_OWNS if k in kwargs},
    )


def _from_dataloader(source: Any) -> _Recorded:
    """A DataLoader the script built itself: its dataset, batch size, collate_fn, worker_init_fn
    and its own sampler (not the default one that shuffle made) are what the rungs rebuild."""
    if not isinstance(source, DataLoader):
        raise TypeError(
            f"harness.probe.measure needs the script's DataLoader (made by probe.loader or "
            f"torch's DataLoader) under the harness; got {type_name(source)}"
        )
    # A stream (IterableDataset) takes no sampler: the one DataLoader gives it is PyTorch's
    # internal _InfiniteConstantSampler, not the script's.
    own_sampler = not isinstance(source.dataset, IterableDataset) and not isinstance(
        source.sampler, (RandomSampler, SequentialSampler)
    )
    kwargs: dict[str, Any] = {"collate_fn": source.collate_fn, "worker_init_fn": source.worker_init_fn}
    kwargs.update({k: getattr(source, k) for k in _POINT_OWNS if hasattr(source, k)})
    if own_sampler and source.batch_size is not None:
        kwargs["sampler"] = source.sampler
    if source.batch_size is None:
        kwargs["batch_sampler"] = source.batch_sampler
    return _record(source.dataset, source.batch_size, kwargs)


def _effective_point(job: ProbeJob, recorded: _Recorded, non_blocking: bool | None = None) -> Point:
    """The point as it runs: the batch size the spec gives, else the script's; the loader
    settings the spec names, and the script's own for the others (Point.script_keeps), with
    PyTorch's rules applied again. non_blocking, when the spec names none: `measure`'s
    argument, else whether the loader pins memory (as alone)."""
    point = job.point
    if point.workload.batch_size is None and recorded.batch_size is not None:
        # the script's own; where it says none (a batch sampler of its own without a
        # batch_size), None: the rows leave the cell empty as the log line says None
        point = replace(point, workload=replace(point.workload, batch_size=recorded.batch_size))
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


def _environ_job() -> ProbeJob | None:
    """The job HARNESS_PROBE names (None alone); one that cannot be read is one line on stderr
    and exit status 2, never a traceback (the variable decides where the probe writes)."""
    try:
        return ProbeJob.from_environ()
    except ProbeEnvironmentError as e:
        print(f"harness.probe: {e}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def _say_imported() -> None:
    """Under the harness, tell the job that the script imports the probe: a script that ends
    without reaching it is then told apart from one that lacks the probe's lines."""
    job = _environ_job()
    if job is not None:
        job.report("imported")


_say_imported()
