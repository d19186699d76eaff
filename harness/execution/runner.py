"""run_point: what every rank does for one point (build the workload, measure each rung, write rows).

A failure is recorded, not raised: a workload that cannot be built gives a failed row for each
rung; a rung that crashes (a worker dies, a dataset raises) gives a failed row and the next
rung still runs. A rung the dataset cannot serve gives a skipped row saying why.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import IterableDataset

from harness.adapters import registry as adapters
from harness.config.plan import Point
from harness.config.stream_shards import declared_shards_of
from harness.execution import (
    dataloader,
    given_loader,
    ladder,
    loader_stream,
    peer_failure,
    sample_cache,
    termination,
    worker_deaths,
)
from harness.execution.batches import count_samples
from harness.execution.device import choose_device, device_sync, peak_memory_gb, reset_peak_memory
from harness.execution.dist import DistEnv, agreement, barrier, largest
from harness.execution.loop import capacity_loop, drive, window
from harness.execution.point import OpenPoint, PointOutcome, one_line, open_point
from harness.execution.progress import Progress
from harness.execution.record import RowMaker, now
from harness.execution.steady import most_said
from harness.execution.train_step import TrainStep
from harness.execution.waiting import watched
from harness.execution.workload import build_workload, loader_parts
from harness.naming import type_name
from harness.sampling.host import job_memory_limit_bytes, process_tree_memory_bytes
from harness.sampling.timeline import Phase, RankSampler
from harness.sampling.timeline_file import TimelineFile, timeline_name
from harness.sources.base import LoaderSource, Stream
from harness.sources.length import length
from harness.sources.of_point import of_point
from harness.workloads.emulated import one_host_thread
from harness_schema import rows as results
from harness_schema import rungs as rung_names
from harness_schema.atomic import CannotWrite

log = logging.getLogger(__name__)


def run_point(
    point: Point,
    sweep_dir: Path,
    *,
    env: DistEnv | None = None,
    skip_done: bool = True,
) -> PointOutcome:
    """The harness's own workload and train step, through the same rungs and window as a
    user's script under `harness.probe` (`measure_point`)."""
    env = env or DistEnv.from_environ()
    if point.workload.script is not None:  # the user's own script measures through the probe
        from harness.execution.script import run_script

        return run_script(point, sweep_dir, env=env, skip_done=skip_done)
    opened = open_point(point, sweep_dir, env, skip_done)
    try:
        device = choose_device(point.workload.device, env.local_rank, env.local_world_size)
        opened.start(device)
        where = dataloader.Placement(device=device, rank=env.rank, world_size=env.world_size)
        dataset, step = build_workload(point, device, distributed=env.distributed, where=where)
        parts = loader_parts(point.workload)
        given = _given(opened, dataset)
        dataset = given.dataset if given is not None else dataset
        opened.rows.transform_names = sample_cache.transform_names(dataset)
    except CannotWrite:
        raise  # the disk, not the point: the sweep stops with one line (cli.py)
    except Exception as e:
        return opened.fail_all(e)
    rank = open_rank(
        opened,
        source=of_point(point, where, dataset=dataset, parts=parts, given=given),
        device=device,
        to_device=step.to_device,
        count=step.count,
        on_rung=step.input_shapes.clear,
        shapes=lambda: len(step.input_shapes),
    )
    # Under DDP the step holds the gradients' all-reduce: a rank waits there for a lingering one.
    compute = watched("the train step's all-reduce", step.compute) if env.distributed else step.compute
    with one_host_thread(point.workload.model):
        outcome = drive(measure_point(rank), compute)
    if point.profile is not None and not outcome.failed:
        _profile(point, dataset, step, rank, opened.path / "profile")
    return outcome


def _given(opened: OpenPoint, source: Any) -> given_loader.GivenLoader | None:
    """A factory's loader, whose rows from now on record the settings it really ran with."""
    if not isinstance(source, given_loader.GivenLoader):
        return None
    opened.rows.point = dataclasses.replace(opened.point, loader=source.recorded.loader_settings())
    opened.rows.loader_given = given_loader.loader_given(source.loader, whole_on=source.whole_on)
    return source


