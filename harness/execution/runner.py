"""run_point: what every rank does for one point (build the workload, measure each rung, write rows).

A failure is recorded, not raised: a workload that cannot be built gives a failed row for each
rung; a rung that crashes (a worker dies, a dataset raises) gives a failed row and the next
rung still runs. A rung the dataset cannot serve gives a skipped row saying why.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.config import rungs as rung_names
from harness.config.plan import Point
from harness.execution import ladder
from harness.execution.dist import DistEnv, agreement, barrier, init_process_group
from harness.execution.loop import capacity_loop, timed_loop
from harness.execution.meta import collect_meta
from harness.execution.record import RowMaker, now
from harness.execution.train_step import (
    TrainStep,
    choose_device,
    device_sync,
    peak_memory_gb,
    reset_peak_memory,
)
from harness.sampling.host import process_tree_memory_bytes
from harness.sampling.timeline import Phase, RankSampler, TimelineFile, timeline_name
from harness.storage import layout
from harness.storage import rows as results
from harness.workloads.build import build_dataset, build_model

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class PointOutcome:
    point_id: str
    ok: int
    failed: int
    skipped: int
    rows: tuple[results.RungRow, ...]


def build_workload(point: Point, device: Any, *, distributed: bool = False) -> tuple[Any, TrainStep]:
    """The point's dataset and its train step (model, loss, optimizer, precision, copy)."""
    w = point.workload
    dataset = build_dataset(w)
    normalize = dataset.to_uint8() if w.gpu_normalize else None  # type: ignore[attr-defined]
    model = build_model(w, int(getattr(dataset, "num_classes", 10)))
    step = TrainStep(
        model,
        device,
        non_blocking=point.loader.non_blocking,
        amp=w.amp,
        compile=w.compile,
        distributed=distributed,
        channels_last=w.channels_last,
        set_to_none=w.zero_grad_set_to_none,
        normalize=normalize,
    )
    return dataset, step


def run_point(
    point: Point,
    sweep_dir: Path,
    *,
    env: DistEnv | None = None,
    skip_done: bool = True,
) -> PointOutcome:
    env = env or DistEnv.from_environ()
    point_path = layout.point_dir(sweep_dir, point.id)
    point_path.mkdir(parents=True, exist_ok=True)
    writer, done = _writer(point_path, env, skip_done)
    context = RowMaker(point, sweep_dir.name, env)
    rows: list[results.RungRow] = []
    try:
        device = choose_device(point.workload.device, env.local_rank, env.local_world_size)
        context.device = str(device)
        init_process_group(env, device.type)
        layout.write_meta(point_path, env.rank, collect_meta(device, env))
        dataset, step = build_workload(point, device, distributed=env.distributed)
        context.transform_names = ladder.transform_names(dataset)
    except Exception as e:
        log.error("point %s: %s", point.id, _one_line(e))
        log.debug("%s", traceback.format_exc())
        for rung in point.rungs:
            for repeat in range(point.measure.repeats):
                if (rung, repeat) not in done:
                    row = context.row(rung, repeat, status="failed", error=_one_line(e))
                    writer.append(row)
                    rows.append(row)
        return _outcome(point, rows)

    sampler = RankSampler(
        hz=point.sampler.hz, host=point.sampler.host, gpu=point.sampler.gpu, device=device, rank=env.rank
    )
    # A requeued or resumed point appends to the timeline of its earlier runs (TimelineFile).
    timeline = TimelineFile(point_path / timeline_name(env.rank), keep_earlier=skip_done)
    rank = _Rank(
        rows=context,
        dataset=dataset,
        step=step,
        where=ladder.Placement(device=device, rank=env.rank, world_size=env.world_size),
        sampler=sampler,
        agree=agreement(env, device.type),
        barrier=barrier(env),
        flush=lambda: timeline.write(sampler) if sampler.enabled else None,
    )
    sampler.start()
    try:
        _run_rungs(rank, done, writer, rows)
        if point.profile is not None and not any(r.status == "failed" for r in rows):
            _profile(point, dataset, step, rank.where, point_path / "profile", env.rank)
    finally:
        sampler.stop()
        rank.flush()
    return _outcome(point, rows)


def _writer(
    point_path: Path, env: DistEnv, skip_done: bool
) -> tuple[results.RankWriter, set[tuple[str, int]]]:
    """The rank's row writer, and the units (rung, repeat) that are done already."""
    writer = results.RankWriter(point_path, env.rank)
    done: set[tuple[str, int]] = set()
    if skip_done and writer.path.exists():
        # A requeued or resumed point keeps what it measured and goes on with the rest. What
        # counts as done is what *every* rank finished, so that all ranks run the same rungs.
        writer.rows = [dict(r) for r in results.read_rows(writer.path)]
        done = results.completed_units(point_path, env.world_size)
    return writer, done


@dataclass(frozen=True, kw_only=True, slots=True)
class _Rank:
    """What this rank measures with: its rows, workload, placement, sampler and collectives."""

    rows: RowMaker
    dataset: Any
    step: TrainStep
    where: ladder.Placement
    sampler: RankSampler
    agree: Callable[[bool], bool]
    barrier: Callable[[], None]
    flush: Callable[[], None]
    """Writes the timeline so far: after each rung, so that a rank torn down mid-point (a
    collective's watchdog, a node lost) leaves its samples up to its last rung."""

    @property
    def point(self) -> Point:
        return self.rows.point


