"""A full or read-only results disk, for real (a tmpfs of 1 MiB, filled or remounted
read-only): one line naming the file and the reason, exit 1, nothing measured lost, and the
sweep resumed once the disk is back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness_schema import rows as results
from tests.conftest import remount_read_only
from tests.fixtures.workloads import fill_disk
from tests.harness.test_cli import harness

SPEC = """\
name: disk
workload:
  dataset: tests.fixtures.workloads:filling_dataset
  dataset_args: {dataset_args}
  model: linear
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 2, repeats: 1}}  # one run a point: "measured once" is asserted
sampler: {{hz: 2}}
"""


def _harness_line(stderr: str) -> str:
    """The one line of the harness's own (the rest is the log), and no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("harness: ")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_disk_that_fills_mid_sweep_is_one_line_and_resume_measures_the_rest(
    tmpfs: Path, tmp_path: Path
) -> None:
    ballast = tmpfs / "ballast"
    args = [{"size": 16}, {"size": 16, "fill": str(ballast)}]  # the second point fills the disk
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(dataset_args=json.dumps(args)))
    out = harness("run", str(spec), "--results", str(tmpfs), cwd=tmp_path)
    assert out.returncode == 1
    (sweep,) = (tmpfs / "disk").iterdir()
    line = _harness_line(out.stderr)
    # The rank's rows or the job's own files under local/ (its log, submitit's pickle), whichever
    # the full disk refused first: on a busy machine either comes first.
    assert line.startswith((f"harness: cannot write {sweep}/points/", f"harness: cannot write {sweep}/local"))
    assert line.endswith(f": No space left on device; what was measured is kept: harness resume {sweep}")
    plan = json.loads((sweep / "plan.json").read_text())["points"]
    first, second = (sweep / "points" / p["id"] for p in plan)
    kept = (first / "rank0.csv").read_text()
    assert [r["status"] for r in results.read_rows(first / "rank0.csv")] == ["ok"]
    assert not (second / "rank0.csv").exists()
    assert not list((sweep / "points").rglob("*.tmp"))  # no half-written file left behind

    ballast.write_bytes(b"")  # the user makes room
    resumed = harness("resume", str(sweep), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert (first / "rank0.csv").read_text() == kept  # measured once, never again
    assert [r["status"] for r in results.read_rows(second / "rank0.csv")] == ["ok"]


def test_a_disk_that_fills_under_the_local_backend_is_one_line_and_resume_measures_the_rest(
    tmpfs: Path, tmp_path: Path
) -> None:
    """Two ranks in subprocesses: the rank that cannot write ends its job, and the harness says
    the rank's one line, not the job's traceback (before: 64 lines, two tracebacks, no line
    saying what was kept, and the next job submitted onto the full disk)."""
    ballast = tmpfs / "ballast"
    args = [{"size": 16}, {"size": 16, "fill": str(ballast)}, {"size": 24}]
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        SPEC.format(dataset_args=json.dumps(args)) + "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n"
    )
    out = harness("run", str(spec), "--backend", "local", "--results", str(tmpfs), cwd=tmp_path)
    assert out.returncode == 1
    (sweep,) = (tmpfs / "disk").iterdir()
    line = _harness_line(out.stderr)
    # The rank's rows or the job's own files under local/ (its log, submitit's pickle), whichever
    # the full disk refused first: on a busy machine either comes first.
    assert line.startswith((f"harness: cannot write {sweep}/points/", f"harness: cannot write {sweep}/local"))
    assert line.endswith(f": No space left on device; what was measured is kept: harness resume {sweep}")
    first, second, third = (
        sweep / "points" / p["id"] for p in json.loads((sweep / "plan.json").read_text())["points"]
    )
    kept = [(first / f"rank{k}.csv").read_text() for k in (0, 1)]
    assert not (third / "rank0.csv").exists()  # no job was started on the full disk

    ballast.write_bytes(b"")
    resumed = harness("resume", str(sweep), "--backend", "local", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert [(first / f"rank{k}.csv").read_text() for k in (0, 1)] == kept  # measured once
    for point in (second, third):
        for k in (0, 1):
            assert [r["status"] for r in results.read_rows(point / f"rank{k}.csv")] == ["ok"]


def test_a_read_only_disk_is_one_line_and_no_sweep_folder_appears(tmpfs: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(dataset_args=json.dumps({"size": 16})))
    remount_read_only(tmpfs)
    out = harness("run", str(spec), "--results", str(tmpfs), cwd=tmp_path)
    assert out.returncode == 1
    assert (
        _harness_line(out.stderr)
        == f"harness: cannot write {tmpfs}/disk: Read-only file system; no sweep was made"
    )
    assert list(tmpfs.iterdir()) == []


def test_a_sweep_folder_appears_whole_or_not_at_all(tmpfs: Path, tmp_path: Path) -> None:
    """A disk with room for some of the sweep's files: none of them appears, nor a half-made
    folder for status or resume to stumble on."""
    spec = tmp_path / "spec.yaml"
    sizes = [{"size": n} for n in range(8, 408)]  # 400 points: a plan.json of some 600 kB
    spec.write_text(SPEC.format(dataset_args=json.dumps(sizes)))
    fill_disk(tmpfs / "ballast")
    (tmpfs / "ballast").write_bytes(b"\0" * (1024 * 1024 - 300 * 1024))  # 300 kB free, or so
    out = harness("run", str(spec), "--results", str(tmpfs), cwd=tmp_path)
    assert out.returncode == 1
    line = _harness_line(out.stderr)
    assert line.startswith(f"harness: cannot write {tmpfs}/disk/")
    assert line.endswith(": No space left on device; no sweep was made")
    assert list((tmpfs / "disk").iterdir()) == []  # nor a hidden, half-made one


def test_a_read_only_disk_mid_resume_is_one_line(tmpfs: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(dataset_args=json.dumps([{"size": 16}, {"size": 20}])))
    assert harness("plan", str(spec), cwd=tmp_path).returncode == 0
    out = harness("run", str(spec), "--results", str(tmpfs), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (sweep,) = (tmpfs / "disk").iterdir()
    for point in (sweep / "points").iterdir():
        (point / "rank0.csv").unlink()  # as if never measured, on a disk now read-only
        break
    remount_read_only(tmpfs)
    resumed = harness("resume", str(sweep), cwd=tmp_path)
    assert resumed.returncode == 1
    line = _harness_line(resumed.stderr)
    assert line.startswith(f"harness: cannot write {sweep}/")
    assert line.endswith(f": Read-only file system; what was measured is kept: harness resume {sweep}")


def test_a_reports_plots_on_a_read_only_disk_are_one_line_with_no_resume_to_run(
    tmpfs: Path, tmp_path: Path
) -> None:
    """`harness report --plots` measures nothing: its line names the plot and the reason, not
    `harness resume` (which would not write it)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(dataset_args=json.dumps({"size": 16})) + "loader: {num_workers: [0, 1]}\n")
    assert harness("run", str(spec), "--results", str(tmpfs), cwd=tmp_path).returncode == 0
    (sweep,) = (tmpfs / "disk").iterdir()
    remount_read_only(tmpfs)
    report = harness("report", str(sweep), "--plots", cwd=tmp_path)
    assert report.returncode == 1
    line = _harness_line(report.stderr)
    assert line.startswith(f"harness: cannot write {sweep}/plots/")
    assert line.endswith(".png: Read-only file system")


def test_make_data_on_a_full_or_read_only_disk_is_one_line_and_leaves_no_torn_file(
    tmpfs: Path, tmp_path: Path
) -> None:
    """`harness make-data` into a 1 MiB disk: before, a traceback ending in `OSError: [Errno 28]
    No space left on device`, and the half-written image left as a .tmp file."""
    for layout in ([], ["--shards", "2"], ["--shards", "2", "--webdataset"]):
        root = tmpfs / f"data{len(layout)}"
        out = harness("make-data", str(root), "--images", "400", *layout, cwd=tmp_path)
        assert out.returncode == 1
        line = _harness_line(out.stderr)
        assert line.startswith(f"harness: cannot write {root}/"), line
        assert line.endswith(
            f": No space left on device; the data set under {root} is incomplete: free space, or "
            "choose another folder, and run make-data again"
        )
        assert not list(tmpfs.rglob("*.tmp"))
        subprocess.run(["rm", "-rf", str(root)], check=True)
    remount_read_only(tmpfs)
    out = harness("make-data", str(tmpfs / "ro"), "--images", "4", cwd=tmp_path)
    assert out.returncode == 1
    assert _harness_line(out.stderr).startswith(
        f"harness: cannot write {tmpfs / 'ro'}: Read-only file system;"
    )
