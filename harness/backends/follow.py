"""Following a sweep while its jobs run: the one-line count of where its points stand, the
status table, and the loop that waits for the last job (`harness submit --wait`, `status`).

Torch-free and pandas-free: it runs on a login node, between polls of the scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from harness.backends.status import PointStatus, sweep_status

log = logging.getLogger(__name__)

POLL_S = 3.0
"""Seconds between two looks at the scheduler: sacct and squeue answer in well under that."""


def counts(statuses: Sequence[PointStatus]) -> str:
    """ "2 completed, 1 running": how many points stand at each progress word."""
    tally: dict[str, int] = {}
    for st in statuses:
        tally[st.progress] = tally.get(st.progress, 0) + 1
    return ", ".join(f"{n} {word}" for word, n in sorted(tally.items()))


def status_table(statuses: Sequence[PointStatus]) -> str:
    """A line per point: its job, the scheduler's state, its progress and its first error."""
    rows = [
        {
            "#": st.point.index,
            "point": st.point.id,
            "job": st.job_id or "-",
            "slurm state": st.state,
            "status": st.progress,
            "results": f"{st.units_done}/{st.units_total}",
            "error": st.error[:160],
        }
        for st in statuses
    ]
    return tabulate(rows, headers="keys", tablefmt="simple", disable_numparse=True)


def wait_for_sweep(sweep_dir: Path, poll_s: float = POLL_S) -> list[PointStatus]:
    """Follow the sweep's jobs until none is pending or running; log a line per change.

    Returns the last statuses seen (every point settled).
    """
    last = ""
    while True:
        statuses = sweep_status(sweep_dir)
        line = counts(statuses)
        if line != last:
            log.info("%s", line)
            last = line
        if not any(st.active for st in statuses):
            return statuses
        time.sleep(poll_s)
