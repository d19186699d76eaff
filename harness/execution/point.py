"""A point opened on this rank, the one home of what every way of running a point shares: its
folder, its row writer and the units (rung, repeat) already done (`open_point`); the rank on
its device, its process group joined and its meta written (`OpenPoint.start`); a failed row for
every unit not done (`OpenPoint.fail_missing`, `fail_all`); and what the point came to
(`PointOutcome`).

The harness's own step (runner.run_point), a user's script under the probe (harness.probe),
what a script left undone (script.account), a point past its limit (backends/limit.py) and a
killed rank (backends/ranks.py) all open the point and fail its units here, so that a failed
row says the same thing whoever writes it.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.config.plan import Point
from harness.execution.dist import DistEnv
from harness.execution.record import RowMaker
from harness_schema import layout, reading
from harness_schema import rows as results
from harness_schema.atomic import clean_temporaries, named

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

ERROR_CHARS = 500
"""The longest error a row keeps (its head and its tail)."""

Unit = tuple[str, int]
"""(rung, repeat): one row of a rank."""


class JoinTimeout(RuntimeError):
    """The point's ranks did not all join its process group within limits.dist_timeout_s."""


GROUP_BROKE = (
    "CollectiveTimeout:",
    "JoinTimeout:",
    "DistBackendError",
    "DistNetworkError",
    "DistStoreError",
    "Connection closed by peer",
    "Connection reset by peer",
    "NCCL",
)
"""What a failed row's error says where the point's process group broke: a collective that
timed out waiting for a rank (harness.execution.waiting) or lost one (gloo's and NCCL's words,
torch.distributed's errors), a join that timed out. Any other failure leaves the ranks able
to meet again at the next point."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PointOutcome:
    point_id: str
    ok: int
    failed: int
    skipped: int
    rows: tuple[results.RungRow, ...]

    @classmethod
    def of(cls, point: Point, rows: Collection[results.RungRow]) -> PointOutcome:
        return cls(
            point_id=point.id,
            ok=sum(r.status == "ok" for r in rows),
            failed=sum(r.status == "failed" for r in rows),
            skipped=sum(r.status == "skipped" for r in rows),
            rows=tuple(rows),
        )

    def first_failure(self) -> str:
        """The error of this rank's first failed row, "" where none failed. On a distributed
        point the group is then out of step: the other ranks wait in a collective this rank
        left (harness.execution.peer_failure)."""
        return next((r.error for r in self.rows if r.status == "failed"), "")

    def group_broke(self) -> str:
        """The error of this rank's first row that says the point's process group broke
        (GROUP_BROKE), "" where none does: a rank stuck or gone may still be in this point
        while the others go on to the next one of their job, where they cannot meet."""
        return next(
            (r.error for r in self.rows if r.status == "failed" and any(w in r.error for w in GROUP_BROKE)),
            "",
        )


@dataclass(kw_only=True, slots=True)
class OpenPoint:
    """A point opened on this rank: its folder, its row writer and the units already done."""

    point: Point
    path: Path
    env: DistEnv
    rows: RowMaker
    writer: results.RankWriter
    done: set[Unit]
    """What every rank finished (the units a requeued or resumed point skips)."""
    skip_done: bool

    def start(self, device: torch.device, **meta: object) -> None:
        """This rank on its device: its rows say which, it joins the point's process group
        and its meta is written (`meta`: what the caller adds, as a script's path)."""
        from harness.execution.meta import collect_meta

        self.rows.device = str(device)
        self._join(device)
        layout.write_meta(self.path, self.env.rank, {**collect_meta(device, self.env), **meta})

    def _join(self, device: torch.device) -> None:
        """Join the point's process group; a join that timed out said as what it means. The
        ranks of a local job run its points one after the other: a rank that lingered or hung
        in the point before (its peers gave up on it there) is still in it when they join this
        one, which then fails too, with torch's words alone ("1/2 clients joined")."""
        import torch.distributed as dist

        from harness.execution.dist import dist_timeout_s, init_process_group

        try:
            init_process_group(self.env, device, self.point.limits.dist_timeout_s)
        except dist.DistError as e:
            if "timed out" not in str(e).lower():
                raise
            timeout = dist_timeout_s(self.point.limits.dist_timeout_s)  # the environment's, where set
            raise JoinTimeout(
                f"not every one of the point's {self.env.world_size} ranks joined its process group "
                f"within {timeout:g} s (limits.dist_timeout_s): a rank still in an earlier point "
                f"(it lingered or hung there), or gone ({type(e).__name__}: {' '.join(str(e).split())[:120]})"
            ) from e

    def written(self) -> set[Unit]:
        """The units this rank holds a row for (the ranks of a point need not have stopped at
        the same unit)."""
        return {(str(r["rung"]), int(r["repeat"])) for r in self.writer.rows if r.get("rung")}

    def missing(self, done: Collection[Unit] | None = None) -> list[Unit]:
        """The point's units not in `done` (default: what every rank finished), in the order
        they are measured: repeats outermost."""
        done = self.done if done is None else done
        return [
            (rung, repeat)
            for repeat in range(self.point.measure.repeats)
            for rung in self.point.rungs
            if (rung, repeat) not in done
        ]

    def fail_missing(self, error: str, done: Collection[Unit] | None = None) -> list[results.RungRow]:
        """A failed row with `error` for every unit not in `done`, written; the rows."""
        rows = [
            self.rows.row(rung, repeat, status="failed", error=error) for rung, repeat in self.missing(done)
        ]
        for row in rows:
            self.writer.append(row)
        return rows

    def fail_all(self, e: BaseException, done: Collection[Unit] | None = None) -> PointOutcome:
        """The point could not start or go on (no device, a workload that does not build, its
        limit reached): a failed row with the error for every unit not done."""
        log.error("point %s: %s", self.point.id, one_line(e))
        log.debug("%s", traceback.format_exc())
        return PointOutcome.of(self.point, self.fail_missing(one_line(e), done))


def open_point(point: Point, sweep_dir: Path, env: DistEnv, skip_done: bool = True) -> OpenPoint:
    """The point's folder and this rank's writer. A requeued or resumed point keeps what it
    measured and goes on with the rest. What counts as done is what *every* rank finished, so
    that all ranks run the same rungs."""
    point_path = layout.point_dir(sweep_dir, point.id)
    try:
        point_path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise named(point_path, e) from None
    clean_temporaries(point_path)  # of a rank killed mid-write, in an earlier run
    writer = results.RankWriter(point_path, env.rank)
    done: set[tuple[str, int]] = set()
    if skip_done and writer.path.exists():
        writer.rows = reading.rows_or_set_aside(writer.path)  # a torn file: its units measured again
        done = results.completed_units(point_path, env.world_size)
    return OpenPoint(
        point=point,
        path=point_path,
        env=env,
        rows=RowMaker(point, sweep_dir.name, env),
        writer=writer,
        done=done,
        skip_done=skip_done,
    )


def one_line(e: BaseException) -> str:
    """The error as one line for a CSV cell. A DataLoader worker's error carries the worker's
    whole traceback; its last line is the cause a user needs."""
    message = str(e)
    if "Original Traceback" in message:
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        message = f"{lines[0].rstrip('.')}: {lines[-1]}"
    text = f"{type(e).__name__}: {' '.join(message.split())}"
    # Cut in the middle, never at the end: a gloo error's path comes first and its cause (the
    # peer that closed, the rank that timed out) last.
    if len(text) <= ERROR_CHARS:
        return text
    return f"{text[: ERROR_CHARS // 3]} ... {text[-ERROR_CHARS * 2 // 3 :]}"
