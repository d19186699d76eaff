"""`harness plan`'s check run of a script workload: the script run once per distinct command
line, in a scratch folder, as a rank of its point would, up to its loop's probe.measure, where
the probe stops it (a few seconds, never training); then what its end says: a refusal no point
could survive (bad input: its flags, a DataLoader's refusal of the settings, a script without the
probe), a warning of this machine (no GPU or data here), and the probe's own notes on what it
changed for the check (a framework's validation skipped).

Torch-free at import, like harness/execution/script.py, whose process running it uses.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.config.plan import Point
from harness.execution.dist import DistEnv
from harness.execution.probe_job import ProbeJob
from harness.execution.script import command, run_process, script_environment
from harness.execution.script_end import Ended
from harness_schema.settings import WORKER_ONLY

CHECK_TIMEOUT_S = 60
"""`harness plan`'s check run (check_script): the script's imports, flags and loaders, up to
its loop; a script still going after this long is stopped."""


def check_script(point: Point, *, timeout: float = CHECK_TIMEOUT_S) -> Ended:
    """Run the script as a rank of the point would, in a scratch folder, until its loop
    reaches probe.measure, where the probe stops it (`checked`): its imports, its flags
    (argparse exits 2 on a bad one) and every loader it builds before its loop, probe.loader's
    with the point's settings. It never trains, validates or saves: what it writes to relative
    paths before its loop lands in the scratch folder, deleted after; it is stopped after
    `timeout` seconds."""
    with tempfile.TemporaryDirectory(prefix="harness-check-") as tmp:
        scratch = Path(tmp) / "cwd"
        scratch.mkdir()
        job = ProbeJob(
            sweep_dir=Path(tmp) / "sweep",
            point=point,
            env=DistEnv(local_world_size=1),
            skip_done=True,
            script=Path(point.workload.script or ""),
            report_path=Path(tmp) / "report",
            check=True,
        )
        argv = [*command(point)[:2], *absolute_paths(command(point)[2:], Path.cwd())]
        return run_process(
            argv, script_environment(job), job.report_path, timeout=timeout, echo=False, cwd=scratch
        )


def absolute_paths(args: Sequence[str], base: Path) -> list[str]:
    """The arguments with those that name an existing file or folder relative to `base` (the
    working directory a point's run has: `--data data/images`, `--data=data/images`) made
    absolute, for a run from another folder."""
    out = []
    for arg in args:
        flag, equals, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        if value and not Path(value).is_absolute() and (base / value).exists():
            value = str(base / value)
        out.append(f"{flag}{equals}{value}")
    return out


def check_refusal(ended: Ended, args: str, point: Point | None = None) -> tuple[str, str] | None:
    """(field, one line) where the check run says that no point with these flags can run:
    argparse's refusal, a DataLoader's refusal of the settings (its ValueError, raised where
    the loaders are built, before any data is read), a script that never imports the probe or
    ends without reaching probe.measure. None where it passed, or failed for a reason of this
    machine (no GPU, no data here: `check_warning`). `point`: the point of these flags, whose
    settings left to the script are named in a DataLoader's refusal where one is the cause."""
    if ended.checked and ended.returncode == 0:
        return None
    if ended.returncode == 2 and ended.error_line.startswith("harness.probe:"):
        return "workload.script", ended.error_line  # the probe's own refusal (ranks of its own)
    if ended.returncode == 2 and not ended.reached and not ended.timed_out:
        return "workload.args", f"the script refused its flags ({args}): {ended.error_line}"
    if ended.error_line.startswith("ValueError") and _DATALOADER in ended.last_frame.replace("\\", "/"):
        return (
            "workload.args",
            f"a DataLoader of the script refused the settings ({args}): {ended.error_line}"
            + _own_setting_hint(ended.error_line, point),
        )
    if not ended.imported and (ended.returncode == 0 or ended.timed_out):
        ran = f"for {CHECK_TIMEOUT_S} s" if ended.timed_out else "to its end"
        return "workload.script", (
            f"the script never imports harness.probe (its check run went {ran} without it, "
            "and was stopped): add the probe's lines (docs/guides/training-script.md)"
        )
    if ended.returncode == 0:
        return "workload.script", (
            f"the script ended (status 0) before its loop reached harness.probe.measure ({args}): "
            "the loop to measure must iterate probe.measure(loader, device)"
        )
    return None


_DATALOADER = "torch/utils/data/"


def _own_setting_hint(error_line: str, point: Point | None) -> str:
    """Where PyTorch refused, with the spec's no workers, a setting the spec leaves to the
    script (the course's `--persistent-workers`, on by default): the spec can name it, and the
    harness then gives each point the value PyTorch allows with its workers."""
    if point is None or "num_workers" in point.script_keeps or point.loader.num_workers:
        return ""  # the workers are the script's own, or there are some: not this case
    keeps = point.script_keeps
    own = [name for name in WORKER_ONLY if name in keeps and name in error_line]
    if not own:
        return ""
    return (
        f" ({own[0]} is the script's own: the spec's loader section does not name it; name it "
        "there, its flag mapped in workload.flags, and each point passes the value PyTorch "
        "allows with its workers, as plan's adjusted column shows)"
    )


def check_notes(ended: Ended) -> list[str]:
    """The probe's own notes on the check run (a framework's validation skipped), as it told
    them to the job (its report file: whole, however much the script printed after them),
    without the probe's prefix."""
    return [note.removeprefix("harness.probe: ") for note in ended.notes]


def check_warning(ended: Ended) -> str:
    """What a check run that neither passed nor was refused says (a login node without the
    GPU or the data the script wants), in one line; "" where it passed."""
    if ended.checked and ended.returncode == 0:
        return ""
    if ended.timed_out:
        return (
            f"it did not reach probe.measure within {CHECK_TIMEOUT_S} s and was stopped (its data "
            "may be slow to open here); the points run it in full"
        )
    return ended.reason()
