"""The one atomic writer: every result, plan, timeline, plot and report goes through it.

A file is written to a temporary name in its own folder, flushed to disk, and renamed into
place, so that a reader on a shared filesystem never sees half a file and a crash leaves the
old file whole. Torch-free: the analysis writes its reports with it too.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
