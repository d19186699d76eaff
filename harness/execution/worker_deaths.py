"""Where a DataLoader worker's death is said: when the rung asks its loader for a batch, never
in the harness's own error path.

PyTorch installs a SIGCHLD handler (torch.utils.data._utils.signal_handling) that raises
"DataLoader worker (pid N) is killed by signal: ..." in the main thread, at whatever bytecode it
is at, when a worker of a live multi-process iterator has died. A worker that segfaulted thus
raised once inside the rung's own handling of a failure (runner._failed, the stream's close),
and the sweep ended with a traceback, no row, and its next points not run (issue 37).

Within `watched()` the handler is wrapped: it raises only while the rung asks its loader for a
batch (`asked`); a death seen anywhere else (the train step, a collective, the error path, the
close) is kept and raised at the next ask, and one seen after the last ask is dropped: the
rung has failed already, or its loader is gone. Only the main thread has signal handlers, so
only there is anything wrapped.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

TORN_WAIT_S = 1.0
"""How long a rung whose loader's queue was torn (a connection reset, an end of file: a worker
died as it sent) waits for the death's SIGCHLD, to name the death instead of the torn queue.
The signal follows the reset by the worker's exit, milliseconds."""


class _Guard:
    """The SIGCHLD handler while a rung runs: the one before it (PyTorch's), made to raise only
    at an ask."""

    def __init__(self, previous: Callable[[int, FrameType | None], Any]) -> None:
        self.previous = previous
        self.asking = False
        self.pending: Exception | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.asking:  # the rung waits on its loader: the death is the loader's failure
            self.previous(signum, frame)
            return
        try:
            self.previous(signum, frame)
        except Exception as e:  # anywhere else: said at the next ask
            if self.pending is None:
                self.pending = e

    def ask(self, fetch: Callable[[], T]) -> T:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            raise pending
        try:
            # Set and cleared inside the try: no handler runs between a plain store and the
            # next call, so the flag is never left set once the ask has returned or raised.
            self.asking = True
            return fetch()
        finally:
            self.asking = False


_current: list[_Guard] = []
"""The guard in place, while a rung runs in the main thread."""


@contextmanager
def watched() -> Iterator[None]:
    """Within, in the main thread: a DataLoader worker's death raises only at an ask (see the
    module). PyTorch's handler is installed first (it is, once per process, by the first
    multi-process iterator, and wraps whatever it finds: it must be under the guard, not over
    it)."""
    if (
        _current
        or not hasattr(signal, "SIGCHLD")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    _install_torch_handler()
    previous = signal.getsignal(signal.SIGCHLD)
    if not callable(previous):  # no handler of PyTorch's (an old or a changed torch)
        yield
        return
    guard = _Guard(previous)
    signal.signal(signal.SIGCHLD, guard)
    _current.append(guard)
    try:
        yield
    finally:
        _current.clear()
        if signal.getsignal(signal.SIGCHLD) is guard:
            signal.signal(signal.SIGCHLD, previous)
        if guard.pending is not None:
            log.debug("a DataLoader worker's death after the rung's last batch: %s", guard.pending)


def asked(fetch: Callable[[], T]) -> T:
    """`fetch()`, the rung asking its loader for a batch: where a worker's death seen since the
    last ask is raised, and where one seen now raises."""
    if not _current:
        return fetch()
    return _current[0].ask(fetch)


def cause(e: Exception) -> Exception:
    """The rung's failure `e` as the user should read it: the death of a worker seen since the
    last ask, where there is one, rather than what it left behind (a queue torn as the worker
    died sending: ConnectionResetError, EOFError). Said: not raised again at an ask."""
    if not _current:
        return e
    guard = _current[0]
    if isinstance(e, (ConnectionError, EOFError)):
        deadline = time.monotonic() + TORN_WAIT_S
        while guard.pending is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the SIGCHLD's handler runs here (the guard keeps the death)
    death, guard.pending = guard.pending, None
    return death or e


def seen() -> bool:
    """Whether a worker's death has been seen since the last ask and not said yet."""
    return bool(_current) and _current[0].pending is not None


def is_death(e: BaseException) -> bool:
    """Whether `e` is PyTorch's report of a DataLoader worker's death (its SIGCHLD handler's,
    "is killed by signal: ..." or "exited unexpectedly with exit code N", or its liveness
    check's, "(pid(s) N) exited unexpectedly")."""
    message = str(e)
    return "DataLoader worker" in message and (
        "exited unexpectedly" in message or "killed by signal" in message
    )


def _install_torch_handler() -> None:
    """PyTorch's SIGCHLD handler, installed now as its first multi-process iterator would
    (private, read defensively: without it, the guard wraps whatever is there)."""
    try:
        from torch.utils.data._utils import signal_handling

        install = getattr(signal_handling, "_set_SIGCHLD_handler", None)
        if callable(install):
            install()
    except Exception as e:  # an import or a change of torch's: the guard still wraps what is there
        log.debug("PyTorch's SIGCHLD handler not installed ahead: %s", e)
