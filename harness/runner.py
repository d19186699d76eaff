"""run_point: what every rank does for one point (build the workload, measure each rung, write rows).

A failure is recorded, not raised: a workload that cannot be built gives a failed row for each
rung; a rung that crashes (a worker dies, a dataset raises) gives a failed row and the next
rung still runs. A rung the dataset cannot serve gives a skipped row saying why.
"""

from __future__ import annotations

import json
import logging
import traceback
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness import ladder, results
from harness.dist import DistEnv, init_process_group
from harness.loop import LoopTimes, timed_loop
from harness.meta import collect_meta
from harness.plan import Point
from harness.sampling.host import process_tree_memory_bytes
from harness.sampling.timeline import Phase, RankSampler, timeline_name
from harness.train_step import TrainStep, choose_device, device_sync
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
    point_path = results.point_dir(sweep_dir, point.id)
    point_path.mkdir(parents=True, exist_ok=True)
    writer = results.RankWriter(point_path, env.rank)
    done: set[tuple[str, int]] = set()
    if skip_done and writer.path.exists():
        # A requeued or resumed point keeps what it measured and goes on with the rest. What
        # counts as done is what *every* rank finished, so that all ranks run the same rungs.
        writer.rows = [dict(r) for r in results.read_rows(writer.path)]
        done = results.completed_units(point_path, env.world_size)

    context = _Context(point, sweep_dir.name, env)
    rows: list[results.RungRow] = []
    try:
        device = choose_device(point.workload.device, env.local_rank)
        context.device = str(device)
        init_process_group(env, device.type)
        results.write_meta(point_path, env.rank, collect_meta(device, env))
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

    where = ladder.Placement(device=device, rank=env.rank, world_size=env.world_size)
    sampler = RankSampler(
        hz=point.sampler.hz, host=point.sampler.host, gpu=point.sampler.gpu, device=device, rank=env.rank
    )
    sampler.start()
    try:
        _run_rungs(context, point, done, dataset, step, where, sampler, writer, rows)
        if point.profile is not None and not any(r.status == "failed" for r in rows):
            _profile(point, dataset, step, where, point_path / "profile", env.rank)
    finally:
        sampler.stop()
        if sampler.enabled:
            sampler.write_timeline(point_path / timeline_name(env.rank))
    return _outcome(point, rows)


def _run_rungs(
    context: _Context,
    point: Point,
    done: set[tuple[str, int]],
    dataset: Any,
    step: TrainStep,
    where: ladder.Placement,
    sampler: RankSampler,
    writer: results.RankWriter,
    rows: list[results.RungRow],
) -> None:
    env = context.env
    stop_reason = ""
    # Repeats outermost (ABCABC, not AABBCC): a slow spell of the machine then lands on
    # different rungs in different repeats, and shows up in the spread instead of in one rung.
    for repeat in range(point.measure.repeats):
        for rung in point.rungs:
            if (rung, repeat) in done:
                continue
            if stop_reason:
                row = context.row(rung, repeat, status="failed", error=stop_reason)
            else:
                row = _measure_rung(context, rung, repeat, dataset, step, where, sampler)
                if row.status == "failed" and env.distributed:
                    # The other ranks may be inside a collective this rank left: the process
                    # group is no longer in step, so no further rung of this point can be.
                    stop_reason = f"not run: {rung} failed on rank {env.rank} of a distributed point"
            writer.append(row)
            rows.append(row)


