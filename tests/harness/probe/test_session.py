"""harness/probe/session.py: the windows' clock, with the time in probe.untimed() taken out."""

from __future__ import annotations

import time

import harness.probe as probe
from tests.harness.probe.common import (
    Numbers,
    rows_of,
    script_point,
)


def test_untimed_work_is_left_out_of_the_window(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch]"))
    loader = probe.loader(Numbers(), batch_size=2)
    for _ in probe.measure(loader, "cpu", keep_running=True):
        with probe.untimed():
            time.sleep(0.3)  # a validation at every step: 0.9 s inside the window's 3 steps
    (row,) = rows_of(job)
    assert row["status"] == "ok" and float(row["training_time"]) < 0.3
