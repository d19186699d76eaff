"""The lock on a sweep: one `harness run`, `resume` or `submit --wait` at a time works on it.

Taken before the sweep's status is read, so that two resumes never both find the same units
missing and measure them side by side (each figure would have been measured beside a twin).
The lock is `sweep.lock` in the sweep folder, made by an exclusive create (O_CREAT|O_EXCL:
atomic on a local file system and on NFS v3+), holding who took it: host, pid, process start
time, since when, and the verb. It is removed when the holder ends; a holder killed hard
leaves it behind, and it is then stale: taken over when its process is gone from this host
(the pid dead, or reused by another process: the start time differs). A lock taken on another
host cannot be checked from here and is never taken over (the line says how to remove it).

Not flock: a DataLoader worker forked by the holder inherits its open files, and a worker stuck
in `__getitem__` would hold a flock long after its run was killed. A short flock serialises the
takeover of a stale lock only (two takers both finding it stale), released before anything runs.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.storage.sweep import process_alive, process_stamp
from harness_schema.atomic import named

log = logging.getLogger(__name__)

LOCK_FILE = "sweep.lock"
UNSAID_S = 2.0
"""How long a lock file with no holder written into it yet (its taker between its create and
its write) is read again before it is taken as held by someone unnamed."""


class SweepHeld(Exception):
    """Another process holds the sweep: the message names it (pid, host, since when)."""


@contextmanager
def sweep_lock(sweep_dir: Path, verb: str) -> Iterator[None]:
    """Hold the sweep's lock while the block runs; raise SweepHeld at once when a live process
    holds it. `verb`: what the holder does (`harness resume`), for the other's line."""
    path = sweep_dir / LOCK_FILE
    stamp = {
        **process_stamp(os.getpid()),
        "since": datetime.now().isoformat(timespec="seconds"),
        "verb": verb,
    }
    _take(path, stamp)
    try:
        yield
    finally:
        if _read(path) == stamp:  # never remove a lock that is not ours (a takeover of ours)
            try:
                path.unlink(missing_ok=True)
            except OSError as e:  # a disk turned read-only: the lock is stale, taken over later
                log.warning("%s: the lock is left behind (%s)", path, e.strerror or e)


def _take(path: Path, stamp: dict[str, Any]) -> None:
    if _create(path, stamp):
        return
    held = _holder(path)
    if _alive(held):
        raise SweepHeld(_held_line(path, held))
    with _serialised(path):  # a stale lock: one taker at a time takes it over
        if _read(path) == held:
            log.info("%s: taking over the lock of a run that is gone (%s)", path.parent, _who(held))
            path.unlink(missing_ok=True)
        if not _create(path, stamp):
            raise SweepHeld(_held_line(path, _holder(path)))


def _create(path: Path, stamp: dict[str, Any]) -> bool:
    """The exclusive create: True when this process made the lock."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    except OSError as e:  # a full or read-only disk: one line (CannotWrite), nothing taken
        raise named(path, e) from None
    try:
        os.write(fd, json.dumps(stamp).encode())  # one small write: whole, or not yet there
    except OSError as e:
        path.unlink(missing_ok=True)
        raise named(path, e) from None
    finally:
        os.close(fd)
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _holder(path: Path) -> dict[str, Any] | None:
    """Who holds it; None when the file is gone, or still says no one after UNSAID_S."""
    deadline = time.monotonic() + UNSAID_S
    while True:
        held = _read(path)
        if held is not None or not path.exists() or time.monotonic() > deadline:
            return held
        time.sleep(0.05)


def _alive(held: dict[str, Any] | None) -> bool:
    """A holder that may still run: alive on this host, on another host (not checkable from
    here), or unnamed (its file unreadable: never taken over blindly)."""
    if held is None:
        return True
    if held.get("host") != socket.gethostname():
        return True
    return bool(process_alive(held))


def _who(held: dict[str, Any] | None) -> str:
    if held is None:
        return "a process that did not write its name"
    since = str(held.get("since", "?")).replace("T", " ")
    return f"{held.get('verb', 'harness')} (pid {held.get('pid')} on {held.get('host')}, since {since})"


def _held_line(path: Path, held: dict[str, Any] | None) -> str:
    line = f"{path.parent} is held by {_who(held)}: one run or resume of a sweep at a time"
    if held is None:  # torn (a node that crashed between its create and write): never blindly
        line += f"; its file says nothing readable: if no run works on the sweep, remove {path}"
    elif held.get("host") != socket.gethostname():
        line += f"; if that run is gone, remove {path}"
    return line


@contextmanager
def _serialised(path: Path) -> Iterator[None]:
    """A short exclusive flock on a file beside the lock, where the file system has flock."""
    take = path.with_name(path.name + ".take")
    try:
        fd = os.open(take, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise named(take, e) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as e:  # a file system without flock (some Lustre mounts): best effort
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                raise
        yield
    finally:
        os.close(fd)