@dataclass(frozen=True, kw_only=True, slots=True)
class Rank:
    """What this rank measures with: its rows, data, copy, placement, sampler and collectives."""

    opened: OpenPoint
    source: LoaderSource
    """Where each rung's batches come from (harness/sources/): the DataLoader built from the
    spec, a loader the harness was given, or a script's loader recorded by the probe."""
    to_device: Callable[[Any], Any]
    """The copy call the window times with next(): the harness's TrainStep.to_device, or the
    generic copy of any batch structure for a user's loop (harness.execution.batches)."""
    count: Callable[[Any], int]
    """Samples in a batch (batches.count_samples, or the user's hook)."""
    on_rung: Callable[[], None]
    shapes: Callable[[], int | None]
    """Distinct input shapes seen in the rung (None where nobody looks)."""
    where: dataloader.Placement
    sampler: RankSampler
    agree: Callable[[bool], bool]
    barrier: Callable[[], None]
    flush: Callable[[], None]
    """Writes the timeline so far: after each rung, so that a rank torn down mid-point (a
    collective's watchdog, a node lost) leaves its samples up to its last rung."""
    largest: Callable[[int], int] = lambda count: count
    """This rank's count -> the ranks' largest (a collective under DDP; see `agree`)."""
    clock: Callable[[], float] = time.perf_counter
    """The windows' clock: a user's loop under the probe pauses it for its own work
    (`probe.untimed`)."""
    sizes: dict[str, Any] = field(default_factory=dict)
    """What the caching what-if needs, found once per rank: each cached rung's bytes a sample,
    the job's memory limit."""

    @property
    def dataset(self) -> Any:
        """The data set the rows and the caching what-if read (the source's)."""
        return self.source.dataset

    @property
    def point(self) -> Point:
        return self.opened.point

    @property
    def rows(self) -> RowMaker:
        return self.opened.rows


def open_rank(
    opened: OpenPoint,
    *,
    source: LoaderSource,
    device: torch.device,
    to_device: Callable[[Any], Any],
    count: Callable[[Any], int] = count_samples,
    on_rung: Callable[[], None] = lambda: None,
    shapes: Callable[[], int | None] = lambda: None,
    clock: Callable[[], float] = time.perf_counter,
) -> Rank:
    """What this rank measures with, its sampler and its timeline (not started yet)."""
    point, env = opened.point, opened.env
    sampler = RankSampler(
        hz=point.sampler.hz, host=point.sampler.host, gpu=point.sampler.gpu, device=device, rank=env.rank
    )
    # A loader that is not a DataLoader may work in threads of this process.
    sampler.threads_as_loader(source.in_threads())
    # A requeued or resumed point appends to the timeline of its earlier runs (TimelineFile).
    timeline = TimelineFile(opened.path / timeline_name(env.rank), keep_earlier=opened.skip_done)
    return Rank(
        opened=opened,
        source=source,
        to_device=to_device,
        count=count,
        on_rung=on_rung,
        shapes=shapes,
        where=dataloader.Placement(device=device, rank=env.rank, world_size=env.world_size),
        sampler=sampler,
        agree=agreement(env, device.type),
        largest=largest(env, device.type),
        barrier=barrier(env),
        flush=lambda: timeline.write(sampler) if sampler.enabled else None,
        clock=clock,
    )


def measure_point(rank: Rank) -> Generator[Any, None, PointOutcome]:
    """Every rung and repeat of the point not done yet, each through the one timed window,
    yielding every batch (on the device) to the train step of whoever drives it: `run_point`
    with the harness's step, or a user's own loop through `harness.probe`."""
    rows: list[results.RungRow] = []
    point = rank.point
    progress = Progress(point.id, rank.opened.env.rank, point.measure.repeats, point.run_pass)
    rank.sampler.start()
    progress.start()
    try:
        yield from _run_rungs(rank, rows, progress)
    finally:
        progress.stop()
        rank.sampler.stop()
        rank.flush()
    return PointOutcome.of(rank.point, rows)


