"""A user's own training script as a real Slurm job array: each array task is a point, each of
its 2 tasks a DDP rank that runs the script under the probe (see conftest for the cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.load import load_results
from tests.slurm.conftest import REPO, harness, sweep_of

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

SCRIPT = REPO / "tests" / "fixtures" / "probe_script.py"


def test_an_array_of_script_points_gives_rows_a_table_and_a_ladder(tmp_path: Path) -> None:
    spec = tmp_path / "script.yaml"
    spec.write_text(
        f"""\
name: script
workload: {{script: {SCRIPT}, args: [--step-ms, "20", --read-ms, "5"]}}
measure: {{warmup_steps: 1, steps: 4}}
rungs: [host_batch, processed_sample, full]
loader: {{num_workers: [0, 1]}}
slurm: {{nodes: 1, tasks_per_node: 2, gpus_per_node: 2, cpus_per_task: 1, time: "00:05:00"}}
"""
    )
    out = harness("submit", str(spec), "--wait", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "submitted 2 point(s) as job array" in out.stdout
    rows = load_results([sweep_of(out, tmp_path)]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 2 * 3  # points × ranks × rungs
    # Every point ran as 2 ranks of one array task, with the script's own batch size.
    assert sorted(rows.groupby("point_id")["rank"].apply(lambda r: tuple(sorted(set(r))))) == [(0, 1)] * 2
    assert set(rows["world_size"]) == {2} and set(rows["batch_size"]) == {2}
    assert rows["jobid"].str.fullmatch(r"\d+_[01]").all()
    assert set(rows["script"]) == {str(SCRIPT)}
    # The report: the course's table (one row per point) and the ladder of each point.
    assert "num_workers" in out.stdout and out.stdout.count("caching ladder, node") == 2
