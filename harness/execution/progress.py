"""A line on the console at least every PROGRESS_S while a point runs, so that nobody stares at
a silent terminal through a long rung: `point abc123 rank 0: rung full, repeat 2/3, 40 s into
the rung, 95 s into the point`. Where the sweep's points take turns in passes (ABC ABC:
harness.sweeps.run_points) the point runs one repeat a pass, and the line says which of the
point's repeats it is and which pass: `repeat 2/3 (pass 2 of 3)`.

A thread per rank reads what the measuring thread last set (two attribute writes per rung):
nothing is added to the measured steps.
"""

from __future__ import annotations

import logging
import threading
import time

from harness.config.plan import RunPass

log = logging.getLogger(__name__)

PROGRESS_S = 30.0
"""Seconds between two progress lines of a point (module constant: tests set it low)."""


class Progress:
    """Where this rank is in its point, said every PROGRESS_S from `start()` to `stop()`."""

    def __init__(self, point_id: str, rank: int, repeats: int, run_pass: RunPass | None = None) -> None:
        self.point_id, self.rank, self.run_pass = point_id, rank, run_pass
        # In a pass the point's repeats are raised to this pass's one: say the point's whole count.
        self.repeats = run_pass.repeats if run_pass else repeats
        self.started = time.monotonic()
        self.rung: tuple[str, int, float] | None = None
        """(rung, repeat, when it started), None between rungs."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def at(self, rung: str, repeat: int) -> None:
        self.rung = (rung, repeat, time.monotonic())

    def start(self) -> None:
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="harness-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def line(self) -> str:
        now = time.monotonic()
        where = "between rungs"
        if self.rung is not None:
            rung, repeat, since = self.rung
            where = f"rung {rung}, repeat {repeat + 1}/{self.repeats}{self._pass()}"
            where += f", {now - since:.0f} s into the rung"
        return f"point {self.point_id} rank {self.rank}: {where}, {now - self.started:.0f} s into the point"

    def _pass(self) -> str:
        p = self.run_pass
        return f" (pass {p.k} of {p.of})" if p and p.of > 1 else ""

    def _run(self) -> None:
        while not self._stop.wait(PROGRESS_S):
            log.info("%s", self.line())
