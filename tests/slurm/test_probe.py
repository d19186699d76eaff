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
measure: {{warmup_steps: 1, steps: 4, repeats: 1}}  # one array, no follow-up: rows counted
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


def test_the_imagenet_example_as_an_array_task_of_two_ranks(tmp_path: Path) -> None:
    """jobs/imagenet_train.py (pytorch/examples' shape) on the cluster, as it is: every row ok,
    each rank's output in its point's folder, its DATALOADER line the point's own."""
    text = (REPO / "jobs" / "imagenet_script-cpu.yaml").read_text()
    text = text.replace("script: imagenet_train.py", f"script: {REPO / 'jobs' / 'imagenet_train.py'}")
    text = text.replace('"256"', '"64"').replace("results/imagenet-checkpoints", str(tmp_path / "ckpt"))
    text = text.replace("{warmup_steps: 2, steps: 12, repeats: 3}", "{warmup_steps: 1, steps: 3}")
    text = text.replace("num_workers: [0, 1, 2]", "num_workers: 1")
    spec = tmp_path / "imagenet.yaml"
    spec.write_text(text)
    out = harness("submit", str(spec), "--wait", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    sweep = sweep_of(out, tmp_path)
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 4  # ranks × rungs
    assert set(rows["world_size"]) == {2}
    (point,) = (sweep / "points").iterdir()
    first = (point / "script-rank0.out").read_text().splitlines()[0]
    assert first == "DATALOADER 1 True False False 2 False"
    assert (point / "script-rank1.err").is_file()
    assert (tmp_path / "ckpt" / "checkpoint.pth.tar").is_file()
