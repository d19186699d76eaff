"""What a rank records about one (rung, repeat): its row, from the point and the loop's times.

Besides the means, the row keeps the tail of the wait for data: the 50th, 95th and 99th
percentiles of the per-step `loading_time`, and `waited_share`, the share of measured steps that
waited for their batch longer than they computed. A mean hides a read that stalls now and then
(erratic shared storage, "IOs on Jean Zay are erratic": the IDRIS course,
https://github.com/IDRIS-CNRS/DLO-JZ); prefetch_factor exists for exactly that ("prevents GPU
inactivity if the CPU occasionally struggles"), and only the tail shows whether it does.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime, timezone

from harness.config.plan import Point
from harness.execution.dist import DistEnv
from harness.execution.step_times import LoopTimes
from harness_schema.rows import RungRow
from harness_schema.settings import setting_cells


class RowMaker:
    """The fields every row of a point shares, and the row of one measurement."""

    def __init__(self, point: Point, sweep_id: str, env: DistEnv) -> None:
        self.point, self.sweep_id, self.env = point, sweep_id, env
        self.device = point.workload.device
        self.transform_names = ""
        self.loader_given = ""

    def row(self, rung: str, repeat: int, *, status: str, error: str = "", started: str = "") -> RungRow:
        """A row without figures (failed, skipped); `measured()` fills them in."""
        p = self.point
        return RungRow(
            sweep_id=self.sweep_id,
            point_id=p.id,
            point_index=p.index,
            sequence_step=p.sequence_step,
            rung=rung,
            repeat=repeat,
            rank=self.env.rank,
            world_size=self.env.world_size,
            hostname=self.env.hostname,
            jobid=self.env.jobid,
            device=self.device,
            status=status,
            error=error,
            settings=setting_cells(p.workload, p.loader),
            warmup_steps=p.measure.warmup_steps,
            transform_names=self.transform_names,
            loader_given=self.loader_given,
            started_at=started or now(),
            finished_at=now(),
            run_pass=p.run_pass.number if p.run_pass else None,
            nodes=p.scale.nodes if p.scale else None,
        )

    def measured(self, rung: str, repeat: int, times: LoopTimes, *, started: str) -> RungRow:
        row = self.row(rung, repeat, status="ok", started=started)
        row.warmup_steps = times.warmup_steps
        row.steps = times.steps
        row.samples = times.samples
        row.first_step_loading_time = times.first_step_loading_time
        row.loading_time = times.loading_time
        row.loading_time_median = times.loading_time_median
        row.loading_time_total = sum(times.loading_times)
        row.loading_time_p50, row.loading_time_p95, row.loading_time_p99 = (
            percentile(times.loading_times, q) for q in (50, 95, 99)
        )
        row.waited_share = waited_share(times.loading_times, times.step_times)
        row.next_time = times.next_time
        row.step_time = times.step_time
        row.step_time_median = times.step_time_median
        row.training_time = times.training_time
        row.samples_per_s = times.samples / times.training_time
        row.steps_per_s = times.steps / times.training_time
        row.window_drift = times.drift
        row.window_steady = times.steady
        row.epoch_restarts = times.epoch_restarts
        row.epoch_restart_time = times.epoch_restart_time
        row.delivery_period = times.delivery_period
        row.window_rse = times.window_rse
        return row


def percentile(values: Sequence[float], q: int) -> float:
    """The q-th percentile, interpolated between the two nearest values (numpy's default,
    "linear"; statistics' "inclusive" method): with 50 steps, p99 lies between the two longest."""
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def waited_share(waits: Sequence[float], steps: Sequence[float]) -> float:
    """The share of steps whose wait for data was longer than their own compute (the step
    minus its wait): steps in which the accelerator stood idle more than it worked."""
    waited = sum(wait > step - wait for wait, step in zip(waits, steps, strict=True))
    return waited / len(steps)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
