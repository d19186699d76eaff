"""A point whose workload is the user's own training script (`workload: {script: train.py}`).

Every rank of the point (inline, a local task, a Slurm array task) runs the script as a
subprocess, `python SCRIPT ARGS...` from the harness's working directory, with a torchrun-style
environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the
rank's DistEnv) and `HARNESS_PROBE`, which tells `harness.probe` in the script what the point is
(ProbeJob). The probe then measures the point from the script's own loop, through
`runner.measure_point`, and writes this rank's rows, timeline and meta itself.

What the script leaves undone is a failed row here, for every unit (rung, repeat) the rank has
no row for, with the script's exit status (or the signal that killed it), whether it reached
the probe, and the end of its stderr with its error line whole; the sweep goes on. The
script's stdout and stderr pass on to the job's own (its log) and into the point's folder
(script-rank<k>.out/.err).

Torch-free at import: `harness plan` and `harness submit` run the script up to its loop
(harness/execution/script_check.py) with what this module starts a script with.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import unquote

from harness.config.plan import Point
from harness.execution.dist import TORCHRUN_VARIABLES, DistEnv
from harness.execution.probe_job import ENDING, NOTE, PROBE_VARIABLE, ProbeJob
from harness.execution.script_end import Ended, error_excerpt

if TYPE_CHECKING:
    from harness.execution.point import PointOutcome

log = logging.getLogger(__name__)

STDERR_LINES = 60
"""Lines of the end of the script's stderr kept while it runs: enough to hold a traceback's
last frames, its error line and the warnings some libraries print after it, at exit."""


def command(point: Point) -> list[str]:
    """`python SCRIPT ARGS... FLAGS...` with the harness's own interpreter (its environment):
    the spec's `args`, then the script's own flags for the settings the spec names
    (`workload.flags`: Point.flag_args), so that a later flag wins, as argparse does."""
    if point.workload.script is None:
        raise ValueError(f"point {point.id} has no script")
    return [sys.executable, point.workload.script, *point.workload.args, *point.flag_args()]


def script_environment(job: ProbeJob, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment of the script: the job's, with torchrun's rank variables set
    from the rank's DistEnv (and none of torchrun's others inherited from a launching shell)."""
    base = os.environ if base is None else base
    environ = {k: v for k, v in base.items() if k not in TORCHRUN_VARIABLES}
    environ.update(_agent_store(job.env, base))
    env = job.env
    environ.update(
        RANK=str(env.rank),
        LOCAL_RANK=str(env.local_rank),
        WORLD_SIZE=str(env.world_size),
        LOCAL_WORLD_SIZE=str(env.local_world_size or env.world_size),
        # One rank alone still gets a rendezvous, for a script that always joins a group.
        MASTER_ADDR=env.master_addr or "127.0.0.1",
        MASTER_PORT=str(env.master_port or free_port()),
    )
    environ[PROBE_VARIABLE] = job.to_json()
    # Its output is passed on through pipes: unbuffered, it comes as it is written, in order.
    environ.setdefault("PYTHONUNBUFFERED", "1")
    cpus = environ.get("SLURM_CPUS_PER_TASK", "")
    if cpus.isdigit() and "OMP_NUM_THREADS" not in environ:
        # As a built-in point's job does (job._threads_from_allocation): threads for the
        # task's cores, not the node's.
        environ["OMP_NUM_THREADS"] = cpus
    return environ


AGENT_STORE = ("TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT")


def _agent_store(env: DistEnv, base: Mapping[str, str]) -> dict[str, str]:
    """torchrun's agent hosts the rendezvous store on MASTER_PORT, and the ranks it starts join
    it as clients. Where this rank is one of them (`torchrun -m harness.backends.worker`: its
    RANK and MASTER_PORT are the job's, and no submitit job owns it), the script's rank is told
    so too; else rank 0 would try to listen on the agent's port (EADDRINUSE)."""
    own = (
        base.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        and not base.get("SUBMITIT_EXECUTOR")
        and base.get("RANK") == str(env.rank)
        and base.get("MASTER_PORT") == str(env.master_port)
    )
    return {k: base[k] for k in AGENT_STORE if own and k in base}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_script(point: Point, sweep_dir: Path, *, env: DistEnv, skip_done: bool = True) -> PointOutcome:
    """This rank of the point: the script under the probe, then a failed row for every unit
    it left without one."""
    from harness_schema import layout

    script = Path(point.workload.script or "")
    point_path = layout.point_dir(sweep_dir, point.id)
    point_path.mkdir(parents=True, exist_ok=True)
    if not skip_done:  # as run_point's writer starts afresh: no row of an earlier run counts
        layout.rank_file(point_path, env.rank).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="harness-probe-") as tmp:
        job = ProbeJob(
            sweep_dir=sweep_dir,
            point=point,
            env=env,
            skip_done=skip_done,
            script=script,
            report_path=Path(tmp) / "report",
        )
        logs = layout.script_logs(point_path, env.rank)
        log.info(
            "point %s rank %d: %s (its output also in %s)",
            point.id,
            env.rank,
            " ".join(command(point)[1:]),
            logs[0].with_suffix(".{out,err}"),
        )
        ended = run_process(command(point), script_environment(job), job.report_path, logs=logs)
    if ended.returncode == -signal.SIGTERM:
        # Preemption or scancel signal every process of the step: the script may end of it a
        # moment before this rank takes its own, which then leaves its units to resume.
        from harness.execution import termination

        termination.await_own_signal()
    return account(point, sweep_dir, env, ended)


