"""A shared store with a known ceiling: at most `rate` reads a second, all readers together.

A test instrument for the scaling report (issue #40, docs/guides/storage-scaling.md): every rank
of every node that reads through one store shares one budget of requests, as every client of a
shared file system shares its servers. Its known answer: each rank asking `d` reads a second
gets them all while `ranks × d <= rate`; past it, each gets `rate / ranks`, so per-GPU
throughput is flat up to K = rate / d ranks and falls beyond.

The budget is a token bucket kept in one small file under an exclusive lock (fcntl.flock):
the emulated nodes of the local Slurm cluster, and the local backend's ranks, share this
machine's filesystem, so they share the file. It is the generic cell rate algorithm (GCRA,
ITU-T I.371), the token bucket written as one number: the time at which the next read may
start. A reader takes the lock, books the next free slot (no earlier than now less the burst,
so an idle store does not bank reads without limit), moves the slot on by 1/rate, releases
the lock, and sleeps until its slot: it never spins, and the readers are served in the order
they asked. With no rate the reader still takes the lock and writes the file (the same cost)
and never waits: the unlimited store the same sweep is compared with.

Torch-free; POSIX only (fcntl).
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
from pathlib import Path

BURST_S = 0.1
"""How far ahead of its rate an idle store may serve at once: 0.1 s of reads (15 at 150 reads a
second), so that a rank's batch of reads after a step is served at once while the store has
room (with 20 ms, a batch of 8 at 200 reads a second waited 20 ms on a store it did not fill);
a saturated store's queue never empties, and serves `rate` exactly."""

_SLOT = struct.Struct("<d")  # the next free slot, seconds on the monotonic clock of this machine


class SharedStore:
    """The bucket file and its rate; `take()` before each read."""

    def __init__(self, path: str | os.PathLike[str], rate: float | None) -> None:
        if rate is not None and not rate > 0:
            raise ValueError(f"store_rate must be a number of reads a second > 0 (got {rate!r})")
        self.path, self.rate = Path(path), rate
        self.waited_s = 0.0
        """Seconds this reader slept for its slots (its share of the store's queue)."""

    def take(self) -> float:
        """Book one read and wait for its slot; the seconds waited."""
        now = time.monotonic()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = os.pread(fd, _SLOT.size, 0)
            slot = _SLOT.unpack(data)[0] if len(data) == _SLOT.size else now
            start = max(slot, now - BURST_S)
            step = 1.0 / self.rate if self.rate is not None else 0.0
            os.pwrite(fd, _SLOT.pack(start + step), 0)
        finally:
            os.close(fd)  # closing releases the lock
        wait = start - now if self.rate is not None else 0.0
        if wait > 0:
            time.sleep(wait)
            self.waited_s += wait
            return wait
        return 0.0


UNLIMITED = "unlimited"


def of_rate(path: Path, rate: float | str) -> SharedStore:
    """The store of a data set's `store_rate`: reads a second, or `unlimited`."""
    if rate == UNLIMITED:
        return SharedStore(path, None)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)):
        raise ValueError(f"store_rate must be a number of reads a second > 0, or {UNLIMITED} (got {rate!r})")
    return SharedStore(path, float(rate))


def bucket_path(root: Path) -> Path:
    """Where a data set's store keeps its bucket: beside its files, so that every reader of the
    data set, on any emulated node of this machine, shares it."""
    return root / ".harness-store-bucket"
