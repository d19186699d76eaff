"""Sweeps on Slurm through submitit: one job array per submission, one point per array task.

The spec's `slurm` section becomes the keyword arguments of submitit's sbatch renderer, so
the script `harness plan` shows, the one `harness sbatch` writes and the one `harness submit`
sends are rendered by the same code. Slurm logs and submitit's pickles live under the sweep
folder (`<sweep>/slurm/`), never in the working directory.
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from harness.backends.base import BackendRefusal, no_announcement
from harness.backends.slurm_states import JobState
from harness.config.plan import Plan, Point
from harness.config.spec import SlurmConfig, Spec
from harness_schema.slurm_time import time_seconds

log = logging.getLogger(__name__)


class SubmissionError(RuntimeError):
    """sbatch refused the array; the message carries Slurm's own words."""


def sbatch_parameters(cfg: SlurmConfig, job_name: str) -> dict[str, Any]:
    """Keyword arguments for submitit's SlurmExecutor / sbatch renderer."""
    seconds = time_seconds(cfg.time)
    params: dict[str, Any] = {
        "job_name": job_name,
        "nodes": cfg.nodes,
        "ntasks_per_node": cfg.tasks_per_node,
        "time": max(1, math.ceil(seconds / 60)),
        "array_parallelism": cfg.array_parallelism,
        # Slurm signals this long before the limit so the job can requeue itself; never more
        # than a quarter of a short limit, or the signal would come at the start.
        "signal_delay_s": max(10, min(90, seconds // 4)),
    }
    if cfg.gpus_per_node:
        params["gres"] = f"gpu:{cfg.gpus_per_node}"  # the Jean Zay course's --gres=gpu:N (IDRIS-CNRS/DLO-JZ)
    for key in ("cpus_per_task", "mem", "partition", "account", "qos", "constraint"):
        value = getattr(cfg, key)
        if value is not None:
            params[key] = value
    if cfg.exclusive:
        params["exclusive"] = True
    if cfg.setup:
        params["setup"] = list(cfg.setup)
    additional: dict[str, Any] = {}
    if cfg.hint:
        additional["hint"] = cfg.hint
    additional.update(cfg.extra)
    if additional:
        params["additional_parameters"] = additional
    return params


def render_sbatch(cfg: SlurmConfig, job_name: str, folder: Path, command: str, count: int) -> str:
    """The sbatch script of an array of `count` tasks, as submitit writes it.

    Raises ValueError (listing the valid parameters) on a parameter sbatch does not know.
    """
    from submitit.slurm.slurm import _make_sbatch_string

    return str(
        _make_sbatch_string(
            command=command, folder=str(folder), map_count=count, **sbatch_parameters(cfg, job_name)
        )
    )


def submitit_command(folder: Path) -> str:
    """The command submitit puts in its scripts (SlurmExecutor._submitit_command_str)."""
    return " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(str(folder))])


def worker_command(sweep_dir: Path, python: str = sys.executable) -> str:
    sweep = shlex.quote(str(sweep_dir))
    return f"{shlex.quote(python)} -u -m harness.backends.worker {sweep} --index $SLURM_ARRAY_TASK_ID"


# A script kept in git (sbatch/) runs from a clone anywhere: every path in it is relative to the
# directory it is submitted from (the clone's root, Slurm's default working directory), and the
# sweep folder is made when the job runs, named after the array's job id.
PORTABLE_RESULTS = Path("results")
PORTABLE_PYTHON = "${HARNESS_PYTHON:-.venv/bin/python}"
"""The clone's venv unless the user names another Python (a cluster's PyTorch module)."""


def portable_sweep_dir(spec_name: str) -> str:
    """The sweep folder of a committed script's job, relative to the submit directory."""
    return f"{PORTABLE_RESULTS}/{spec_name}/sbatch-$SLURM_ARRAY_JOB_ID"


def render_portable_sbatch(
    cfg: SlurmConfig, job_name: str, spec_name: str, spec_path: Path, count: int
) -> str:
    """The standalone script of `harness sbatch --portable`: no absolute path, no sweep folder
    made in advance; each task makes the sweep from `spec_path` if no task has yet
    (`python -m harness.backends.worker SWEEP --spec SPEC`) and runs its point. Slurm logs go
    to results/ (kept in a clone by its README: Slurm does not create an --output folder)."""
    if spec_path.is_absolute():
        raise ValueError(f"{spec_path}: a committed script needs the spec's path relative to the clone")
    command = (
        f"{PORTABLE_PYTHON} -u -m harness.backends.worker {portable_sweep_dir(spec_name)} "
        f"--spec {shlex.quote(spec_path.as_posix())} --index $SLURM_ARRAY_TASK_ID"
    )
    # submitit makes the log folder absolute: render under a placeholder root, then drop it.
    placeholder = Path("/submit-dir")
    script = render_sbatch(cfg, job_name, placeholder / PORTABLE_RESULTS, command, count)
    script = script.replace(f"{placeholder}/", "")
    header = (
        f"# Written by `harness sbatch {spec_path.as_posix()} --portable`: do not edit, regenerate.\n"
        f"# Submit from the clone's root: sbatch {Path('sbatch') / (spec_path.stem + '.sbatch')}\n"
    )
    first, _, rest = script.partition("\n")  # after the #!/bin/bash line
    return f"{first}\n{header}{rest}"


def job_name(spec_name: str) -> str:
    """The Slurm job name of a spec's sweeps (what squeue and sacct show)."""
    return f"harness-{spec_name}"


def portable_script(spec_path: Path) -> tuple[str, int]:
    """The committed script of a spec (sbatch/<spec file's stem>.sbatch) and its point count;
    raises SpecError on a bad spec, ValueError on an sbatch parameter sbatch does not know."""
    from harness.config.plan import expand
    from harness.config.spec import load_spec

    plan = expand(load_spec(spec_path))
    name = plan.spec.name
    return render_portable_sbatch(plan.spec.slurm, job_name(name), name, spec_path, len(plan.points)), len(
        plan.points
    )


def create_sweep_once(plan: Plan, sweep_dir: Path, world_size: int) -> Path:
    """The sweep folder of a portable script's job, made by whichever task comes first: made
    aside, then renamed into place (atomic on one file system), so that a task never reads a
    half-written plan; the others find it made."""
    from harness.storage.sweep import create_sweep

    if (sweep_dir / "plan.json").exists():
        return sweep_dir
    aside = f".{sweep_dir.name}.{socket.gethostname()}.{os.getpid()}"
    made = create_sweep(
        plan, sweep_dir.parent.parent, backend="sbatch", world_size=world_size, sweep_id=aside
    )
    (made / "slurm").mkdir()
    try:
        made.rename(sweep_dir)
    except OSError:  # another task's folder is in place (rename onto a non-empty folder fails)
        shutil.rmtree(made, ignore_errors=True)
    return sweep_dir


def write_standalone_script(plan: Plan, results_root: Path, output: Path) -> tuple[Path, Path]:
    """`harness sbatch`: the plan's sweep made under `results_root` (recorded as `sbatch`,
    resumed on Slurm) and its script, which runs worker.py, written into `output`; the
    script's path and the sweep's folder."""
    from harness.storage.sweep import create_sweep
    from harness_schema.atomic import atomic_write_text

    sweep_dir = create_sweep(plan, results_root, backend="sbatch", world_size=plan.spec.slurm.world_size)
    folder = standalone_folder(sweep_dir)
    folder.mkdir()
    script = render_sbatch(
        plan.spec.slurm, job_name(plan.spec.name), folder, worker_command(sweep_dir), len(plan.points)
    )
    target = output / f"{plan.spec.name}-{sweep_dir.name}.sbatch"
    atomic_write_text(target, script)
    return target, sweep_dir


def job_folder(sweep_dir: Path) -> Path:
    """submitit's folder: it creates <sweep>/slurm/<job id>/ for each job as it submits."""
    return sweep_dir / "slurm" / "%j"


def standalone_folder(sweep_dir: Path) -> Path:
    """A script submitted by hand has nobody to create per-job folders, and Slurm does not
    create the folder of an --output path: its logs go flat into <sweep>/slurm/."""
    return sweep_dir / "slurm"


def submit_array(points: Sequence[Point], sweep_dir: Path, cfg: SlurmConfig, job_name: str) -> list[str]:
    """Submit one array (one task per point), record its jobs in the sweep's jobs.json (as the
    local backend records its own), and return the job ids, in the points' order."""
    import submitit
    from submitit.core.utils import FailedJobError, FailedSubmissionError

    from harness.backends.job import PointJob
    from harness.execution.dist import TORCHRUN_VARIABLES
    from harness.storage.sweep import record_jobs

    executor = submitit.SlurmExecutor(folder=job_folder(sweep_dir), max_num_timeout=3)
    executor.update_parameters(**sbatch_parameters(cfg, job_name))
    try:
        # A job submitted from a salloc or torchrun shell must not inherit that shell's ranks:
        # submitit's export would then raise (submitit.helpers.clean_env exists for this).
        with submitit.helpers.clean_env(extra_names=TORCHRUN_VARIABLES), executor.batch():
            jobs = [executor.submit(PointJob(str(sweep_dir)), p.to_json()) for p in points]
    except (FailedSubmissionError, FailedJobError, subprocess.CalledProcessError) as e:
        raise SubmissionError(f"sbatch refused the array: {_last_line(e)}") from e
    job_ids = [str(j.job_id) for j in jobs]
    record_jobs(sweep_dir, list(points), job_ids, "slurm")
    return job_ids


def _last_line(e: BaseException) -> str:
    text = str(getattr(e, "stderr", "") or e)
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(e).__name__


def sacct_states(job_ids: Sequence[str]) -> dict[str, JobState]:
    """State of each job (array tasks as `<array>_<task>`), from accounting."""
    if not job_ids:
        return {}
    bases = sorted({j.split("_")[0] for j in job_ids})
    out = subprocess.run(
        ["sacct", "-X", "-P", "-n", "--format=JobID,State,ExitCode,NodeList", "-j", ",".join(bases)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"sacct failed: {out.stderr.strip() or out.returncode}")
    return parse_sacct(out.stdout)


def parse_sacct(text: str) -> dict[str, JobState]:
    """sacct's `JobID|State|ExitCode|NodeList` lines -> job id -> state.

    Pending array tasks are listed as ranges (`123_[4-7%2]`); each task gets its own entry.
    """
    states: dict[str, JobState] = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 4:
            continue
        job, state, code, nodes = fields[:4]
        state = state.split()[0] if state else "UNKNOWN"  # "CANCELLED by 0" -> CANCELLED
        for task in _task_ids(job):
            states[task] = JobState(state, code, nodes)
    return states


def _task_ids(job: str) -> list[str]:
    """The job ids one sacct JobID stands for, by submitit's own reader of array ids."""
    from submitit.slurm.slurm import read_job_id

    try:
        parts = read_job_id(job)
    except ValueError:  # not an array id submitit knows (a heterogeneous job's 12+0): as is
        return [job]
    ids: list[str] = []
    for main, *tasks in parts:
        if len(tasks) == 2:  # a range: (main, first, last)
            ids.extend(f"{main}_{k}" for k in range(int(tasks[0]), int(tasks[1]) + 1))
        else:
            ids.append("_".join((main, *tasks)))
    return ids


def squeue_states(job_ids: Sequence[str]) -> dict[str, JobState]:
    """Live jobs (array tasks expanded with -r): authoritative while a job is queued or runs.

    sacct alone is not enough: an array task cancelled while pending never reaches
    accounting, and a fresh submission reaches it a second or two late.
    """
    if not job_ids:
        return {}
    bases = sorted({j.split("_")[0] for j in job_ids})
    out = subprocess.run(
        ["squeue", "-r", "-h", "-o", "%i|%T|%N|%r", "-j", ",".join(bases)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return parse_squeue(out.stdout)


def parse_squeue(text: str) -> dict[str, JobState]:
    """squeue's `%i|%T|%N|%r` lines (job id, state, nodes, reason) -> job id -> state."""
    states: dict[str, JobState] = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) == 4:
            states[fields[0]] = JobState(fields[1], "", fields[2], fields[3])
    return states


def scheduler_states(job_ids: Sequence[str]) -> dict[str, JobState]:
    """sacct's view, overridden by squeue's for the jobs still in the queue."""
    return {**sacct_states(job_ids), **squeue_states(job_ids)}


class SlurmBackend:
    """One job array per submission, one task per point, `slurm.nodes x tasks_per_node` ranks
    each (the Backend protocol, harness/backends/base.py). `harness submit` is this backend
    without waiting; `harness run --backend slurm` and `submit --wait` follow the jobs."""

    name: ClassVar[str] = "slurm"
    here: ClassVar[bool] = False

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def check(self, plan: Plan) -> None:
        """A throwaway render before anything is submitted: submitit rejects unknown options."""
        try:
            render_sbatch(
                plan.spec.slurm, job_name(plan.spec.name), Path("/tmp/check/%j"), "true", len(plan.points)
            )
        except ValueError as e:
            raise BackendRefusal(f"slurm: {str(e).splitlines()[0]}") from e

    def world_size(self, plan: Plan) -> int:
        return plan.spec.slurm.world_size

    def run(
        self,
        points: Sequence[Point],
        sweep_dir: Path,
        *,
        announce: Callable[[Sequence[str]], None] = no_announcement,
    ) -> None:
        from harness.backends.follow import wait_for_sweep

        announce(self.submit(points, sweep_dir))
        wait_for_sweep(sweep_dir, type(self))

    def submit(self, points: Sequence[Point], sweep_dir: Path) -> list[str]:
        """Raises SubmissionError with sbatch's own words when it refuses the array."""
        return submit_array(list(points), sweep_dir, self.spec.slurm, job_name(self.spec.name))

    @classmethod
    def states(cls, jobs: Sequence[str]) -> Mapping[str, object]:
        return scheduler_states(jobs) if jobs else {}
