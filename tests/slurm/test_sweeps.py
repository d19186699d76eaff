"""Real sweeps on a real Slurm cluster (see conftest): arrays, DDP ranks, status, resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.load import load_results
from harness_schema import rows as results
from tests.fixtures.workloads import read_indices
from tests.slurm.conftest import REPO, harness, sweep_of, wait_until_idle

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

GRID = """\
name: {name}
workload:
  dataset: {dataset}
  dataset_args: {{size: 64{dataset_args}}}
  model: linear
  batch_size: [4, 8]
  device: cpu
# repeats: 1, one run a point and no follow-up: these tests count rows, jobs and arrays.
measure: {{warmup_steps: 1, steps: 3, repeats: 1}}
loader: {{num_workers: [0, 1]}}
slurm: {{nodes: {nodes}, tasks_per_node: 2, gpus_per_node: 2, cpus_per_task: 1, time: "00:05:00", array_parallelism: {parallel}}}
"""


def write(
    tmp_path: Path,
    name: str = "grid",
    dataset: str = "fake_cifar",
    nodes: int = 1,
    parallel: int = 4,
    *,
    one_point: bool = False,
    extra: str = "",
    dataset_args: str = "",
) -> Path:
    """GRID as a spec file; `one_point` keeps one batch size and one num_workers;
    `dataset_args` adds to the dataset's (", key: value"). The device is the CPU: the test
    cluster's GPUs are fake (/dev/tty*), and on a machine with a real GPU `auto` would take it
    for every rank."""
    text = GRID.format(name=name, dataset=dataset, nodes=nodes, parallel=parallel, dataset_args=dataset_args)
    if one_point:
        text = text.replace("[4, 8]", "4").replace("[0, 1]", "0")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text + extra)
    return path


def settings_of(rows) -> set[tuple]:
    ok = rows[rows["status"] == "ok"]
    return set(
        ok[["batch_size", "num_workers", "prefetch_factor"]].astype(str).itertuples(index=False, name=None)
    )


def test_an_array_of_ddp_points_gives_the_inline_table(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    log = tmp_path_factory.mktemp("indices")  # which samples each rank read (outside tmp_path)
    spec = write(
        tmp_path, dataset="tests.fixtures.workloads:logged_indices", dataset_args=f", log: {str(log)!r}"
    )
    # --wide: every column, as inline's (a node's table of one point says its settings once
    # above it, where inline's table of four shows them as columns).
    out = harness("submit", str(spec), "--wait", "--wide", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "submitted 4 point(s) as job array" in out.stdout
    sweep = sweep_of(out, tmp_path)
    slurm_rows = load_results([sweep]).rows
    # Every point ran as 2 DDP ranks with Slurm's job ids, each on its own slice of the data.
    assert sorted(slurm_rows.groupby("point_id")["rank"].apply(lambda r: tuple(sorted(r)))) == [(0, 1)] * 4
    assert set(slurm_rows["world_size"]) == {2}
    array = slurm_rows["jobid"].iloc[0].split("_")[0]
    assert {j.split("_")[0] for j in slurm_rows["jobid"]} == {array}
    assert (slurm_rows["samples"] == 3 * slurm_rows["batch_size"]).all()  # 3 measured steps
    assert (slurm_rows["epoch_steps"] == 32 // slurm_rows["batch_size"]).all()  # 64 samples, 2 ranks
    for jobid in set(slurm_rows["jobid"]):
        # A rank's first 32 indices are its first epoch's (the sampler gives it 32 of the 64).
        first, second = (read_indices(log / f"{jobid}-rank{k}.txt")[:32] for k in (0, 1))
        assert len(set(first)) == len(first) and len(set(second)) == len(second), jobid
        assert set(first).isdisjoint(second), jobid
    meta = json.loads(next(sweep.glob("points/*/meta-rank1.json")).read_text())
    assert meta["cuda_visible_devices"] in ("0,1", "2,3") and meta["world_size"] == 2
    # Nothing scattered in the working directory: logs and pickles are in the sweep.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.yaml", "results"]
    assert list((sweep / "slurm").glob("*/*_0_log.out"))

    inline = harness("run", str(spec), "--wide", cwd=tmp_path)
    assert inline.returncode == 0, inline.stderr
    inline_sweep = tmp_path / inline.stdout.split("results: ")[1].strip()
    assert settings_of(load_results([inline_sweep]).rows) == settings_of(slurm_rows)
    header = next(line for line in out.stdout.splitlines() if line.startswith("jobid")).split()
    inline_header = next(line for line in inline.stdout.splitlines() if line.startswith("jobid")).split()
    assert header[: len(inline_header)] == inline_header


def test_a_point_on_two_nodes_runs_four_ranks_named_by_node(tmp_path: Path) -> None:
    spec = write(tmp_path, "wide", nodes=2, parallel=1, one_point=True)
    out = harness("submit", str(spec), "--wait", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = load_results([sweep_of(out, tmp_path)]).rows
    assert sorted(rows["rank"]) == [0, 1, 2, 3]
    assert set(rows["world_size"]) == {4}
    assert dict(rows.groupby("hostname")["rank"].apply(sorted)) == {"n1": [0, 1], "n2": [2, 3]}
    assert "node n1+n2" in out.stdout  # one table for the point, titled by its nodes


def test_cancelled_points_are_resumed_and_every_point_ends_up_once(tmp_path: Path) -> None:
    spec = write(tmp_path, name="cancel", parallel=1)
    out = harness("submit", str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    sweep = sweep_of(out, tmp_path)
    jobs = json.loads((sweep / "jobs.json").read_text())
    array = jobs[0]["job_id"].split("_")[0]
    # One task at a time: tasks 2 and 3 are still pending; cancel them.
    subprocess.run(["scancel", f"{array}_2", f"{array}_3"], check=True)
    wait_until_idle(array)
    status = harness("status", str(sweep), cwd=tmp_path)
    assert status.returncode == 1
    assert "2 cancelled, 2 completed" in status.stdout
    assert f"harness resume {sweep}" in status.stdout

    resumed = harness("resume", str(sweep), "--wait", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resubmitted 2 point(s)" in resumed.stdout
    after = harness("status", str(sweep), cwd=tmp_path)
    assert after.returncode == 0 and "4 completed" in after.stdout
    rows = load_results([sweep]).rows
    assert len(rows) == 4 * 2  # 4 points × 2 ranks × 1 (rung, repeat): none twice, none lost
    assert rows.groupby(["point_id", "rank"]).size().eq(1).all()
    assert len(json.loads((sweep / "jobs.json").read_text())) == 6


def test_a_crashing_point_is_reported_failed_and_the_rest_complete(tmp_path: Path) -> None:
    spec = tmp_path / "crash.yaml"
    spec.write_text(
        GRID.format(
            name="crash",
            dataset='["fake_cifar", "tests.fixtures.workloads:raising_dataset"]',
            nodes=1,
            parallel=4,
            dataset_args="",
        ).replace("batch_size: [4, 8]", "batch_size: 4")
    )
    out = harness("submit", str(spec), "--wait", cwd=tmp_path)
    assert out.returncode == 1
    sweep = sweep_of(out, tmp_path)
    status = harness("status", str(sweep), cwd=tmp_path)
    assert "2 completed, 2 failed" in status.stdout
    failed_lines = [line for line in status.stdout.splitlines() if " failed " in line]
    assert len(failed_lines) == 2
    assert all("cannot read sample" in line and "disk on fire" in line for line in failed_lines)
    rows = load_results([sweep]).rows
    assert (rows[rows["dataset"] == "fake_cifar"]["status"] == "ok").all()


def test_a_standalone_sbatch_script_runs_the_same_points(tmp_path: Path) -> None:
    spec = write(tmp_path, name="byhand")
    out = harness("sbatch", str(spec), "-o", "sbatch", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    script = next((tmp_path / "sbatch").glob("byhand-*.sbatch"))
    sweep = Path(out.stdout.split("results in ")[1].splitlines()[0].strip())
    submitted = subprocess.run(
        ["sbatch", "--parsable", str(script)], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    wait_until_idle(submitted.stdout.strip().split(";")[0])
    for point_path in (sweep / "points").iterdir():
        assert results.point_complete(point_path, ["full"], 1, world_size=2)
    assert len(list((sweep / "points").iterdir())) == 4


def test_a_signalled_point_is_not_requeued_and_resume_failed_measures_the_rest(tmp_path: Path) -> None:
    """Slurm sends USR2 before the time limit (--signal). A point past its limit is not
    requeued (one that hangs would hang again, max_num_timeout times over: issue 26): its units
    not done are failed rows naming the limit, its finished rung is kept, and `harness resume
    --failed` measures the rest. The signal is sent here by hand, as Slurm would, so the test
    does not wait for a limit."""
    spec = tmp_path / "limit.yaml"
    spec.write_text(
        """\