def run_process(
    argv: Sequence[str],
    environ: Mapping[str, str],
    report_path: Path | None,
    *,
    timeout: float | None = None,
    echo: bool = True,
    logs: tuple[Path, Path] | None = None,
    cwd: Path | None = None,
) -> Ended:
    """Run the script; its stdout and stderr go on to ours (`echo`) and to `logs` (its rank's
    files: stdout, stderr), as they come, and the end of its stderr is kept."""
    tail: deque[str] = deque(maxlen=STDERR_LINES)
    timed_out = False
    with contextlib.ExitStack() as stack:
        out, err = (
            (stack.enter_context(path.open("a", encoding="utf-8")) for path in logs) if logs else (None, None)
        )
        p = stack.enter_context(
            subprocess.Popen(
                list(argv), env=dict(environ), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        )
        assert p.stdout is not None and p.stderr is not None
        readers = [
            threading.Thread(
                target=_tee, args=(p.stdout, sys.stdout if echo else None, out, None), daemon=True
            ),
            threading.Thread(
                target=_tee, args=(p.stderr, sys.stderr if echo else None, err, tail), daemon=True
            ),
        ]
        for reader in readers:
            reader.start()
        try:
            returncode = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            returncode, timed_out = p.wait(), True
        except BaseException:
            # Interrupted (Ctrl-C, a job's signal): the script must not outlive its point.
            end_script(p)
            raise
        for reader in readers:
            reader.join(timeout=10)
    excerpt, error_line, frame = error_excerpt(tail)
    ended = Ended(
        returncode=returncode,
        stderr_tail=excerpt,
        error_line=error_line,
        last_frame=frame,
        reached=False,
        done=False,
    )
    return replace(ended, timed_out=timed_out, **_reported(report_path))


def _reported(report_path: Path | None) -> dict[str, Any]:
    """What the probe told the job (ProbeJob.report), as Ended's fields."""
    words = report_path.read_text().split() if report_path and report_path.exists() else []
    return {
        "reached": "reached" in words,
        "done": "done" in words,
        "left_after": next((int(w.split(":")[1]) for w in words if w.startswith("left:")), None),
        "settings": next((json.loads(w[9:]) for w in reversed(words) if w.startswith("settings:")), None),
        "imported": "imported" in words,
        "checked": "checked" in words,
        "probe_ended": next((unquote(w[len(ENDING) :]) for w in words if w.startswith(ENDING)), ""),
        "notes": tuple(unquote(w[len(NOTE) :]) for w in words if w.startswith(NOTE)),
    }


END_GRACE_S = 5.0
"""How long an interrupted script has to end on its SIGTERM before it and its processes are
killed."""


def end_script(p: subprocess.Popen[bytes]) -> None:
    """End the script and every process under it: SIGTERM to the script, then, after
    END_GRACE_S, SIGKILL to what is left of it and its DataLoader workers. Its workers are
    found before the script ends: once it has, they are init's, out of reach, and one stuck in
    `__getitem__` would live on, holding the script's stdout and stderr open, and the readers of
    this process with them (a local rank told to stop hung until the worker's read returned)."""
    import psutil

    def under() -> list[psutil.Process]:
        try:
            return psutil.Process(p.pid).children(recursive=True)
        except psutil.Error:
            return []

    below = under()
    p.terminate()
    try:
        p.wait(timeout=END_GRACE_S)
    except subprocess.TimeoutExpired:
        # Still going (a SIGTERM handler of its own): stopped, so that it starts no process
        # more, and those it started since are ended with it.
        with contextlib.suppress(OSError):
            p.send_signal(signal.SIGSTOP)
        below += [q for q in under() if q not in below]
        p.kill()
        p.wait()
    for process in below:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(below, timeout=10)


def _tee(stream: IO[bytes], console: IO[str] | None, file: IO[str] | None, tail: deque[str] | None) -> None:
    """Pass a stream on as it comes (a progress bar's `\\r` updates too, not only whole
    lines), keeping its last lines in `tail`: each as a terminal shows it (after its last
    `\\r`)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    for chunk in iter(lambda: stream.read1(1 << 16), b""):  # type: ignore[attr-defined]
        text = decoder.decode(chunk)
        for sink in (console, file):
            if sink is not None:
                sink.write(text)
                sink.flush()
        if tail is not None:
            *lines, pending = (pending + text).split("\n")
            tail.extend(line.rsplit("\r", 1)[-1] for line in lines if line.strip())
    if tail is not None and pending.strip():
        tail.append(pending.rsplit("\r", 1)[-1])


def account(point: Point, sweep_dir: Path, env: DistEnv, ended: Ended) -> PointOutcome:
    """This rank's rows once the script has ended: a failed row for each unit it has none for."""
    from harness.execution.loop_length import batches_per_loop
    from harness.execution.point import PointOutcome, open_point
    from harness_schema import rows as results

    opened = open_point(as_run(point, ended.settings), sweep_dir, env, skip_done=True)
    written = opened.written()
    ended = replace(ended, needs=batches_per_loop(as_run(point, ended.settings)))
    if opened.missing(written) or ended.returncode != 0:
        log.error("point %s rank %d: %s", point.id, env.rank, ended.reason())
    opened.rows.device = ""
    opened.fail_missing(ended.reason(), written)
    # As read back from the CSV (text cells): the rows this rank holds for the point.
    return PointOutcome.of(point, [results.RungRow.from_cells(r) for r in opened.writer.rows])


def as_run(point: Point, settings: Mapping[str, Any] | None) -> Point:
    """The point with the settings the probe said it ran with (harness/probe/harnessed.py, `_say`): the failed
    rows of a script that died then record what ran, as its ok rows do."""
    if not settings:
        return point
    loader = {k: v for k, v in settings.items() if k != "batch_size"}
    workload = replace(point.workload, batch_size=settings.get("batch_size") or point.workload.batch_size)
    return replace(point, workload=workload, loader=replace(point.loader, **loader))
