"""A point measured in the script's own loop (`measure` under the harness): the point's rungs
from `runner.measure_point`, opened on this rank with its meta and one line saying its
settings; then untimed batches up to the length announced, and the process ended."""

from __future__ import annotations

import copy as copying
import logging
import sys
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch

from harness.config.plan import Point
from harness.execution import dataloader, given_loader, ladder, sample_cache, termination
from harness.execution.loop_length import CLOSING, batches_per_loop
from harness.execution.probe_job import ProbeJob
from harness.probe import recording, session
from harness.probe.handshake import done, end, report_settings
from harness.probe.yielded import Batches, Copy, mover
from harness.sources import recorded as records
from harness.sources.length import length
from harness.sources.of_point import of_point
from harness.sources.recorded import Recorded

log = logging.getLogger("harness.probe")  # the probe's one logger, as a script's logging names it


@dataclass(frozen=True, kw_only=True, slots=True)
class How:
    """How `measure` was asked to copy, and whether the script goes on after the point."""

    device: torch.device
    memory_format: Any
    copy: Copy | None
    keep_running: bool


def harnessed(
    job: ProbeJob, source: Any, how: How, count: Callable[[Any], int], non_blocking: bool | None
) -> Iterator[Any]:
    if session.state.measured:
        if not how.keep_running:
            end(job, AGAIN)
        log.info("harness.probe: the point is measured; this loop gets no batch")
        return Batches(iter(()), lambda: 0)
    if session.state.pending is not None:  # an iter() that took no batch: it only looked
        session.state.pending.retire(RETIRED)
    made = recording.probe_record(source)  # probe.loader's loader, or a library's prepared one of it
    if made is not None:
        made = recording.sharded_as_prepared(made, source)
    given = None if made is not None else recording.given(source, job)
    recorded = made or (records.from_given(given) if given else records.from_dataloader(source))
    point = recording.effective_point(job, recorded, non_blocking)
    if given is not None:
        point = replace(
            point,
            # its own batch size, where it says one (None: an empty cell, not the spec's)
            workload=replace(point.workload, batch_size=recorded.batch_size),  # type: ignore[arg-type]
            loader=replace(given.recorded.loader_settings(), non_blocking=point.loader.non_blocking),
        )
    announced = batches_per_loop(point, done(job))
    own = length(source)  # probe.loader's: already its loop_length
    if made is None:
        recording.say_length(own, announced)
    said = recording.loop_length(announced, own)
    batches = Batches(_point_batches(job, recorded, point, how, count, announced, given), lambda: said)
    session.state.pending = batches
    return batches


AGAIN = "a probe.measure after the point was measured: the point is whole, the script ends there"
"""Why the probe ends the script at a later `measure` (an epoch after the point's)."""
MEASURED = "the point is measured and its rows written: the script ends there"
"""Why the probe ends the script when its loop asks for the batch after the last."""
RETIRED = (
    "harness.probe: this probe.measure(...) was replaced by a later one before it yielded a batch "
    "(a second iter() before any batch is taken is not a new pass): iterate the latest"
)


def _point_batches(
    job: ProbeJob,
    recorded: Recorded,
    point: Point,
    how: How,
    count: Callable[[Any], int],
    announced: int,
    given: given_loader.GivenLoader | None = None,
) -> Generator[Any, None, None]:
    session.state.measured, session.state.pending = True, None  # its first batch is asked for
    opened, device = _opened(job, recorded, point, how.device, given)
    if opened is None:
        return _finish(job, how)
    host: list[Any] = [None]  # the last batch as the loader gave it: the untimed batches' source
    move = mover(device, how.memory_format, how.copy, point.loader.non_blocking)

    def copy(batch: Any) -> Any:
        host[0] = batch
        return move(batch)

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
            yield move(copying.deepcopy(host[0]) if device.type == "cpu" else host[0])
    except GeneratorExit:
        return None  # the loop stopped at len(loader): the point is whole
    return _finish(job, how)


def _measured(
    job: ProbeJob,
    opened: Any,
    recorded: Recorded,
    device: torch.device,
    copy: Callable[[Any], Any],
    count: Callable[[Any], int],
    given: given_loader.GivenLoader | None = None,
) -> Generator[Any, None, int]:
    """The point's rungs from measure_point; the batches it yielded."""
    from harness.execution.runner import measure_point, open_rank

    where = dataloader.Placement(device=device, rank=job.env.rank, world_size=job.env.world_size)
    point = opened.point
    rank = open_rank(
        opened,
        source=recorded.source(point, where) if given is None else of_point(point, where, given=given),
        device=device,
        to_device=copy,
        count=count,
        clock=session.clock,
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
    recorded: Recorded,
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
        opened.rows.transform_names = sample_cache.transform_names(recorded.dataset)
    except Exception as e:
        opened.fail_all(e)
        return None, device
    return opened, device


def _say(
    job: ProbeJob, point: Point, recorded: Recorded, given: given_loader.GivenLoader | None = None
) -> None:
    """The settings this rank runs with, once: on the script's stderr (its log), and to the
    job, whose failed rows then record them too (script.account)."""
    ran = report_settings(job, point)
    kept = [k for k in point.script_keeps if k in recorded.own.known or k == "non_blocking"]
    own = f" (the script's own: {', '.join(kept)})" if kept else ""
    if given is not None:
        own = (
            f" (measured as given: {given.name} is not torch's DataLoader, so the point's settings "
            "cannot be swapped into it; these are its own, empty where it does not say)"
        )
    said = ", ".join(f"{k}={v}" for k, v in ran.items())
    print(f"harness.probe: point {point.id} rank {job.env.rank}: {said}{own}", file=sys.stderr, flush=True)


def _any_batch(recorded: Recorded, point: Point, device: torch.device) -> Any:
    """A batch for the untimed ones where the point yielded none (every rung failed or was
    done): the loader's first, or None where it has none."""
    try:
        where = dataloader.Placement(device=device)
        stream = ladder.build_stream(
            "host_batch",
            recorded.dataset,
            point.loader,
            recording.batch_size_of(point, recorded),
            where,
            recorded.parts,
            timeout_s=point.limits.batch_timeout_s,
        )
        return stream.next()
    except Exception as e:
        log.warning("harness.probe: no batch for the rest of the loop: %s", e)
        return None


def _finish(job: ProbeJob, how: How) -> None:
    if not how.keep_running:
        end(job, MEASURED)