name: limit
workload: {dataset: fake_cifar, dataset_args: {size: 64}, model: "tests.fixtures.workloads:slow_model",
           model_args: {delay: 0.25}, batch_size: 4, device: cpu}
measure: {warmup_steps: 0, steps: 40}
rungs: [processed_sample, full]
slurm: {tasks_per_node: 2, gpus_per_node: 2, cpus_per_task: 1, time: "00:10:00"}
"""
    )
    out = harness("submit", str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    sweep = sweep_of(out, tmp_path)
    (entry,) = json.loads((sweep / "jobs.json").read_text())
    point_path = sweep / "points" / entry["point_id"]
    deadline = time.time() + 120
    while results.completed_units(point_path, 2) != {("processed_sample", 0)}:
        assert time.time() < deadline, "the first rung did not finish"
        time.sleep(0.5)
    time.sleep(2)  # well inside the second rung
    subprocess.run(["scancel", "--signal=USR2", entry["job_id"]], check=True)
    wait_until_idle(entry["job_id"], timeout=300)
    # -D lists every run of the job: one, not requeued.
    runs = subprocess.run(
        ["sacct", "-X", "-P", "-n", "-D", "-o", "State", "-j", entry["job_id"]],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert runs == ["COMPLETED"]
    rows = load_results([sweep]).rows
    ok, failed = rows[rows["status"] == "ok"], rows[rows["status"] == "failed"]
    assert sorted(zip(ok["rung"], ok["rank"], strict=True)) == [
        ("processed_sample", 0),
        ("processed_sample", 1),
    ]
    assert sorted(zip(failed["rung"], failed["rank"], strict=True)) == [("full", 0), ("full", 1)]
    limit = f"point {entry['point_id']} exceeded its limit of 600 s (slurm.time)"
    assert all(limit in error for error in failed["error"]), list(failed["error"])
    first = ok["finished_at"].max()
    out = harness("resume", str(sweep), "--failed", "--wait", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = load_results([sweep]).rows
    assert sorted(zip(rows["rung"], rows["rank"], rows["status"], strict=True)) == [
        ("full", 0, "ok"),
        ("full", 1, "ok"),
        ("processed_sample", 0, "ok"),
        ("processed_sample", 1, "ok"),
    ]
    # The first rung was measured once, before the signal: its rows were kept, not redone.
    assert rows[rows["rung"] == "processed_sample"]["finished_at"].max() == first


def test_a_portable_script_of_sbatch_folder_runs_from_the_clones_root(tmp_path: Path) -> None:
    """The form of the scripts kept in sbatch/: relative paths, the sweep made by the job."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "results").mkdir()
    write(tmp_path / "jobs", "portable")
    out = harness("sbatch", "jobs/portable.yaml", "--portable", "-o", "sbatch", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert str(tmp_path) not in (tmp_path / "sbatch" / "portable.sbatch").read_text()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_PYTHON": sys.executable}
    submitted = subprocess.run(
        ["sbatch", "--parsable", "sbatch/portable.sbatch"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    job = submitted.stdout.strip().split(";")[0]
    wait_until_idle(job)
    sweep = tmp_path / "results" / "portable" / f"sbatch-{job}"
    assert len(list((sweep / "points").iterdir())) == 4
    for point_path in (sweep / "points").iterdir():
        assert results.point_complete(point_path, ["full"], 1, world_size=2)


def test_submit_wait_gates_on_the_specs_expectations_with_exit_status_3(tmp_path: Path) -> None:
    """A nightly `harness submit --wait` fails the job when the pipeline stops keeping up."""
    expect = "expect:\n  - {min_samples_per_s: 1}\n  - {max_loading_time: 1.0e-9}\n"
    spec = write(tmp_path, "gate", parallel=1, one_point=True, extra=expect)
    out = harness("submit", str(spec), "--wait", cwd=tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert next(line for line in lines if "min_samples_per_s" in line).startswith(
        "pass  min_samples_per_s >= 1: "
    )
    assert next(line for line in lines if "max_loading_time" in line).startswith(
        "FAIL  max_loading_time <= 1e-09: "
    )
    assert "1 of 2 expectation(s) failed (exit status 3)" in out.stdout
    # The points themselves ran well: the gate is the expectation, not a failure.
    assert set(load_results([sweep_of(out, tmp_path)]).rows["status"]) == {"ok"}


def test_the_shipped_stream_runs_as_an_array_of_two_ddp_ranks(tmp_path: Path) -> None:
    """jobs/shards_stream-cpu.yaml as shipped (webdataset tar shards, split by rank and worker,
    decoded in the loop), on 2 DDP ranks: every rung of the ladder on both, and the verdict."""
    from harness.workloads.make_data import make_webdataset_shards

    make_webdataset_shards(tmp_path / "wds", images=48, shards=4, size=48)
    out = harness(
        "submit",
        str(REPO / "jobs/shards_stream-cpu.yaml"),
        f"workload.dataset_args.root={tmp_path / 'wds'}",
        "workload.dataset_args.crop=32",
        "workload.device=cpu",
        "workload.model_args.step_ms=5",
        "loader.num_workers=1",
        "measure={warmup_steps: 1, steps: 3}",
        "slurm={nodes: 1, tasks_per_node: 2, gpus_per_node: 2, cpus_per_task: 1, time: '00:05:00'}",
        "--wait",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = load_results([sweep_of(out, tmp_path)]).rows
    assert set(rows["world_size"]) == {2} and sorted(set(rows["rank"])) == [0, 1]
    ladder = ["device_batch", "host_batch", "processed_sample", "raw_sample", "full"]
    for rank in (0, 1):
        mine = rows[rows["rank"] == rank]
        assert sorted(mine["rung"]) == sorted(ladder) and set(mine["status"]) == {"ok"}, mine[
            ["rung", "error"]
        ]
    assert "caching ladder" in out.stdout and "raw data loading" in out.stdout
