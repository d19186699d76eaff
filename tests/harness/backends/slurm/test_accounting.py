"""What Slurm leaves unsaid, read without a cluster: a task neither queued nor accounted, and the
last line of a job's log. The real-cluster tests are in tests/slurm/."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from harness.backends.slurm.accounting import ACCOUNTING_LAG_S, log_tail, unseen_state
from harness.backends.slurm.states import JobState


def test_an_unseen_task_is_cancelled_once_accounting_knows_its_array_or_has_had_time() -> None:
    fresh = {"submitted": datetime.now().isoformat()}
    old = {"submitted": (datetime.now() - timedelta(seconds=ACCOUNTING_LAG_S + 5)).isoformat()}
    assert unseen_state("7_1", fresh, {}) == "SUBMITTED"  # accounting lags a fresh submission
    assert unseen_state("7_1", fresh, {"7_0": JobState("COMPLETED", "0:0", "n1")}) == "NEVER_STARTED"
    assert unseen_state("7_1", old, {}) == "NEVER_STARTED"
    assert unseen_state("7_1", {}, {}) == "NEVER_STARTED"  # no time recorded: it has had time


def test_the_log_tail_is_the_last_line_that_says_something(tmp_path: Path) -> None:
    folder = tmp_path / "slurm" / "7"
    folder.mkdir(parents=True)
    log = folder / "7_0_0_log.err"
    log.write_text(
        "2026-11-25 06:37:58,649 W RuntimeError: no such bucket\nsubmitit WARNING (x): bye\nsrun: error: n1\n\n"
    )
    assert log_tail(tmp_path, "7_0") == f"RuntimeError: no such bucket (see {log})"
    assert log_tail(tmp_path, "8_0") == ""  # no log: nothing to say
