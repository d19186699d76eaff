"""SIGTERM to a rank and its DataLoader workers mid-window, as Slurm sends it to every process
of the step on preemption or scancel: the unit under way keeps no row (before: a failed row
"DataLoader worker (pid(s) N) exited unexpectedly", blaming the loader, and taken for done by
a requeue), no process is left, and `harness resume` measures the unit."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from torch.utils.data import DataLoader, Dataset

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution import loader_stream, termination
from harness.exits import Terminated
from harness_schema import layout
from harness_schema import rows as results
from tests.fixtures.processes import alive, wait_for
from tests.fixtures.workloads import stuck_pids

REPO = Path(__file__).resolve().parents[3]

SPEC = """\
name: term
workload:
  dataset: tests.fixtures.workloads:stuck_once_dataset
  dataset_args: {{size: 16, stuck: 5, log: {log}}}
  model: linear
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 4}}
rungs: [full]
loader: {{num_workers: 2}}
slurm: {{tasks_per_node: 1, gpus_per_node: 0}}
"""


def _harness(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    # Files, not pipes: a process left behind would hold a pipe open and hang the test.
    out, err = (tmp_path / "out").open("w"), (tmp_path / "err").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=out,
        stderr=err,
        start_new_session=True,
    )


def test_a_rank_terminated_mid_window_leaves_its_unit_to_resume_not_a_loader_failure(tmp_path: Path) -> None:
    log = tmp_path / "stuck"
    log.mkdir()
    (tmp_path / "term.yaml").write_text(SPEC.format(log=log))
    run = _harness(tmp_path, "run", "term.yaml", "--backend", "local")
    step: list[psutil.Process] = []
    try:
        wait_for(lambda: stuck_pids(log), "a worker stuck in __getitem__ (mid-window)", 180.0)
        rank = psutil.Process(stuck_pids(log)[0]).parent()
        assert rank is not None
        step = [rank, *rank.children(recursive=True)]  # the rank and its workers, as Slurm
        for process in step:
            process.send_signal(signal.SIGTERM)
        assert run.wait(timeout=180) == 1
        wait_for(lambda: not [p for p in step if alive(p)], "the rank and its workers ended", 60)
    finally:
        for process in [p for p in step if alive(p)]:
            process.kill()
        if run.poll() is None:
            run.kill()
    (sweep,) = (tmp_path / "results" / "term").iterdir()
    (point,) = expand(parse_spec(SPEC.format(log=log))).points
    rank_file = layout.rank_file(layout.point_dir(sweep, point.id), 0)
    err = (tmp_path / "err").read_text()
    assert "exited unexpectedly" not in err
    rows = results.read_rows(rank_file) if rank_file.exists() else []
    assert [r for r in rows if r.get("rung")] == []  # the unit under way: no row, nor a failed one
    # The local backend's line for the failed job: the rank's last, what happened and what next.
    assert "terminated by SIGTERM; its units not done are measured again on resume" in err

    resume = _harness(tmp_path, "resume", str(sweep.relative_to(tmp_path)))
    assert resume.wait(timeout=300) == 0, (tmp_path / "err").read_text()
    rows = results.read_rows(rank_file)
    assert [(r["rung"], r["status"]) for r in rows if r.get("rung")] == [("full", "ok")]


def test_a_worker_death_before_the_ranks_own_sigterm_is_the_termination() -> None:
    """The worker may die first (its SIGCHLD before the rank's SIGTERM): the rung waits the
    grace for the rank's own signal and ends as terminated, not as the loader's failure."""
    death = RuntimeError("DataLoader worker (pid(s) 4242) exited unexpectedly")
    with pytest.raises(Terminated, match="SIGTERM"), termination.terminable():
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        termination.reraise_if_terminated(death)


def test_a_worker_death_with_no_sigterm_is_the_rungs_failure() -> None:
    with termination.terminable():
        termination.reraise_if_terminated(
            RuntimeError("DataLoader worker (pid 7) is killed by signal: Killed.")
        )
        termination.reraise_if_terminated(ValueError("a bad sample"))  # no grace waited for others
    assert termination.signal_taken() is None


class _Dying(Dataset[int]):
    """A worker that dies at its third sample: of a segfault, an exit status of its own, or
    a SIGKILL (the OOM killer's, or Slurm's after KillWait)."""

    def __init__(self, death: str) -> None:
        self.death = death

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> int:
        if index == 2:
            if self.death == "segfault":
                ctypes.string_at(0)
            elif self.death == "exit":
                os._exit(3)
            elif self.death == "sys.exit":
                sys.exit(1)
            else:
                os.kill(os.getpid(), getattr(signal, self.death))
            time.sleep(30)  # not reached: a signal's default ends the worker first
        return index  # not a tensor: none is shared with the parent through a file descriptor


class _Clock:
    """termination's clock, seen from the test: how long reraise_if_terminated waited."""

    def __init__(self) -> None:
        self.now, self.waited = 0.0, 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.waited += seconds


@contextmanager
def _worker_death(death: str) -> Iterator[RuntimeError]:
    """The error a DataLoader raises when its worker dies of `death`; its workers ended after,
    as a rung's stream is closed (else PyTorch's SIGCHLD handler raises the death again later)."""
    iterator = iter(DataLoader(_Dying(death), batch_size=1, num_workers=1, collate_fn=list))
    try:
        with pytest.raises(RuntimeError, match="DataLoader worker") as caught:
            for _ in iterator:
                pass
        yield caught.value
    finally:
        loader_stream.end_workers(iterator)


@pytest.mark.parametrize("death", ["segfault", "exit", "sys.exit"])
def test_a_worker_that_crashed_on_its_own_is_the_rungs_failure_with_no_grace(
    monkeypatch: pytest.MonkeyPatch, death: str
) -> None:
    """A segfault, `os._exit(3)`, `sys.exit(1)` in a worker: no SIGTERM is coming, so the rung
    fails at once (every such point waited termination.GRACE_S for one before)."""
    clock = _Clock()
    monkeypatch.setattr(termination, "time", clock)
    with termination.terminable(), _worker_death(death) as error:
        termination.reraise_if_terminated(error)  # returns: the rung's failure
    assert clock.waited == 0
    assert termination.signal_taken() is None


@pytest.mark.parametrize("death", ["SIGTERM", "SIGKILL"])
def test_a_worker_killed_as_a_terminated_job_is_waits_for_the_ranks_own_signal(
    monkeypatch: pytest.MonkeyPatch, death: str
) -> None:
    """Killed by SIGTERM or SIGKILL (what a job's termination sends): the rung waits the grace
    for the rank's own SIGTERM, and with none, is the rung's failure."""
    clock = _Clock()
    monkeypatch.setattr(termination, "time", clock)
    with termination.terminable(), _worker_death(death) as error:
        termination.reraise_if_terminated(error)
    assert clock.waited >= termination.GRACE_S


SCRIPT_SPEC = """\
name: scriptterm
workload: {{script: {script}, args: ["--read-ms", "600000", "--num-workers", "2", "--log-file", "{marker}"]}}
measure: {{warmup_steps: 1, steps: 4, repeats: 1}}
rungs: [full]
loader: {{num_workers: 2}}
slurm: {{tasks_per_node: 1, gpus_per_node: 0}}
"""


def _script_with_workers(marker: Path) -> psutil.Process | None:
    """The user's script (its --log-file `marker` names it) once its two workers read."""
    for process in psutil.process_iter(["cmdline"]):
        if str(marker) in (process.info["cmdline"] or []):
            try:
                if len(process.children()) >= 2:
                    return process
            except psutil.Error:
                continue
    return None


@pytest.mark.parametrize("to", ["rank", "step", "step-own-handler"])
def test_a_script_point_terminated_mid_window_ends_as_the_builtin_step_does(tmp_path: Path, to: str) -> None:
    """A user's script under harness.probe, its workers reading (stuck: a read of 600 s), and
    SIGTERM to its rank alone (`kill` of a local rank) or to every process of the step (Slurm's
    preemption or scancel). Before, the rank alone: the script ended, its workers lived on
    (init's), holding its stdout open, and the rank hung reading it until they did. Now, either
    way: the rank ends with its line, no process of the point is left, and the unit has no row
    (resume measures it). A script with a SIGTERM handler of its own (it checkpoints on
    preemption) outlived its workers' death by the signal, and the probe wrote the loader's
    failed row for it (`DataLoader worker (pid N) is killed by signal: Terminated`)."""
    marker = tmp_path / "script.log"
    spec = SCRIPT_SPEC.format(script=REPO / "tests" / "fixtures" / "probe_script.py", marker=marker)
    if to == "step-own-handler":
        spec = spec.replace('"--log-file"', '"--on-sigterm", "--log-file"')
    (tmp_path / "s.yaml").write_text(spec)
    run = _harness(tmp_path, "run", "s.yaml", "--backend", "local")
    step: list[psutil.Process] = []
    try:
        wait_for(lambda: _script_with_workers(marker), "the script's two workers reading", 180.0)
        script = _script_with_workers(marker)
        assert script is not None
        rank = script.parent()
        assert rank is not None
        step = [rank, script, *script.children(recursive=True)]
        for process in step if to.startswith("step") else [rank]:
            process.send_signal(signal.SIGTERM)
        assert run.wait(timeout=180) == 1
        wait_for(lambda: not [p for p in step if alive(p)], "the rank, the script and its workers ended", 60)
    finally:
        for process in [p for p in step if alive(p)]:
            process.kill()
        if run.poll() is None:
            run.kill()
    err = (tmp_path / "err").read_text()
    assert "terminated by SIGTERM; its units not done are measured again on resume" in err
    assert "exited unexpectedly" not in err
    (sweep,) = (tmp_path / "results" / "scriptterm").iterdir()
    (point,) = expand(parse_spec(spec)).points
    rank_file = layout.rank_file(layout.point_dir(sweep, point.id), 0)
    rows = results.read_rows(rank_file) if rank_file.exists() else []
    assert [r for r in rows if r.get("rung")] == []  # the unit under way: no row, nor a failed one
