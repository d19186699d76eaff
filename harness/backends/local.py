"""Points as local subprocesses through submitit's LocalExecutor, for machines without Slurm.

`tasks_per_node` processes per point emulate the ranks of a multi-GPU node (gloo on the CPU).
Points run one after the other: concurrent points would share the cores and spoil each
other's timings.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from harness.config.plan import Point
from harness.config.spec import SlurmConfig

log = logging.getLogger(__name__)


def run_local(points: Sequence[Point], sweep_dir: Path, cfg: SlurmConfig) -> list[str]:
    """Run each point with `cfg.tasks_per_node` ranks; return the points whose job crashed."""
    import submitit

    from harness.backends.job import PointJob
    from harness.backends.slurm import time_seconds
    from harness.storage.sweep import record_jobs

    if cfg.nodes != 1:
        raise ValueError(f"the local backend runs on one node; slurm.nodes is {cfg.nodes}")
    executor = submitit.LocalExecutor(folder=sweep_dir / "local" / "%j")
    executor.update_parameters(
        tasks_per_node=cfg.tasks_per_node,
        nodes=1,
        timeout_min=max(1, time_seconds(cfg.time) // 60),
        gpus_per_node=0,  # the ranks pick their device themselves (auto: the CPU here)
    )
    crashed: list[str] = []
    for n, point in enumerate(points, 1):
        log.info("[%d/%d] point %s: %d local task(s)", n, len(points), point.id, cfg.tasks_per_node)
        job = executor.submit(PointJob(str(sweep_dir)), point.to_json())
        record_jobs(sweep_dir, [point], [str(job.job_id)], "local")
        try:
            job.results()
        except Exception as e:  # a rank died outside run_point (its rows say nothing)
            log.error("point %s: its job failed: %s", point.id, str(e).strip().splitlines()[-1][:300])
            crashed.append(point.id)
    return crashed
