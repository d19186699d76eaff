"""Following a sweep while its jobs run: the one-line count of where its points stand, the
status table, the progress line (done/total, time left) and the loop that waits for the last
job (`harness submit --wait`, `resume --wait`), or for the local jobs that a killed run left.

The loop asks the scheduler less and less often (FIRST_ASK_S, growing by BACKOFF up to
MAX_ASK_S, as submitit's own watcher does) and reads the result files, which cost the
scheduler nothing, between two questions: a sweep whose points all have their results ends
at once, without waiting for the next question.

Torch-free and pandas-free: it runs on a login node.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from harness.backends.base import Backend
from harness.backends.status import PointStatus, advice, scheduler_view, sweep_status
from harness.config.plan import varying_settings
from harness.storage.sweep import live_owner, load_points
from harness.text_tables import render
from harness_schema import rows as results

log = logging.getLogger(__name__)

FIRST_ASK_S = 3.0
"""Seconds to the second question to the scheduler: a fresh array starts within seconds."""
MAX_ASK_S = 60.0
"""The longest wait between two questions (sacct and squeue): a minute late at most."""
BACKOFF = 1.5
LOOK_S = 5.0
"""Seconds between two readings of the result files, between the scheduler's answers."""


def counts(statuses: Sequence[PointStatus]) -> str:
    """ "2 completed, 1 running": how many points stand at each progress word."""
    tally: dict[str, int] = {}
    for st in statuses:
        tally[st.progress] = tally.get(st.progress, 0) + 1
    return ", ".join(f"{n} {word}" for word, n in sorted(tally.items()))


def status_report(
    sweep_dir: Path, backend: type[Backend], fmt: str = "terminal", *, wide: bool = False
) -> tuple[str, bool]:
    """What `harness status` prints: the table, the counts, what to do about the points not
    done and, for an adaptive sweep whose points are all done, its next round; and whether
    every point is complete without failed units. `fmt`: the table's (harness/text_tables.py);
    `wide`: status_table's."""
    statuses = sweep_status(sweep_dir, scheduler_view(sweep_dir, backend))
    lines = [status_table(statuses, fmt, wide=wide), f"\n{counts(statuses)}"]
    lines += advice(statuses, sweep_dir, backend)
    if all(st.complete for st in statuses) and any(p.measure.follows_up for p in load_points(sweep_dir)):
        from harness.backends.adaptive import next_round

        step = next_round(sweep_dir)
        if step.worth_saying:
            lines.append(step.line(doing="to measure again"))
        if step:
            lines.append(f"measure them again: harness resume {sweep_dir}")
    return "\n".join(lines), all(st.complete and not st.failed_units for st in statuses)


def status_table(statuses: Sequence[PointStatus], fmt: str = "terminal", *, wide: bool = False) -> str:
    """A line per point: its job, the scheduler's state, its progress and its first error (in
    `fmt`: harness/text_tables.py). With `wide`, those columns alone, as they always were; else
    the settings that vary between the points come after the point, and a column the same in
    every row is said once above the table (a blank one, or "-" in every row, not at all)."""
    rows: list[dict[str, Any]] = [
        {
            "#": st.point.index,
            "point": st.point.id,
            "job": st.job_id or "-",
            "slurm state": st.state_text,
            "status": st.progress,
            "results": f"{st.units_done}/{st.units_total}",
            "error": results.short_error(st.error),
        }
        for st in statuses
    ]
    if wide or not rows:
        return render(rows, fmt)
    varying = varying_settings([st.point for st in statuses])
    rows = [
        {"#": row["#"], "point": row["point"], **{k: st.point.setting(k) for k in varying}, **row}
        for row, st in zip(rows, statuses, strict=True)
    ]
    fixed = ["#", "point", *varying]
    same = [k for k in rows[0] if k not in fixed and len(rows) > 1 and len({str(r[k]) for r in rows}) == 1]
    said = [f"{k} {rows[0][k]}" for k in same if str(rows[0][k]) not in ("", "-")]
    if len(rows) == 1 and not rows[0]["error"]:
        same = ["error"]
    table = render([{k: v for k, v in row.items() if k not in same} for row in rows], fmt)
    if not said or fmt == "csv":
        return table
    line = f"same in every row: {', '.join(said)}"
    return f"{'% ' if fmt == 'latex' else ''}{line}\n{table}"


