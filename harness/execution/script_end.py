"""How a user's script ended, in the words of a failed row: its exit status or the signal that
killed it (`process_end`), whether it reached the probe, and the end of its stderr with its
error line whole (`error_excerpt`), said in one line (`Ended.reason`).

A concept apart from running the script (script.py): these words are read wherever a script's
end is reported (`harness plan`'s check run, script_check.py; a Slurm task's state).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ERROR_CHARS = 500
"""About the most characters of the script's stderr a failed row keeps: its error line whole
(see error_excerpt), and the lines before it that fit."""
LINE_CHARS = 1000
"""An error line longer than this keeps its first and its last characters (a tensor's repr)."""
TRACEBACK = "Traceback (most recent call last):"


@dataclass(frozen=True, kw_only=True, slots=True)
class Ended:
    """How the script's process ended."""

    returncode: int
    stderr_tail: str
    """The end of its stderr as a row keeps it (error_excerpt): lines joined with " | "."""
    reached: bool
    """The script called the probe (its loader or its measure)."""
    done: bool
    """The probe measured the whole point."""
    left_after: int | None = None
    """The script's loop let go of the probe after this many batches (None: it did not)."""
    settings: Mapping[str, Any] | None = None
    """The settings the probe said the point ran with (batch_size and the loader's), for the
    failed rows; None where the script did not get that far."""
    error_line: str = ""
    """The line that says what went wrong: the exception of the last traceback in its stderr,
    else its last line (argparse's `error:` line)."""
    last_frame: str = ""
    """Where that exception was raised: its traceback's last 'File "...", line N' line."""
    imported: bool = True
    """The script imported harness.probe (which says so as it is imported)."""
    checked: bool = False
    """`harness plan`'s check run reached probe.measure, where the probe stopped it."""
    needs: int | None = None
    """The batches the point's loop receives, as its loader's len() says (loop_length)."""
    timed_out: bool = False
    """It was stopped at the time limit it was given (`harness plan`'s check run)."""
    notes: tuple[str, ...] = ()
    """The probe's notes on `harness plan`'s check run (what it changed there), whole, as it
    told them to the job (ProbeJob.note), in the order said."""
    probe_ended: str = ""
    """Why the probe ended the script itself ("": it did not): where the script still exited
    with an error, something raised over the probe's SystemExit (a framework's teardown)."""

    @property
    def last_line(self) -> str:
        """The line of the script's stderr that says what went wrong (argparse's `error:`
        line, an exception's), whole."""
        return self.error_line

    def status(self) -> str:
        return process_end(self.returncode)

    def reason(self) -> str:
        """Why units of the point have no row, in one line for the rows' error column: what
        happened, then the end of the script's stderr, its error line whole."""
        # An error raised over the probe's own end (a framework's teardown) is not the cause.
        over = self.returncode != 0 and bool(self.probe_ended)
        if (self.returncode == 0 or over) and self.left_after is not None:
            text = (
                f"the script's loop left harness.probe.measure early (after {self.left_after} "
                f"batches{self._needed()}): iterate it to its end (no break) so that every rung "
                "is measured"
            )
            if not over:
                return text
            text += f" ({self._over()})"
        elif over:
            text = f"harness.probe ended the script: {self.probe_ended} ({self._over()})"
        else:
            text = f"the script {self.status()} {self._where()}"
        if self.stderr_tail:
            text += f"; stderr: {self.stderr_tail}"
        return text

    def _over(self) -> str:
        return (
            f"the script then {self.status()}: an error was raised over the probe's SystemExit as "
            "it unwound, a framework's teardown; the error below is not the cause"
        )

    def _needed(self) -> str:
        if self.needs is None:
            return ""
        return (
            f" of the {self.needs} it receives, as its loader's len() says; a step limit of the "
            f"script's (a --test-nsteps) must be at least {self.needs}"
        )

    def _where(self) -> str:
        """Where it ended, with a hint only where one applies: a script that ended well
        without the probe lacks its lines; one that failed says why in its stderr."""
        if self.reached:
            return "before the probe had measured the point" if not self.done else "after the probe"
        if self.returncode != 0:
            return "without reaching harness.probe"
        if not self.imported:
            return "without importing harness.probe (its lines are missing: docs/guides/training-script.md)"
        return "without reaching harness.probe (does its loop iterate probe.measure?)"


def error_excerpt(lines: Sequence[str], limit: int = ERROR_CHARS) -> tuple[str, str, str]:
    """(excerpt, error line) of the end of a script's stderr. The error line is the exception
    of the last traceback (warnings printed after it, at exit, do not hide it), else the last
    line; the excerpt is the lines before it that fit in `limit`, then it, whole: a row's
    error ends with the line that says what went wrong (rows.short_error shows it so). The
    third is the traceback's last frame ('File "...", line N, in f'), or ""."""
    raw = [line.rstrip() for line in lines if line.strip()]
    if not raw:
        return "", "", ""
    key, frame = len(raw) - 1, ""
    if TRACEBACK in raw:
        start = len(raw) - 1 - raw[::-1].index(TRACEBACK)
        # Its frames are indented ("  File ...", the code, "^^^"): the first line that is not
        # says the exception.
        key = next((i for i in range(start + 1, len(raw)) if not raw[i][0].isspace()), key)
        frames = [line.strip() for line in raw[start:key] if line.strip().startswith('File "')]
        frame = frames[-1] if frames else ""
    shown = [line.strip() for line in raw]
    error = _shortened(shown[key])
    kept, before, size = [error], key - 1, len(error)
    while before >= 0 and size + len(shown[before]) + 3 <= limit:
        kept.insert(0, shown[before])
        size += len(shown[before]) + 3
        before -= 1
    return " | ".join(kept), error, frame


def _shortened(line: str) -> str:
    if len(line) <= LINE_CHARS:
        return line
    half = LINE_CHARS // 2
    return f"{line[:half]} … {line[-half:]}"


def process_end(returncode: int, word: str = "status") -> str:
    """ "was killed by SIGKILL (status -9)" or "exited with status 3", from Popen's returncode
    (negative: the signal that killed it); `word` names the figure in the parentheses."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name} ({word} {returncode})"
    return f"exited with status {returncode}"
