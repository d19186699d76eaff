"""Adaptive repeats on a real Slurm cluster: the undecided points as a follow-up array."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.load import load_results
from tests.harness.backends.test_adaptive import spec_text
from tests.slurm.conftest import harness, sweep_of, wait_until_idle

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

# One array task at a time: on this 2-core machine a task that starts (importing torch: seconds
# of CPU) beside one that measures slowed a 0.95 run of B to 0.71 (CI at 8b8e031), which decided
# B at three runs where the injected costs leave it undecided. On a cluster each task has its node.
SLURM = (
    "slurm: {nodes: 1, tasks_per_node: 1, gpus_per_node: 0, cpus_per_task: 1, array_parallelism: 1, "
    'time: "00:05:00"}\n'
)


# How many repeats decide a point depends on the noise: judged alone.
@pytest.mark.serial
def test_status_names_the_undecided_points_and_resume_measures_them_as_a_follow_up_array(
    tmp_path: Path,
) -> None:
    # The per-repeat costs counted in a file per point: each job of the sweep goes on from the last.
    spec = tmp_path / "adaptive.yaml"
    spec.write_text(spec_text(str(tmp_path / "calls"), "repeats: auto, max_repeats: 8") + SLURM)
    out = harness("submit", str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    sweep = sweep_of(out, tmp_path)
    assert f"repeats: auto: once these jobs end, harness resume {sweep.relative_to(tmp_path)}" in out.stdout
    first = json.loads((sweep / "jobs.json").read_text())
    wait_until_idle(first[0]["job_id"].split("_")[0])

    status = harness("status", str(sweep), cwd=tmp_path)
    assert "repeats: auto: 2 point(s) undecided against the best, to measure again (" in status.stdout
    assert f"measure them again: harness resume {sweep}" in status.stdout

    resumed = harness("resume", str(sweep), "--wait", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "repeats: auto: 2 point(s) undecided against the best, measured again (" in resumed.stdout
    assert "resubmitted 2 point(s)" in resumed.stdout
    rows = load_results([sweep]).rows
    # Repeats 0-2 from the first array, the next ones from follow-up arrays (one round, unless
    # the machine's noise asks for another), numbered on: 3, 4, ...
    for _, point in rows.groupby("point_id"):
        repeats = sorted(point["repeat"])
        assert repeats == list(range(len(repeats))) and 4 <= len(repeats) <= 8
        by_job = point.sort_values("repeat").groupby("jobid", sort=False)["repeat"].apply(list).tolist()
        assert by_job[0] == [0, 1, 2] and len(by_job) >= 2
    arrays = {e["job_id"].split("_")[0] for e in json.loads((sweep / "jobs.json").read_text())}
    assert len(arrays) >= 2
    after = harness("status", str(sweep), cwd=tmp_path)
    assert "repeats: auto: every point decided" in after.stdout
