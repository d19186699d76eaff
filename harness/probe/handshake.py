"""The probe's handshake with the job that started the script (harness/execution/script.py):
the job read from HARNESS_PROBE, what the probe tells it (imported, reached, the settings this
rank runs with, checked, done), the script's own ranks refused, the units every rank already
has (the done set), and the process ended once the point is measured."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from dataclasses import asdict
from typing import Any
from urllib.parse import quote

from harness.config.plan import Point
from harness.execution.probe_job import ENDING, ProbeEnvironmentError, ProbeJob
from harness.exits import leave_objects_to_the_exit
from harness.probe.loop_settings import settings_of


def environ_job() -> ProbeJob | None:
    """The job HARNESS_PROBE names (None alone); one that cannot be read is one line on stderr
    and exit status 2, never a traceback (the variable decides where the probe writes)."""
    try:
        return ProbeJob.from_environ()
    except ProbeEnvironmentError as e:
        print(f"harness.probe: {e}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def this_job() -> ProbeJob | None:
    """This process's job (None alone). A process the harness did not start as the point's
    rank is refused (own_ranks). `harness plan`'s check run goes on through the loaders and
    stops at `measure` (checked)."""
    job = environ_job()
    if job is None:
        return None
    refused = own_ranks(job)
    if refused:
        refuse(
            job,
            f"{refused}: under the harness every rank is a process the harness starts with "
            "torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK for the "
            "device): launch no ranks yourself (no mp.spawn, no --multiprocessing-distributed) and "
            "join with init_method='env://' (or probe.init_distributed())",
        )
    job.report("reached")
    return job


def own_ranks(job: ProbeJob) -> str:
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


def refuse(job: ProbeJob, why: str) -> None:
    """One line, a failed row for every unit of this rank, exit status 2 (`harness plan`'s
    check run: its refusal, check_refusal)."""
    line = f"harness.probe: {why}"
    print(line, file=sys.stderr, flush=True)
    if not job.check:
        from harness.execution.point import open_point

        open_point(job.point, job.sweep_dir, job.env, job.skip_done).fail_missing(line)
    raise SystemExit(2)


def checked(job: ProbeJob) -> None:
    """`harness plan`'s check run ends here, at the script's loop: it parsed its flags and
    built its loaders (probe.loader's with the point's settings), and it neither trains nor
    validates nor saves. os._exit: no `finally` or atexit of the script's runs (a checkpoint)."""
    job.report("reached")
    job.report("checked")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def report_settings(job: ProbeJob, point: Point) -> dict[str, Any]:
    """Tell the job the settings this rank runs with (the last said is the one)."""
    ran = asdict(settings_of(point))
    job.report("settings:" + json.dumps(ran, separators=(",", ":")))
    return ran


def done(job: ProbeJob) -> set[tuple[str, int]]:
    """The units every rank of the point has a row for (a resumed point skips them)."""
    from harness_schema import layout
    from harness_schema.rows import completed_units

    if not job.skip_done:
        return set()
    return completed_units(layout.point_dir(job.sweep_dir, job.point.id), job.env.world_size)


def end(job: ProbeJob, why: str) -> None:
    """The point is measured and its rows written: the script ends here, status 0. The job is
    told why first (`ending:`): where a framework's teardown raises over the probe's SystemExit
    (its own error then ends the process), the failed rows name the probe's reason, not that
    error (script_end.Ended.reason)."""
    job.report(ENDING + quote(why, safe=""))
    sys.stdout.flush()
    sys.stderr.flush()
    # The script's objects left to the exit, not walked by Python's last collection (a second
    # or more with torch and a framework loaded: harness/exits.py); its `finally` and
    # `with` blocks still run as the SystemExit unwinds.
    leave_objects_to_the_exit()
    raise SystemExit(0)


def say_imported() -> None:
    """Under the harness, tell the job that the script imports the probe: a script that ends
    without reaching it is then told apart from one that lacks the probe's lines."""
    job = environ_job()
    if job is not None:
        job.report("imported")
    if job is not None and job.check:
        from harness.probe import check_run

        check_run.install(job)  # a framework's validation before the loop, skipped