def _run_rungs(rank: Rank, rows: list[results.RungRow], progress: Progress) -> Generator[Any, None, None]:
    env, point, opened = rank.opened.env, rank.point, rank.opened
    stop_reason = ""
    # Repeats outermost (ABCABC, not AABBCC): a slow spell of the machine then lands on
    # different rungs in different repeats, and shows up in the spread instead of in one rung.
    for repeat in range(point.measure.repeats):
        for rung in point.rungs:
            if (rung, repeat) in opened.done:
                continue
            if stop_reason:
                row = rank.rows.row(rung, repeat, status="failed", error=stop_reason)
            else:
                progress.at(rung, repeat)
                row = yield from _measure_rung(rank, rung, repeat)
                if row.status == "failed" and env.distributed:
                    # The other ranks may be inside a collective this rank left: the process
                    # group is no longer in step, so no further rung of this point can be.
                    # Told in the store: a peer's row says the first rank's error.
                    row.error = peer_failure.told(point.id, env.rank, row.error)
                    stop_reason = f"not run: {rung} failed on rank {env.rank} of a distributed point"
            opened.writer.append(row)
            rows.append(row)
            rank.flush()


def _measure_rung(rank: Rank, rung: str, repeat: int) -> Generator[Any, None, results.RungRow]:
    """The rung's row. A DataLoader worker's death raises only where the rung asks its loader
    for a batch (worker_deaths): never in the failure's handling below, nor in the close."""
    with worker_deaths.watched():
        return (yield from _rung(rank, rung, repeat))


def _rung(rank: Rank, rung: str, repeat: int) -> Generator[Any, None, results.RungRow]:
    point = rank.point
    started = now()
    phases = _Phases(rank.sampler, f"{rung}/{repeat}")
    stream: Stream | None = None
    died = False
    rank.on_rung()
    try:
        stream = _stream(rank, rung)
        reset_peak_memory(rank.where.device)
        times = yield from _window(rank, stream, phases)
        peaks = peak_memory_gb(rank.where.device)
        # Taken while the workers are still alive: what the loader really holds.
        memory_gb = process_tree_memory_bytes() / 1e9
        capacity = _capacity(rank, rung, stream, phases, times.training_time)
        idle = _loader_facts(rank, rung, stream)
    except sample_cache.RungUnavailable as e:
        log.warning("point %s, rung %s skipped: %s", point.id, rung, e)
        return rank.rows.row(rung, repeat, status="skipped", error=str(e), started=started)
    except Exception as e:
        failure = worker_deaths.cause(e)
        died = worker_deaths.is_death(failure)
        try:
            return _failed(rank, rung, repeat, failure, started)
        finally:
            # Its traceback holds this generator's frame: kept, the cycle would keep the frames
            # of the loader's iterator, and so its workers, alive until a garbage collection.
            del failure
    finally:
        phases.close()
        if (died or worker_deaths.seen()) and isinstance(stream, loader_stream.LoaderStream):
            # A worker that died as it sent may hold the result queue's lock: the others then
            # cannot exit, and torch's shutdown waits 5 s on each before it terminates them.
            loader_stream.kill_workers(stream.iterator)
        if stream is not None:
            stream.close()
    row = rank.rows.measured(rung, repeat, times, started=started)
    row.cpu_memory_gb, row.loader_capacity = memory_gb, capacity
    row.max_memory_allocated_gb, row.max_memory_reserved_gb = peaks
    row.epoch_steps, row.idle_workers = stream.epoch_steps, idle
    _describe(row, rank, rung, phases)
    log.info(
        "point %s rung %s repeat %d: %.1f samples/s, loading %.4f s/step",
        point.id,
        rung,
        repeat,
        row.samples_per_s or 0.0,
        times.loading_time,
    )
    return row


