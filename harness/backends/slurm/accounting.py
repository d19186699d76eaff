"""What Slurm leaves unsaid about a sweep's jobs, read from elsewhere: a job neither queued nor
in accounting (`unseen_state`: cancelled before it started, or not seen yet), and why a job that
left no row ended (`log_tail`: the last line of its log, in submitit's layout)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

# A job neither queued nor in accounting this long after its submission was cancelled before
# it started (Slurm does not account never-started array tasks); before that, accounting lags.
ACCOUNTING_LAG_S = 60


def unseen_state(job: str, entry: Mapping[str, Any], states: Mapping[str, object]) -> str:
    """Not queued and not accounted: cancelled before it started if Slurm knows other tasks of
    its array (accounting has caught up), else a submission not yet seen."""
    array = job.split("_")[0] + "_"
    known = "_" in job and any(other.startswith(array) for other in states)
    try:
        age = (datetime.now() - datetime.fromisoformat(str(entry.get("submitted")))).total_seconds()
    except ValueError:  # an entry without its time: accounting has had time to catch up
        age = float("inf")
    return "NEVER_STARTED" if known or age > ACCOUNTING_LAG_S else "SUBMITTED"


def log_tail(sweep_dir: Path, job_id: str) -> str:
    """The last line of the job's stderr that says something, for a job that left no row."""
    # submitit's layout, <sweep>/slurm/<job id>/<job id>_<task>_log.err, or flat for a
    # standalone script: <sweep>/slurm/<job id>_<task>_log.err
    for log_file in sorted((sweep_dir / "slurm").glob(f"**/{job_id}_*_log.err")):
        lines = [line.strip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
        meaningful = [line for line in lines if not line.startswith(("submitit ", "srun: "))]
        if meaningful:
            return f"{_LOG_PREFIX.sub('', meaningful[-1])[:300]} (see {log_file})"
    return ""


_LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z] ")
"""A job's log line's time and level (job._job_logging): "2026-11-25 06:37:58,649 W "; the
status's error column says what, the log file says when."""
