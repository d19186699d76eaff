"""What a rank records about one (rung, repeat): its row, from the point and the loop's times."""

from __future__ import annotations

from datetime import datetime, timezone

from harness.config.plan import Point
from harness.config.settings import setting_cells
from harness.execution.dist import DistEnv
from harness.execution.loop import LoopTimes
from harness.storage.rows import RungRow


class RowMaker:
    """The fields every row of a point shares, and the row of one measurement."""

    def __init__(self, point: Point, sweep_id: str, env: DistEnv) -> None:
        self.point, self.sweep_id, self.env = point, sweep_id, env
        self.device = point.workload.device
        self.transform_names = ""

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
            started_at=started or now(),
            finished_at=now(),
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
        return row


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
