"""What the probe's tests share: a data set, a collate of the script's own, the points of a
script workload, and what the probe told the job and wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.execution.probe_job import ProbeJob
from harness_schema import layout
from harness_schema import rows as results

SCRIPT = Path(__file__).resolve().parents[2] / "fixtures" / "probe_script.py"


class Numbers(Dataset[tuple[torch.Tensor, int]]):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.full((3,), float(index)), index


def pairs(samples: list[tuple[torch.Tensor, int]]) -> dict[str, Any]:
    """A collate of the script's own: a dict batch with a note of who made it."""
    return {
        "x": torch.stack([s[0] for s in samples]),
        "y": torch.tensor([s[1] for s in samples]),
        "by": "mine",
    }


# --- under the harness, in this process ----------------------------------------------------


def script_point(loader: str = "{num_workers: 0}", rungs: str = "[device_batch, host_batch, full]") -> Point:
    spec = parse_spec(
        f"name: p\nworkload: {{script: {SCRIPT}}}\nmeasure: {{warmup_steps: 1, steps: 3, repeats: 1}}\n"
        f"rungs: {rungs}\nloader: {loader}\n"
    )
    (point,) = expand(spec).points
    return point


def milestones(job: ProbeJob) -> list[str]:
    """What the probe told the job, but the settings it ran with."""
    assert job.report_path is not None
    return [w for w in job.report_path.read_text().split() if not w.startswith("settings:")]


def rows_of(job: ProbeJob) -> list[dict[str, str]]:
    return results.read_rows(layout.rank_file(layout.point_dir(job.sweep_dir, job.point.id), 0))


# --- real scripts' loops, run as the harness runs them (a subprocess per rank) ------------------

COURSE = Path(__file__).resolve().parents[2] / "fixtures" / "course_loop.py"
LADDER = "[device_batch, host_batch, processed_sample, raw_sample, full]"


def course_point(
    out: Path,
    *args: str,
    loader: str = "{num_workers: 1}",
    rungs: str = LADDER,
    repeats: int = 3,
    steps: int = 3,
) -> Point:
    spec = parse_spec(
        f"name: course\nworkload: {{script: {COURSE}, args: {['--out', str(out), *args]}}}\n"
        f"measure: {{warmup_steps: 1, steps: {steps}, repeats: {repeats}}}\nrungs: {rungs}\nloader: {loader}\n"
    )
    (point,) = expand(spec).points
    return point