def _measure_rung(
    context: _Context,
    rung: str,
    repeat: int,
    dataset: Any,
    step: TrainStep,
    where: ladder.Placement,
    sampler: RankSampler,
) -> results.RungRow:
    point = context.point
    started = _now()
    phases = _Phases(sampler, f"{rung}/{repeat}")
    stream: ladder.LoaderStream | ladder.RepeatStream | None = None
    step.input_shapes.clear()
    try:
        stream = ladder.build_stream(rung, dataset, point.loader, point.workload.batch_size, where)
        times = timed_loop(
            stream,
            step,
            warmup_steps=point.measure.warmup_steps,
            steps=point.measure.steps,
            sync=device_sync(where.device),
            mark=phases.mark,
        )
        # Taken while the workers are still alive: what the loader really holds.
        memory_gb = process_tree_memory_bytes() / 1e9
    except ladder.RungUnavailable as e:
        log.warning("point %s, rung %s skipped: %s", point.id, rung, e)
        return context.row(rung, repeat, status="skipped", error=str(e), started=started)
    except Exception as e:
        log.error("point %s, rung %s failed: %s", point.id, rung, _one_line(e))
        log.debug("%s", traceback.format_exc())
        return context.row(rung, repeat, status="failed", error=_one_line(e), started=started)
    finally:
        phases.close()
        if stream is not None:
            stream.close()
    row = context.row(rung, repeat, status="ok", times=times, memory_gb=memory_gb, started=started)
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


def _profile(
    point: Point, dataset: Any, step: TrainStep, where: ladder.Placement, out_dir: Path, rank: int
) -> None:
    """torch.profiler over the profiled rung, in a pass of its own after the measurements, so
    no measured step carries the profiler's overhead. A failure costs the trace, not the point."""
    from harness.profiling import ProfileConfig, TraceCapture

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

    def close(self) -> None:
        if self.open is not None:
            self.open.end()


class _Context:
    """The fields every row of a point shares."""

    def __init__(self, point: Point, sweep_id: str, env: DistEnv) -> None:
        self.point, self.sweep_id, self.env = point, sweep_id, env
        self.device = point.workload.device
        self.transform_names = ""

    def row(
        self,
        rung: str,
        repeat: int,
        *,
        status: str,
        error: str = "",
        times: LoopTimes | None = None,
        memory_gb: float | None = None,
        started: str | None = None,
    ) -> results.RungRow:
        p, w, ld = self.point, self.point.workload, self.point.loader
        samples = times.steps * w.batch_size if times else 0
        return results.RungRow(
            sweep_id=self.sweep_id,
            point_id=p.id,
            point_index=p.index,
            step=p.step,
            rung=rung,
            repeat=repeat,
            rank=self.env.rank,
            world_size=self.env.world_size,
            hostname=self.env.hostname,
            jobid=self.env.jobid,
            device=self.device,
            status=status,
            error=error,
            dataset=w.dataset,
            dataset_args=json.dumps(dict(w.dataset_args), sort_keys=True),
            model=w.model,
            model_args=json.dumps(dict(w.model_args), sort_keys=True),
            batch_size=w.batch_size,
            amp=str(w.amp).lower() if w.amp is False else str(w.amp),
            compile=w.compile,
            channels_last=w.channels_last,
            zero_grad_set_to_none=w.zero_grad_set_to_none,
            gpu_normalize=w.gpu_normalize,
            num_workers=ld.num_workers,
            persistent_workers=ld.persistent_workers,
            pin_memory=ld.pin_memory,
            non_blocking=ld.non_blocking,
            prefetch_factor=ld.prefetch_factor,
            drop_last=ld.drop_last,
            warmup_steps=p.measure.warmup_steps,
            steps=times.steps if times else 0,
            samples=samples,
            first_step_loading_time=times.first_step_loading_time if times else None,
            loading_time=times.loading_time if times else None,
            loading_time_median=times.loading_time_median if times else None,
            loading_time_total=sum(times.loading_times) if times else None,
            step_time=times.step_time if times else None,
            step_time_median=times.step_time_median if times else None,
            training_time=times.training_time if times else None,
            samples_per_s=samples / times.training_time if times else None,
            steps_per_s=times.steps / times.training_time if times else None,
            cpu_memory_gb=memory_gb,
            transform_names=self.transform_names,
            started_at=started or _now(),
            finished_at=_now(),
        )


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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
