"""A rank waiting for the others in a collective: said on the console while it lasts, named
when it times out.

A collective (gloo, NCCL) cannot say whom it waits for. So each rank's watcher thread, once
its rank has been in a collective for `PUBLISH_S`, publishes "I am in collective #n" in the
process group's store, and once it has waited `WAIT_LINE_S`, reads the others' marks: a rank
without the same mark is one it waits for (`rank 0 has waited 10 s in the warmup's all-reduce
for rank 1`). Nothing goes over the network while collectives return quickly: entering one is
two attribute writes, and the thread wakes a few times a second to read them.

A collective that fails after the process group's timeout (limits.dist_timeout_s) is raised
again as a CollectiveTimeout, one line that names the ranks waited for and the setting.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

WAIT_LINE_S = 10.0
"""A rank that has waited this long in a collective says so, and again every WAIT_LINE_S
while it waits (module constant: tests set it low)."""
PUBLISH_S = 1.0
"""A rank in a collective for this long marks it in the store, before any rank says whom it
waits for: ranks that arrive within WAIT_LINE_S - PUBLISH_S of each other are not named."""
_POLL_S = 0.25
TIMEOUT_SETTING = "limits.dist_timeout_s"
_KEY = "harness/waiting/{}"

T = TypeVar("T")


class CollectiveTimeout(RuntimeError):
    """A collective gave up after the process group's timeout."""


class Waits:
    """This rank's collectives, watched (see the module's docstring). One per process group."""

    def __init__(self, rank: int, world_size: int, timeout_s: float, store: Any) -> None:
        self.rank, self.world_size, self.timeout_s, self.store = rank, world_size, timeout_s, store
        self.seq = 0
        self.current: tuple[int, str, float] | None = None
        """(collective number, its name, when it was entered), None outside a collective."""
        self.waited_for: list[int] | None = None
        self._thread: threading.Thread | None = None

    def watched(self, name: str, call: Callable[..., T]) -> Callable[..., T]:
        """`call`, with its time in a collective watched and its timeout named."""

        def run(*args: Any, **kwargs: Any) -> T:
            self.seq += 1
            entered = time.monotonic()
            self.current, self.waited_for = (self.seq, name, entered), None
            self._start()
            try:
                return call(*args, **kwargs)
            except Exception as e:
                waited = time.monotonic() - entered
                if waited < 0.9 * self.timeout_s:
                    raise  # not the timeout: a peer that died, a bad tensor...
                raise CollectiveTimeout(self._timeout_text(name)) from e
            finally:
                self.current = None

        return run

    def _timeout_text(self, name: str) -> str:
        who = self.waited_for if self.waited_for is not None else self._missing(self.seq)
        return (
            f"rank {self.rank} waited {self.timeout_s:g} s in {name} for {_ranks(who)}, and gave up: "
            f"a rank that failed, left the loop or lingers ({TIMEOUT_SETTING} in the spec sets the wait)"
        )

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="harness-waits", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        published = 0  # the collective this rank's mark names (0: none)
        line_at = WAIT_LINE_S
        while True:
            time.sleep(_POLL_S)
            current = self.current
            if current is None or current[0] != published:
                if published:
                    self._mark("")
                    published = 0
                line_at = WAIT_LINE_S
            if current is None:
                continue
            seq, name, entered = current
            waited = time.monotonic() - entered
            if waited >= PUBLISH_S and published != seq:
                self._mark(str(seq))
                published = seq
            if waited >= line_at:
                self.waited_for = self._missing(seq)
                if self.waited_for != []:  # []: every rank is in it, a slow step rather than a wait
                    log.warning(
                        "rank %d has waited %d s in %s for %s",
                        self.rank,
                        waited,
                        name,
                        _ranks(self.waited_for),
                    )
                line_at += WAIT_LINE_S

    def _mark(self, value: str) -> None:
        try:
            self.store.set(_KEY.format(self.rank), value)
        except Exception as e:  # the store's host (rank 0) may be gone: the line is a courtesy
            log.debug("cannot mark the wait in the store: %s", e)

    def _missing(self, seq: int) -> list[int] | None:
        """The ranks not marked as waiting in collective `seq`; None where the store cannot say."""
        missing = []
        try:
            for other in range(self.world_size):
                if other == self.rank:
                    continue
                key = _KEY.format(other)
                if not self.store.check([key]) or self.store.get(key).decode() != str(seq):
                    missing.append(other)
        except Exception as e:
            log.debug("cannot read the other ranks' waits from the store: %s", e)
            return None
        return missing


def _ranks(ranks: list[int] | None) -> str:
    if not ranks:
        return "the other ranks"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


_WAITS: Waits | None = None


def watch(rank: int, world_size: int, timeout_s: float) -> None:
    """Watch this process's collectives from now on (called once its process group is joined)."""
    global _WAITS
    from torch.distributed import distributed_c10d

    try:
        store = distributed_c10d._get_default_store()  # private: the group's own rendezvous store
    except Exception as e:
        log.debug("no store to mark waits in: %s", e)
        return
    _WAITS = Waits(rank, world_size, timeout_s, store)


def watched(name: str, call: Callable[..., T]) -> Callable[..., T]:
    """`call` (a collective, or a step that holds one), watched where a process group was
    joined by the harness; itself otherwise. Every rank must wrap the same calls, in the
    same order: collectives are counted."""

    def run(*args: Any, **kwargs: Any) -> T:
        waits = _WAITS
        if waits is None:
            return call(*args, **kwargs)
        return waits.watched(name, call)(*args, **kwargs)

    return run
