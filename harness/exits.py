"""What a verb's end means to the shell, and the one error type for bad input that is not a
spec's: the CLI, the sweeps' policies and tune share them, and import nothing else of the
harness through this module (no circle).

Exit status: 0 all well; 1 some points failed or did not finish (the others completed), or the
sweep is held by another run; 2 bad input (spec, arguments, overrides), with one line on stderr
and nothing run; 3 every point ran but an expectation of the spec's `expect:` failed (run,
submit --wait, report); 130 interrupted (Ctrl-C): what was measured is kept, and `harness
resume SWEEP` goes on; the same for SIGTERM and SIGHUP (`kill`, scancel, a closed terminal,
a scheduler's preemption): `terminated_as_interrupt`.
"""

from __future__ import annotations

import gc
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from harness_schema.expect import EXIT_EXPECTATION_FAILED

EXIT_OK, EXIT_FAILED_POINTS, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_EXPECTATION_FAILED",
    "EXIT_FAILED_POINTS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "Terminated",
    "UsageError",
    "interrupted",
    "leave_objects_to_the_exit",
    "terminated_as_interrupt",
]


class UsageError(Exception):
    """Bad input that is not a spec error (a missing folder, an empty plan, a backend's
    refusal): one line on stderr, exit 2, nothing run."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, taken as Ctrl-C is: by default they end the process at once, with no
    line, its lock left behind and its DataLoader workers alive (one stuck in `__getitem__`
    reparented to init for good, holding the caller's pipes open). As an interrupt, the point
    under way unwinds, its workers are ended and the user reads how to go on."""

    def __init__(self, signum: int) -> None:
        self.name = signal.Signals(signum).name
        super().__init__(self.name)


@contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM and SIGHUP raise Terminated in the main thread (elsewhere, no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, frame: object) -> None:
        raise Terminated(signum)

    # One the process was started to ignore stays ignored: `nohup harness run ...` must
    # outlive its terminal.
    taken = [s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, terminated) for s in taken}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def interrupted(e: KeyboardInterrupt) -> str:
    """What stopped a verb, in its line: interrupted (Ctrl-C), or the signal's name."""
    return f"terminated by {e.name}" if isinstance(e, Terminated) else "interrupted"


def leave_objects_to_the_exit() -> None:
    """For a process about to end (a job's ranks once their points are done, a script once the
    probe has its rows): Python's last garbage collection at exit walks every object torch,
    torchvision and pandas made, to free memory the exit frees anyway. That took 0.6-1.1 s a
    process on an idle 2-core VM (1.0 s a rank of a tiny local job), 2-2.6 s a rank beside
    others. Frozen (`gc.freeze`), those objects are left to the exit: 0.2-0.35 s. The result,
    atexit handlers, `finally` blocks and the exit status are as before; objects made after it
    (the result's pickle) are collected as ever. Only where the process ends: frozen objects
    that became cyclic garbage later would never be freed."""
    gc.freeze()
