"""harness/probe/handshake.py: the job read from HARNESS_PROBE, the plan's check run, the
settings told to the job, the script's own ranks and a one-shot loader refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

import harness.probe as probe
from harness.execution.probe_job import PROBE_VARIABLE
from harness_schema import layout
from harness_schema import rows as results
from tests.harness.probe.common import (
    Numbers,
    course_point,
    milestones,
    rows_of,
    script_point,
)


def test_the_plans_check_run_builds_the_points_loader_and_goes_on_to_the_loop(harnessed) -> None:  # type: ignore[no-untyped-def]
    """It stops at probe.measure (os._exit: tests/harness/execution/test_script.py runs it),
    so that the loaders the script builds after probe.loader are checked too."""
    job = harnessed(script_point("{num_workers: 0, drop_last: true}"), check=True)
    loader = probe.loader(Numbers(), batch_size=2)
    assert loader.drop_last is True  # the point's settings, as the point's run builds it
    assert milestones(job)[0] == "reached"
    assert not job.sweep_dir.exists()  # nothing measured, nothing written


def test_the_failed_rows_of_a_script_that_died_record_the_settings_it_ran_with(tmp_path: Path) -> None:
    from harness.execution.runner import run_point

    point = course_point(tmp_path, "--crash-at", "2", "--no-non-blocking", rungs="[full]", repeats=2)
    assert run_point(point, tmp_path / "sweep").failed == 2
    rows = results.read_rows(layout.rank_file(layout.point_dir(tmp_path / "sweep", point.id), 0))
    # The script's batch size, pin_memory and non_blocking, the point's num_workers: as an ok
    # row would say, not the spec's defaults.
    ran = [(r["status"], r["batch_size"], r["num_workers"], r["pin_memory"], r["non_blocking"]) for r in rows]
    assert ran == [("failed", "4", "1", "True", "False")] * 2


def test_a_script_that_spawns_its_own_ranks_is_refused_in_one_line(tmp_path: Path) -> None:
    from harness.execution.runner import run_point

    point = course_point(tmp_path, "--multiprocessing-distributed", rungs="[host_batch, full]", repeats=1)
    assert run_point(point, tmp_path / "sweep").failed == 2
    rows = results.read_rows(layout.rank_file(layout.point_dir(tmp_path / "sweep", point.id), 0))
    assert {r["error"] for r in rows} == {
        "harness.probe: this process was started by the script (mp.spawn or multiprocessing), not by "
        "the harness: under the harness every rank is a process the harness starts with torchrun's "
        "variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK for the device): launch no "
        "ranks yourself (no mp.spawn, no --multiprocessing-distributed) and join with "
        "init_method='env://' (or probe.init_distributed())"
    }
    assert not (tmp_path / "checkpoint-rank0.pt").exists()  # refused before it trained


def test_a_process_group_of_the_scripts_own_size_is_refused(harnessed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import torch.distributed as dist

    from harness.execution.script import free_port

    job = harnessed(script_point(rungs="[full]"), world_size=2)
    # The script's own tcp:// group of one, where the point runs two ranks.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", world_size=1, rank=0)
    try:
        with pytest.raises(SystemExit) as stopped:
            probe.loader(Numbers(), batch_size=2)
    finally:
        dist.destroy_process_group()
    assert stopped.value.code == 2
    (row,) = rows_of(job)
    assert row["status"] == "failed" and row["error"].startswith(
        "harness.probe: the script's process group has 1 rank(s) (this one 0) where the point runs 2 "
        "(this one 0): under the harness every rank is a process the harness starts"
    )


def test_under_the_harness_a_generator_around_the_loader_is_refused_in_one_line(harnessed, capfd) -> None:  # type: ignore[no-untyped-def]
    # Before: device_batch and host_batch took its first batches, and full failed with "the
    # loader generator yields no batch": the generator had been read.
    from tests.fixtures.metric_logger import MetricLogger

    job = harnessed(script_point())
    loader = DataLoader(Numbers(), batch_size=2)
    with pytest.raises(SystemExit) as ended:
        probe.measure(MetricLogger().log_every(loader, 10), "cpu")
    assert ended.value.code == 2
    line = capfd.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("harness.probe: the loader is a generator, an iterator that can be read once")
    assert [(r["rung"], r["status"], r["error"]) for r in rows_of(job)] == [
        (rung, "failed", line) for rung in ("device_batch", "host_batch", "full")
    ]


@pytest.mark.parametrize("value", ['{"sweep_dir": "/tmp/x", "poi', '{"sweep_dir": "/tmp/x"}', "[1, 2]"])
def test_a_torn_harness_probe_variable_is_one_line_and_exit_2_never_a_traceback(value: str) -> None:
    """The variable decides where the probe writes: one that is not the harness's (torn,
    hand-set) is said in one line, where a JSONDecodeError's traceback was."""
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", "import harness.probe"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo), PROBE_VARIABLE: value},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "harness.probe: HARNESS_PROBE is set but is not a point the harness gave this process ("
    )
    assert line.endswith("the harness sets it for a script it runs: unset it to run the script alone")
