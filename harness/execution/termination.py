"""SIGTERM to a rank from outside (Slurm's preemption or scancel, which signal every process of
the step: the rank and its DataLoader workers at once): the unit under way is not the
rank's failure, nor done. `Terminated` (harness.exits) unwinds the rank; the unit keeps no
row, so that a requeued job or `harness resume` measures it again, as the units not begun.

The workers die of the same signal, and PyTorch's SIGCHLD handler, or its check of a worker's
liveness, raises "DataLoader worker (pid(s) N) exited unexpectedly" in the rank, which a rung
would take for its own failure. Whichever comes first: the handler marks the rank terminated
before it raises, and a rung's worker-death error is the termination when the mark is set or
the rank's own SIGTERM comes within GRACE_S (`reraise_if_terminated`). The grace is waited only
where a termination is plausible, the worker killed by SIGTERM or SIGKILL (or how it ended
unknown): a worker that segfaulted or exited with a status of its own (`sys.exit(1)`,
`os._exit(3)`) is the rung's failure at once, where every such point paid GRACE_S before.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType

from harness.exits import Terminated

GRACE_S = 2.0
"""How long a rung whose DataLoader worker died waits for the rank's own SIGTERM (the signal
reaches every process of the step at once; the rank may take it a moment after its worker
died) before it calls the death the loader's failure."""

_WORKER_DEATH = ("DataLoader worker", "exited unexpectedly", "killed by signal")

_TERMINATING = (signal.SIGTERM, signal.SIGKILL)
"""How a worker ends when its job is terminated: Slurm's SIGTERM to every process of the step,
then SIGKILL after KillWait to what is left (a worker the SIGTERM did not end)."""

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


@contextmanager
def noted() -> Iterator[None]:
    """Within, in the main thread: SIGTERM is noted (`signal_taken`), then handled as it was
    before: the default still ends the process, a handler of the user's script (a checkpoint on
    preemption) is still called. For a user's script measured under harness.probe: a worker's
    death by the same signal is then the termination, never the loader's failed row."""
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or previous in (signal.SIG_IGN, None):
        yield
        return

    def note(signum: int, frame: FrameType | None) -> None:
        _terminated.append(signum)
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    _terminated.clear()
    signal.signal(signal.SIGTERM, note)
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
    if _terminated:
        raise Terminated(_terminated[0]) from e
    if not termination_plausible(e):
        return  # a worker's own crash: no SIGTERM is coming
    try:
        await_own_signal()
    except Terminated as terminated:
        raise terminated from e


def await_own_signal() -> None:
    """Wait up to GRACE_S for this rank's own SIGTERM, after a process of its step (a DataLoader
    worker, a user's script) ended of one: raise Terminated if it comes (within `terminable`),
    else return."""
    deadline = time.monotonic() + GRACE_S
    while not _terminated and time.monotonic() < deadline:
        time.sleep(0.05)  # the handler raises Terminated here if the SIGTERM comes
    if _terminated:
        raise Terminated(_terminated[0])


def termination_plausible(e: Exception) -> bool:
    """Whether the worker death `e` reports may be the job's termination: a worker killed by
    SIGTERM or SIGKILL, or one whose end is unknown. PyTorch says it in one of three ways:
    "is killed by signal: Terminated." (its SIGCHLD handler, strsignal's words), "exited
    unexpectedly with exit code 3." (the same handler), or "(pid(s) N) exited unexpectedly" (its
    check of the workers' liveness, which names no cause: the workers' exit codes are read from
    the DataLoader iterator that raised it)."""
    message = str(e)
    killed = re.search(r"killed by signal: ([^.]+)\.", message)
    if killed is not None:
        return killed[1].strip() in {signal.strsignal(s) for s in _TERMINATING}
    if re.search(r"exited unexpectedly with exit code -?\d+", message):
        return False  # an exit status of its own: a signal is reported as killed above
    codes = worker_exit_codes(e)
    return codes is None or any(code in {-s for s in _TERMINATING} for code in codes)


def worker_exit_codes(e: BaseException) -> list[int] | None:
    """The exit codes of the dead workers `e` names (their pids), read from the DataLoader
    iterator in whose frames it was raised (`_MultiProcessingDataLoaderIter._workers`, whose
    processes keep their exit code once reaped); None where no frame holds them."""
    pids = {int(p) for p in re.findall(r"\d+", message_pids(str(e)))}
    traceback: TracebackType | None = e.__traceback__
    while traceback is not None:
        workers = getattr(traceback.tb_frame.f_locals.get("self"), "_workers", None)
        if isinstance(workers, list):
            codes = [w.exitcode for w in workers if getattr(w, "pid", None) in pids]
            if codes and all(isinstance(c, int) for c in codes):
                return codes
        traceback = traceback.tb_next
    return None


def message_pids(message: str) -> str:
    """The pids of "DataLoader worker (pid(s) 41, 42) exited unexpectedly": "41, 42"."""
    found = re.search(r"DataLoader worker \(pids?(?:\(s\))? ([\d, ]+)\)", message)
    return found[1] if found is not None else ""
