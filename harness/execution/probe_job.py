"""What the harness tells a script's `harness.probe` (ProbeJob, passed as JSON in
HARNESS_PROBE) and what the probe tells back as it goes (the milestone words of its report
file: "reached", "done", "ending:<reason>", and its notes on `harness plan`'s check run,
"note:<line>").

A concept apart from running the script (script.py: the subprocess, its environment, its end):
this is the handshake's content, which both sides read (harness/probe/handshake.py in the
script's process), and it stays torch-free, as the probe imports it before torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote

from harness.config.plan import Point
from harness.execution.dist import DistEnv

PROBE_VARIABLE = "HARNESS_PROBE"
"""What the point is, for `harness.probe` in the script's process (ProbeJob as JSON)."""


ENDING = "ending:"
"""The probe's report as it ends the script itself (handshake.end): this, then its reason,
URL-quoted (a report is one word)."""


NOTE = "note:"
"""A note of the probe's on `harness plan`'s check run (what it changed there: a framework's
validation skipped, harness/adapters/base.py `note`): this, then the line, URL-quoted."""


class ProbeEnvironmentError(ValueError):
    """HARNESS_PROBE holds something the harness did not write there."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeJob:
    """What the harness tells the script's process: the point, where its results go, the rank."""

    sweep_dir: Path
    point: Point
    env: DistEnv
    skip_done: bool
    script: Path
    report_path: Path | None = None
    """Where the probe writes how far it got ("reached", "done"), for the failed rows' words."""
    check: bool = False
    """`harness plan`'s check run: the probe exits (status 0) where the script's loop reaches
    probe.measure, once its loaders are built (check_script)."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "sweep_dir": str(self.sweep_dir),
                "point": self.point.to_json(),
                "env": asdict(self.env),
                "skip_done": self.skip_done,
                "script": str(self.script),
                "report_path": str(self.report_path) if self.report_path else None,
                "check": self.check,
            }
        )

    @staticmethod
    def from_environ(environ: Mapping[str, str] | None = None) -> ProbeJob | None:
        """The job of this process, or None when the script runs alone."""
        text = (os.environ if environ is None else environ).get(PROBE_VARIABLE)
        if not text:
            return None
        try:
            data = json.loads(text)
            return ProbeJob(
                sweep_dir=Path(data["sweep_dir"]),
                point=Point.from_json(data["point"]),
                env=DistEnv(**data["env"]),
                skip_done=bool(data["skip_done"]),
                script=Path(data["script"]),
                report_path=Path(data["report_path"]) if data.get("report_path") else None,
                check=bool(data.get("check", False)),
            )
        except Exception as e:  # torn, hand-set or of another version: never a traceback
            raise ProbeEnvironmentError(
                f"{PROBE_VARIABLE} is set but is not a point the harness gave this process "
                f"({type(e).__name__}: {' '.join(str(e).split())[:120]}); the harness sets it for "
                f"a script it runs: unset it to run the script alone"
            ) from None

    def report(self, word: str) -> None:
        """Say a milestone ("imported", "reached", "done", "left:N") once, for run_script's
        failed rows."""
        if self.report_path is None:
            return
        said = self.report_path.read_text().split() if self.report_path.exists() else []
        if word not in said:
            with self.report_path.open("a") as f:
                f.write(word + "\n")

    def note(self, line: str) -> None:
        """Tell a note on the check run (NOTE): `harness plan` reads it back whole from the
        report file, where the script's stderr keeps only its end."""
        self.report(NOTE + quote(line, safe=""))