def _run_rungs(
    rank: _Rank, done: set[tuple[str, int]], writer: results.RankWriter, rows: list[results.RungRow]
) -> None:
    env, point = rank.rows.env, rank.point
    stop_reason = ""
    # Repeats outermost (ABCABC, not AABBCC): a slow spell of the machine then lands on
    # different rungs in different repeats, and shows up in the spread instead of in one rung.
    for repeat in range(point.measure.repeats):
        for rung in point.rungs:
            if (rung, repeat) in done:
                continue
            if stop_reason:
                row = rank.rows.row(rung, repeat, status="failed", error=stop_reason)
            else:
                row = _measure_rung(rank, rung, repeat)
                if row.status == "failed" and env.distributed:
                    # The other ranks may be inside a collective this rank left: the process
                    # group is no longer in step, so no further rung of this point can be.
                    stop_reason = f"not run: {rung} failed on rank {env.rank} of a distributed point"
            writer.append(row)
            rows.append(row)
            rank.flush()


def _measure_rung(rank: _Rank, rung: str, repeat: int) -> results.RungRow:
    point, step = rank.point, rank.step
    started = now()
    phases = _Phases(rank.sampler, f"{rung}/{repeat}")
    stream: ladder.LoaderStream | ladder.RepeatStream | None = None
    step.input_shapes.clear()
    try:
        stream = ladder.build_stream(rung, rank.dataset, point.loader, point.workload.batch_size, rank.where)
        reset_peak_memory(rank.where.device)
        times = timed_loop(
            stream,
            step.compute,
            to_device=step.to_device,
            warmup_steps=point.measure.warmup_steps,
            steps=point.measure.steps,
            stock=stream.stock,
            sync=device_sync(rank.where.device),
            agree=rank.agree,
            barrier=rank.barrier,
            mark=phases.mark,
        )
        peaks = peak_memory_gb(rank.where.device)
        # Taken while the workers are still alive: what the loader really holds.
        memory_gb = process_tree_memory_bytes() / 1e9
        capacity = _capacity(rank, rung, stream, phases)
    except ladder.RungUnavailable as e:
        log.warning("point %s, rung %s skipped: %s", point.id, rung, e)
        return rank.rows.row(rung, repeat, status="skipped", error=str(e), started=started)
    except Exception as e:
        log.error("point %s, rung %s failed: %s", point.id, rung, _one_line(e))
        log.debug("%s", traceback.format_exc())
        return rank.rows.row(rung, repeat, status="failed", error=_one_line(e), started=started)
    finally:
        phases.close()
        if stream is not None:
            stream.close()
    row = rank.rows.measured(rung, repeat, times, started=started)
    row.cpu_memory_gb, row.loader_capacity = memory_gb, capacity
    row.max_memory_allocated_gb, row.max_memory_reserved_gb = peaks
    row.epoch_steps = stream.epoch_steps
    row.input_shapes = len(step.input_shapes)
    if phases.measured is not None:
        for key, value in phases.measured.summary(samples=row.samples).items():
            setattr(row, key, value)
    log.info(
        "point %s rung %s repeat %d: %.1f samples/s, loading %.4f s/step",
        point.id,
        rung,
        repeat,
        row.samples_per_s or 0.0,
        times.loading_time,
    )
    return row


def _capacity(
    rank: _Rank, rung: str, stream: ladder.LoaderStream | ladder.RepeatStream, phases: _Phases
) -> float | None:
    """The loader alone, right after the rung, on the same workers: batches per second."""
    measure = rank.point.measure
    wanted = measure.loader_capacity
    if wanted == "auto":
        wanted = bool({"device_batch", "host_batch"} & set(rank.point.rungs))
    if not wanted or not rung_names.is_sample_level(rung):
        return None
    phases.mark("capacity")
    capacity = capacity_loop(stream, steps=measure.steps, stock=stream.stock, barrier=rank.barrier)
    phases.mark("end")
    return capacity


def _profile(
    point: Point, dataset: Any, step: TrainStep, where: ladder.Placement, out_dir: Path, rank: int
) -> None:
    """torch.profiler over the profiled rung, in a pass of its own after the measurements, so
    no measured step carries the profiler's overhead. A failure costs the trace, not the point."""
    from harness.execution.profiling import ProfileConfig, TraceCapture

    assert point.profile is not None
    config = ProfileConfig(**asdict(point.profile))
    stream = None
    try:
        stream = ladder.build_stream(config.rung, dataset, point.loader, point.workload.batch_size, where)
        with TraceCapture(config, out_dir, rank=rank) as capture:
            for _ in range(config.steps):
                step(stream.next())
                capture.step()
        device_sync(where.device)()
    except Exception as e:
        log.warning("point %s: profiling %s failed: %s", point.id, config.rung, _one_line(e))
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


def _outcome(point: Point, rows: list[results.RungRow]) -> PointOutcome:
    return PointOutcome(
        point_id=point.id,
        ok=sum(r.status == "ok" for r in rows),
        failed=sum(r.status == "failed" for r in rows),
        skipped=sum(r.status == "skipped" for r in rows),
        rows=tuple(rows),
    )


def _one_line(e: BaseException) -> str:
    """The error as one line for a CSV cell. A DataLoader worker's error carries the worker's
    whole traceback; its last line is the cause a user needs."""
    message = str(e)
    if "Original Traceback" in message:
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        message = f"{lines[0].rstrip('.')}: {lines[-1]}"
    text = " ".join(message.split())
    return f"{type(e).__name__}: {text}"[:500]
