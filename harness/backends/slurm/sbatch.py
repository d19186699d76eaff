"""The sbatch scripts of a sweep: the spec's `slurm` section as the keyword arguments of
submitit's sbatch renderer, so the script `harness plan` shows, the one `harness sbatch` writes
and the one `harness submit` sends are rendered by the same code; the standalone scripts
(`harness sbatch`, and the portable ones kept in sbatch/) and the sweep folder a portable
script's first task makes. Slurm logs and submitit's pickles live under the sweep folder
(`<sweep>/slurm/`), never in the working directory.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from harness.config.plan import Plan
from harness.config.spec import SlurmConfig
from harness_schema.slurm_time import time_seconds


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


def sweep_from_spec(spec_path: Path, sweep_dir: Path) -> Path:
    """The sweep folder of a portable script's job, made from its spec by the first task to
    start (`python -m harness.backends.worker SWEEP --spec SPEC`); the others find it."""
    from harness.config.plan import expand
    from harness.config.spec import load_spec

    plan = expand(load_spec(spec_path))
    return create_sweep_once(plan, sweep_dir, world_size=plan.spec.slurm.world_size)
