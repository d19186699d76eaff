"""The one atomic writer: every result, plan, timeline, plot and report goes through it.

A file is written to a temporary name in its own folder, flushed to disk, and renamed into
place, so that a reader on a shared filesystem never sees half a file and a crash leaves the
old file whole. Torch-free: the analysis writes its reports with it too.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

STORAGE_FAULTS = frozenset(
    {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG, errno.EIO}
)
"""The errors of the file system itself (full, read-only, forbidden, over quota, broken),
not of the harness: said as one line (CannotWrite), never as a traceback."""


class CannotWrite(OSError):
    """A file could not be written for a reason of the file system (STORAGE_FAULTS). `path` is
    the file meant, `reason` the system's words (No space left on device)."""

    def __init__(self, path: Path, cause: OSError, *, outcome: str = "") -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path, self.reason = Path(path), cause.strerror or str(cause)
        self.outcome = outcome
        """What the fault left, where no sweep holds `path` ("no sweep was made")."""

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"

    @classmethod
    def in_text(cls, text: str) -> CannotWrite | None:
        """The CannotWrite another process died of, from its error's text (a local job's rank:
        submitit hands its parent its log's end); None where it died of something else."""
        found = _SAID.findall(text)
        if not found:
            return None
        path, said = found[-1]
        # The text may be cut (the rank's log on the full disk it could not write): the
        # system's words that it begins.
        reasons = [os.strerror(e) for e in sorted(STORAGE_FAULTS) if os.strerror(e).startswith(said)]
        return cls(Path(path), OSError(0, reasons[0] if len(reasons) == 1 else said))


_SAID = re.compile(r"CannotWrite: cannot write (.+): ([^:\n]+)$", re.MULTILINE)
"""A CannotWrite's line in a traceback (its __str__; the system's reason holds no colon)."""


_TEMPORARY = re.compile(r"^\..+\.w(\d+)@([^.]*)\.[^.]*\.tmp$")
"""A temporary file of this writer: .<name>.w<pid>@<host>.<random>.tmp."""
STALE_S = 3600.0
"""A temporary file this old is a dead writer's whoever wrote it (a write takes seconds)."""


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder and a rename; a
    fault of the file system raises CannotWrite naming `path`."""
    try:
        _write(path, data)
    except OSError as e:
        fault = named(path, e)
        if fault is e:
            raise
        raise fault from None  # the fault is the line; the temporary file's name is noise


def named(path: Path, e: OSError) -> OSError:
    """`e` as a CannotWrite of `path` where it is a fault of the file system; else `e`."""
    if e.errno in STORAGE_FAULTS and not isinstance(e, CannotWrite):
        return CannotWrite(path, e)
    return e


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_writer()}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); results are shared like any file the user
        # writes, so give it the mode the umask would have given it.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def _writer() -> str:
    """This process in a temporary file's name (w<pid>@<host>), so that a dead writer's files
    can be told from a live one's (clean_temporaries)."""
    return f"w{os.getpid()}@{socket.gethostname().split('.')[0]}"


def clean_temporaries(folder: Path) -> int:
    """Remove the temporary files that dead writers left in `folder` (killed between create
    and rename): this machine's whose process is gone, and any older than STALE_S. A live
    writer's (another rank's, now) are left alone. Returns how many were removed."""
    removed = 0
    host = socket.gethostname().split(".")[0]
    try:
        candidates = [p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
    except OSError:
        return 0
    for path in candidates:
        match = _TEMPORARY.match(path.name)
        try:
            dead = match is not None and match[2] == host and not _alive(int(match[1]))
            if dead or time.time() - path.stat().st_mtime > STALE_S:
                path.unlink()
                removed += 1
        except OSError:  # gone already (its writer renamed it), or not ours to remove
            continue
    if removed:
        log.info("%s: removed %d temporary file(s) of writers that died", folder, removed)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