def _window(
    rank: Rank,
    stream: Stream,
    phases: _Phases,
) -> Generator[Any, None, Any]:
    """The rung's measured window (loop.window) with the point's measure and the rank's parts."""
    measure = rank.point.measure
    return (
        yield from window(
            stream,
            to_device=rank.to_device,
            count=rank.count,
            warmup_steps=measure.warmup_steps,
            steps=measure.steps,
            seconds=measure.seconds,
            max_seconds=measure.max_seconds,
            max_seconds_said=most_said(rank.point.adjustments),
            stock=stream.stock,
            sync=device_sync(rank.where.device),
            agree=rank.agree,
            largest=rank.largest,
            barrier=rank.barrier,
            mark=phases.mark,
            clock=rank.clock,
        )
    )


def _describe(row: results.RungRow, rank: Rank, rung: str, phases: _Phases) -> None:
    """The row's facts beside its timings: the caching what-if's sizes, the data's kind and
    shapes, and the sampler's summary of the measured phase."""
    row.cached_sample_bytes, row.dataset_samples, row.memory_limit_gb = _caching_sizes(rank, rung)
    row.dataset_stream = isinstance(rank.dataset, IterableDataset)
    row.input_shapes = rank.shapes()
    if phases.measured is not None:
        for key, value in phases.measured.summary(samples=row.samples).items():
            setattr(row, key, value)


def _failed(rank: Rank, rung: str, repeat: int, e: Exception, started: str) -> results.RungRow:
    """The rung's failed row, unless a DataLoader worker died of the rank's own SIGTERM
    (preemption, scancel): then Terminated, and no row (harness/execution/termination.py)."""
    termination.reraise_if_terminated(e)
    log.error("point %s, rung %s failed: %s", rank.point.id, rung, one_line(e))
    log.debug("%s", traceback.format_exc())
    return rank.rows.row(rung, repeat, status="failed", error=one_line(e), started=started)


def _loader_facts(rank: Rank, rung: str, stream: Stream) -> int | None:
    """What the rung's loader knows before it is closed: the cached value's size (kept for the
    caching what-if), and its workers that made no batch (returned; None where there are none
    to count), said when some did not: the row's num_workers would otherwise overstate it. A
    loader the harness was given (given_loader.IterStream) tells neither."""
    if isinstance(stream, given_loader.IterStream):
        return None
    size = ladder.cached_value_bytes(stream)
    if size is not None:
        rank.sizes[rung] = size
    idle = stream.idle_workers() if isinstance(stream, loader_stream.LoaderStream) else None
    if idle:
        workers = rank.point.loader.num_workers
        log.warning("point %s, rung %s: %s", rank.point.id, rung, idle_text(idle, workers, rank.dataset))
    return idle


def idle_text(idle: int, workers: int, dataset: Any) -> str:
    """What workers that made no batch mean, and the fix, in the words of the dataset's kind.
    The fix's libraries are worded once, in the verdict's SHARD_FIX, which the report says too;
    imported here, on this warning's path alone, so that a rank starts without pandas."""
    from analysis.ladder.verdict_text import SHARD_FIX

    said = f"{idle} of {workers} DataLoader workers delivered no batch"
    if not isinstance(dataset, IterableDataset):
        return f"{said}: fewer batches per epoch than workers"
    shards = declared_shards_of(dataset)
    count = f" ({type_name(dataset)} has {shards} shard{'s' * (shards != 1)})" if shards is not None else ""
    return (
        f"{said}: the stream has fewer shards than readers{count}, so the row's num_workers="
        f"{workers} worked as {workers - idle}; give the stream at least num_workers × ranks shards "
        f"({SHARD_FIX})"
    )