def time_left(done: float, total: float, elapsed_s: float) -> str:
    """ "about 4 min left" at the pace so far (`done` of `total` in `elapsed_s`), or "" before
    anything is done."""
    if done <= 0 or elapsed_s <= 0:
        return ""
    left = max(0.0, total - done) * elapsed_s / done
    if left < 90:
        return f"about {max(1, round(left))} s left"
    if left < 90 * 60:
        return f"about {round(left / 60)} min left"
    return f"about {int(left // 3600)} h {round(left % 3600 / 60)} min left"


class Progress:
    """done/total points and the time left: a live line (redrawn with \\r) on a terminal, a log
    line per change of the counts otherwise (a file or a pipe keeps every line)."""

    def __init__(
        self,
        statuses: Sequence[PointStatus],
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.clock = clock
        self.started = clock()
        self.units_at_start = _units_done(statuses)
        self.last_counts = ""
        self.last_advice: list[str] = []

    def show(self, statuses: Sequence[PointStatus], advice_lines: Sequence[str] = ()) -> None:
        line_counts = counts(statuses)
        done = sum(st.complete for st in statuses)
        # The pace of this wait, in (rung, repeat) units, over what live jobs still have to do.
        remaining = sum(st.units_total - st.units_done for st in statuses if st.active)
        ran = _units_done(statuses) - self.units_at_start
        left = time_left(ran, ran + remaining, self.clock() - self.started) if remaining else ""
        text = f"{done}/{len(statuses)} points done: {line_counts}" + (f"; {left}" if left else "")
        if list(advice_lines) != self.last_advice:
            self._log_lines(advice_lines)
            self.last_advice = list(advice_lines)
        if self.live:
            self.stream.write(f"\r{text}\033[K")
            self.stream.flush()
        elif line_counts != self.last_counts:
            log.info("%s", text)
        self.last_counts = line_counts

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()

    def _log_lines(self, lines: Sequence[str]) -> None:
        if self.live and lines:
            self.stream.write("\r\033[K")  # the log lines go above the live line
        for line in lines:
            log.info("%s", line)


def _units_done(statuses: Sequence[PointStatus]) -> int:
    return sum(st.units_done for st in statuses)


def wait_for_sweep(
    sweep_dir: Path,
    backend: type[Backend],
    *,
    first_s: float = FIRST_ASK_S,
    max_s: float = MAX_ASK_S,
    look_s: float = LOOK_S,
    stream: TextIO | None = None,
    ask: Callable[[Path], Mapping[str, object]] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[PointStatus]:
    """Follow the sweep's jobs until none is live (or every point has its results); show the
    progress as it goes. Returns the last statuses seen. `backend`: the sweep's recorded one;
    `ask`, the scheduler's answer (default: `backend`'s, scheduler_view)."""
    ask = ask or (lambda folder: scheduler_view(folder, backend))
    delay, next_ask = first_s, clock()
    states: Mapping[str, object] = {}
    progress: Progress | None = None
    while True:
        asked = clock() >= next_ask
        if asked:
            states = ask(sweep_dir)
            next_ask = clock() + delay
            delay = min(max_s, delay * BACKOFF)
        statuses = sweep_status(sweep_dir, states)
        progress = progress or Progress(statuses, stream=stream, clock=clock)
        progress.show(statuses, advice(statuses, sweep_dir, backend, resume=False))
        if all(st.complete for st in statuses) or (asked and not any(st.active for st in statuses)):
            progress.close()
            return statuses
        sleep(max(0.0, min(look_s, next_ask - clock())))


def wait_for_orphaned_jobs(
    statuses: Sequence[PointStatus], sweep_dir: Path, backend: type[Backend]
) -> list[PointStatus]:
    """For a sweep run here: wait until the local jobs that outlived the `harness run` that
    started them have ended (that process was killed alone; submitit's local jobs outlive it),
    then return the statuses anew; return them as they are when there are none, or when a live
    process still owns the sweep (it runs the rest itself).

    Points run here run one at a time, so that they do not share the cores: `resume` runs the
    others after these, and their rows count as they are."""
    orphans = [st for st in statuses if st.active]
    if not orphans or live_owner(sweep_dir) or not any(st.needs_resubmit for st in statuses):
        return list(statuses)
    who = "; ".join(f"{st.point.id}: {st.reason}" for st in orphans)
    print(
        f"waiting for {len(orphans)} point(s) whose local job outlived its harness run ({who}): "
        "points run here one at a time",
        flush=True,
    )
    return wait_for_sweep(sweep_dir, backend, first_s=1.0, max_s=5.0)
