"""SIGTERM to a rank from outside (Slurm's preemption or scancel, which signal every process of
the step: the rank and its DataLoader workers at once): the unit under way is not the
rank's failure, nor done. `Terminated` (harness.exits) unwinds the rank; the unit keeps no
row, so that a requeued job or `harness resume` measures it again, as the units not begun.

The workers die of the same signal, and PyTorch's SIGCHLD handler, or its check of a worker's
liveness, raises "DataLoader worker (pid(s) N) exited unexpectedly" in the rank, which a rung
would take for its own failure. Whichever comes first: the handler marks the rank terminated
before it raises, and a rung's worker-death error is the termination when the mark is set or
the rank's own SIGTERM comes within GRACE_S (`reraise_if_terminated`).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from harness.exits import Terminated

GRACE_S = 2.0
"""How long a rung whose DataLoader worker died waits for the rank's own SIGTERM (the signal
reaches every process of the step at once; the rank may take it a moment after its worker
died) before it calls the death the loader's failure."""

_WORKER_DEATH = ("DataLoader worker", "exited unexpectedly", "killed by signal")

_terminated: list[int] = []
"""The signal that terminated this rank, once it came (a list: set from the handler)."""


@contextmanager
def terminable() -> Iterator[None]:
    """Within, in the main thread: SIGTERM marks the rank terminated and raises Terminated (a
    KeyboardInterrupt: no rung's `except Exception` takes it). Ignored stays ignored."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    ):
        yield
        return

    def terminated(signum: int, frame: FrameType | None) -> None:
        _terminated.append(signum)
        raise Terminated(signum)

    _terminated.clear()
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def signal_taken() -> int | None:
    """The signal that terminated this rank within `terminable`, if one did."""
    return _terminated[0] if _terminated else None


def reraise_if_terminated(e: Exception) -> None:
    """Raise Terminated for a DataLoader worker's death that the rank's termination caused
    (see the module); else return, `e` is the rung's own failure."""
    message = str(e)
    if not (_WORKER_DEATH[0] in message and any(w in message for w in _WORKER_DEATH[1:])):
        return
    deadline = time.monotonic() + GRACE_S
    while not _terminated and time.monotonic() < deadline:
        time.sleep(0.05)  # the handler raises Terminated here if the SIGTERM comes
    if _terminated:
        raise Terminated(_terminated[0]) from e
