"""What may reach a Slurm job's script and paths: no line break anywhere, no `%` in a path.

Two ways a value escapes into something it was not meant to be:

- A **line break** in any value written into the sbatch script (a directive's value, a setup
  line, a path) starts a line of the value's choosing: `#SBATCH --x` or a shell command.
- A **`%`** in a path that submitit or Slurm expands: submitit replaces `%j` in its job folder
  with the job id, and Slurm replaces `%j`, `%A`, `%a`, `%x`... in `--output` and `--error`. A
  results root `runs/%j` made a stray folder per job outside the results root. Outside paths
  a `%` is left alone by both, and a setup line may need one (`date +%s`).

Checked before anything is written or submitted: the spec's fields in spec.py, the command's
results root here (`refuse_unsafe_results`, called by the CLI).
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

LINE_BREAK_WHY = "a line break would start a line of its own in the sbatch script (an #SBATCH directive)"
PERCENT_WHY = "submitit and Slurm replace '%' patterns in the job's paths (%j: the job id)"


class UnsafePath(ValueError):
    """A results root that cannot reach a job's paths intact. str() is the one line."""


def is_control(ch: str) -> bool:
    """Control characters (line feed, carriage return, tab, escape...) and Unicode's line and
    paragraph separators, which some tools also take for line breaks."""
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp")


def has_line_break(text: str) -> bool:
    return any(is_control(ch) for ch in text)


def refuse_unsafe_results(given: Path | None, flag: str = "--results") -> None:
    """Refuse a results root (as given, and as the absolute path the jobs will see: a `%` in
    the working directory reaches them too) that holds a `%` or a line break."""
    if given is None:
        return
    if str(given) == os.environ.get("HARNESS_RESULTS"):
        flag += " ($HARNESS_RESULTS)"  # the flag's default: say where the value came from
    absolute = str(Path(given).absolute())
    shown = repr(str(given)) if str(given) == absolute else f"{str(given)!r} ({absolute!r})"
    if has_line_break(absolute):
        raise UnsafePath(
            f"{flag}: {shown} is not allowed: {LINE_BREAK_WHY}; choose a folder whose path is one line"
        )
    if "%" in absolute:
        raise UnsafePath(
            f"{flag}: {shown} is not allowed: {PERCENT_WHY}, so the results would land in another "
            "folder; choose a folder whose path has no '%'"
        )