def _stream(rank: Rank, rung: str) -> Stream:
    """The rung's stream of batches from this rank's loader source, each wait for the workers
    bounded by limits.batch_timeout_s."""
    return rank.source.stream(rung)


def _caching_sizes(rank: Rank, rung: str) -> tuple[int | None, int | None, float]:
    """What caching this rung's stage output would take (the verdict's what-if): its bytes a
    sample (sized by the reader that produced it: _loader_facts), the data set's samples, the
    job's memory limit (GB)."""
    if "memory_limit_gb" not in rank.sizes:
        rank.sizes["memory_limit_gb"] = job_memory_limit_bytes() / 1e9
    return (
        rank.sizes.get(rung),
        dataset_samples(rank.dataset, rank.opened.env.world_size),
        rank.sizes["memory_limit_gb"],
    )


def dataset_samples(dataset: Any, world_size: int) -> int | None:
    """The data set's samples, without reading it: its adapter's `length`, else a map-style one's
    len(), a stream's len() (the rank's share: it shards itself) times the ranks. A stream is
    never read in the rank's process between rungs (issue 27: a fork inherited held locks)."""
    said = adapters.first(lambda adapter: adapter.length(dataset, world_size))
    if said is not None:
        return said
    samples = length(dataset)  # None: no __len__, or a stream's that says it has none
    if samples is None:
        return None
    return samples * world_size if isinstance(dataset, IterableDataset) else samples


def _capacity(
    rank: Rank,
    rung: str,
    stream: Stream,
    phases: _Phases,
    window_s: float,
) -> float | None:
    """The loader alone, right after the rung, on the same workers: batches per second, over
    at least the rung's window (`window_s`), so a fast loader's figure has the same exposure
    to the machine's noise as the rung's own."""
    measure = rank.point.measure
    wanted = measure.loader_capacity
    if wanted == "auto":
        wanted = bool({"device_batch", "host_batch"} & set(rank.point.rungs))
    if not wanted or not rung_names.is_sample_level(rung):
        return None
    phases.mark("capacity")
    capacity = capacity_loop(
        stream, steps=measure.steps, stock=stream.stock, min_seconds=window_s, barrier=rank.barrier
    )
    phases.mark("end")
    return capacity


def _profile(point: Point, dataset: Any, step: TrainStep, rank: Rank, out_dir: Path) -> None:
    """torch.profiler over the profiled rung, in a pass of its own after the measurements, so
    no measured step carries the profiler's overhead. A failure costs the trace, not the point."""
    from harness.execution.profiling import ProfileConfig, TraceCapture

    assert point.profile is not None
    config = ProfileConfig(**asdict(point.profile))
    stream = None
    with worker_deaths.watched():
        try:
            stream = _stream(rank, config.rung)
            with TraceCapture(config, out_dir, rank=rank.opened.env.rank) as capture:
                for _ in range(config.steps):
                    step(stream.next())
                    capture.step()
            device_sync(rank.where.device)()
        except Exception as e:
            log.warning("point %s: profiling %s failed: %s", point.id, config.rung, one_line(e))
        finally:
            if stream is not None:
                stream.close()


class _Phases:
    """Marks a rung's warmup and measured steps on the sampler's timeline."""

    def __init__(self, sampler: RankSampler, name: str) -> None:
        self.sampler, self.name = sampler, name
        self.open: Phase | None = None
        self.measured: Phase | None = None

    def mark(self, region: str) -> None:
        if self.open is not None:
            # No forced memory read between warmup and measure: with many workers it takes
            # long enough (tens to hundreds of ms) to be felt by the first measured steps.
            self.open.end(memory=region != "measure")
            self.open = None
        if region == "warmup":
            self.open = self.sampler.begin(f"{self.name}/warmup")
        elif region == "measure":
            self.open = self.measured = self.sampler.begin(self.name)
        elif region == "capacity":
            self.open = self.sampler.begin(f"{self.name}/capacity")

    def close(self) -> None:
        if self.open is not None:
            self.open.end()
            self.open = None
