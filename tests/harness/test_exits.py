"""SIGTERM or SIGHUP to a running `harness run` (`kill`, scancel, a closed terminal, a
preemption) is taken as Ctrl-C: one line saying how to go on, exit 130, and no process of the
sweep left behind, a DataLoader worker stuck in `__getitem__` included (before: the harness
died silently at once, its stuck worker reparented to init for good, holding the caller's
pipes open; under the local backend the whole job went on measuring beside a resume)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.fixtures.processes import alive, wait_for
from tests.fixtures.workloads import stuck_pids

REPO = Path(__file__).resolve().parents[2]

SPEC = """\
name: term
workload:
  dataset: tests.fixtures.workloads:stuck_dataset
  dataset_args: {{size: 16, stuck: 5, log: {log}}}
  model: linear
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 4}}
rungs: [full]
loader: {{num_workers: 2}}
"""


@pytest.mark.parametrize(
    ("backend", "sig"), [("inline", "SIGTERM"), ("local", "SIGTERM"), ("inline", "SIGHUP")]
)
def test_a_run_terminated_while_a_worker_is_stuck_says_how_to_go_on_and_leaves_no_process(
    tmp_path: Path, backend: str, sig: str
) -> None:
    log = tmp_path / "stuck"
    log.mkdir()
    (tmp_path / "term.yaml").write_text(SPEC.format(log=log))
    run = _start(tmp_path, "--backend", backend)
    tree: list[psutil.Process] = []
    try:
        wait_for(lambda: stuck_pids(log), "a worker stuck in __getitem__", 120.0)
        tree = psutil.Process(run.pid).children(recursive=True)
        run.send_signal(getattr(signal, sig))
        assert run.wait(timeout=120) == 130
        wait_for(lambda: not [p for p in tree if alive(p)], "the sweep's processes ended", 30)
    finally:
        for process in [p for p in tree if alive(p)]:
            process.kill()  # what the old code left behind, not left to the next test
        if run.poll() is None:
            run.kill()
    (sweep,) = (tmp_path / "results" / "term").iterdir()
    lines = [line for line in (tmp_path / "err").read_text().splitlines() if line.startswith("harness: ")]
    assert lines == [
        f"harness: terminated by {sig}; what was measured is kept; go on with: harness resume results/term/{sweep.name}"
    ]
    assert {p.pid for p in tree} >= set(stuck_pids(log))  # the stuck worker was among those ended
    assert not (sweep / "sweep.lock").exists()  # given back: resume goes on at once


def _start(tmp_path: Path, *args: str, ignore_hangup: bool = False) -> subprocess.Popen[bytes]:
    out, err = (tmp_path / "out").open("w"), (tmp_path / "err").open("w")
    # Files, not pipes: a process left behind would hold a pipe open and hang the test.
    return subprocess.Popen(
        [sys.executable, "-m", "harness", "run", "term.yaml", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=out,
        stderr=err,
        start_new_session=True,  # its own session: the signal reaches the harness alone
        # As nohup starts it: SIGHUP ignored; else its default, whatever this test's own process
        # inherited (a suite run under nohup ignores SIGHUP, and a child would inherit that).
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN if ignore_hangup else signal.SIG_DFL),
    )


def test_a_run_started_under_nohup_outlives_its_terminal(tmp_path: Path) -> None:
    """SIGHUP ignored by whoever started the harness (nohup) stays ignored: the run goes on
    to its end (here the stuck worker's LoaderTimeout, a failed point: exit 1)."""
    log = tmp_path / "stuck"
    log.mkdir()
    (tmp_path / "term.yaml").write_text(SPEC.format(log=log) + "limits: {batch_timeout_s: 3}\n")
    run = _start(tmp_path, ignore_hangup=True)
    try:
        wait_for(lambda: stuck_pids(log), "a worker stuck in __getitem__", 120.0)
        run.send_signal(signal.SIGHUP)
        assert run.wait(timeout=120) == 1
    finally:
        if run.poll() is None:
            run.kill()
    err = (tmp_path / "err").read_text()
    assert "terminated" not in err
    assert "LoaderTimeout: no batch from the DataLoader for 3 s" in err


def test_a_process_that_leaves_its_objects_to_the_exit_still_runs_its_finally_and_atexit_and_keeps_its_status() -> (
    None
):
    """What a rank or a probed script relies on after leave_objects_to_the_exit (gc.freeze):
    its `finally` blocks and atexit handlers run, a cycle made after it is still collected,
    and its exit status is its own."""
    code = """
import atexit, gc, sys, weakref
from harness.exits import leave_objects_to_the_exit

class Node:
    pass

atexit.register(lambda: print("atexit ran", flush=True))
try:
    leave_objects_to_the_exit()
    later = Node()
    later.me = later  # a cycle made after: collected as ever
    alive = weakref.ref(later)
    del later
    gc.collect()
    print("cycle made after collected:", alive() is None, flush=True)
    sys.exit(3)
finally:
    print("finally ran", flush=True)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == ["cycle made after collected: True", "finally ran", "atexit ran"]
