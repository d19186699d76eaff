"""The one reader of a sweep: faults injected for real into sweep folders made by `harness run`,
then read by `harness status`, `resume` and `report` as a user runs them."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness_schema import reading
from tests.conftest import TINY_WORKLOAD

REPO = Path(__file__).resolve().parents[2]
SPEC = "name: tiny\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1]}\nsampler: {host: false, gpu: false}\n"


def harness(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        # the repo first; a PYTHONPATH given (another pandas, say) stays behind it
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep of two points, measured by `harness run`."""
    cwd = tmp_path_factory.mktemp("made")
    (cwd / "tiny.yaml").write_text(SPEC)
    out = harness("run", "tiny.yaml", cwd=cwd)
    assert out.returncode == 0, out.stderr
    (sweep,) = (cwd / "results" / "tiny").iterdir()
    return sweep


@pytest.fixture
def sweep(made: Path, tmp_path: Path) -> Path:
    """A copy of the made sweep, to break."""
    copy = tmp_path / "results" / "tiny" / made.name
    shutil.copytree(made, copy)
    return copy


def rank_files(sweep: Path) -> dict[str, list[dict[str, str]]]:
    return {p.parent.name: reading.read_rows(p) for p in sorted(sweep.glob("points/*/rank0.csv"))}


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    """The user's one line on stderr: no traceback, nothing else."""
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_a_rank_file_torn_mid_row_is_named_by_status_and_measured_again_once_by_resume(
    sweep: Path, tmp_path: Path
) -> None:
    before = rank_files(sweep)
    torn_point, intact_point = sorted(before)
    torn = sweep / "points" / torn_point / "rank0.csv"
    data = torn.read_bytes()
    torn.write_bytes(data[: len(data) - 40])  # the row cut short: fewer fields than the header
    header, row = (len(next(csv.reader([line]))) for line in data[: len(data) - 40].decode().splitlines())
    assert row < header

    status = harness("status", str(sweep), "--wide", cwd=tmp_path)  # the columns by their place
    assert status.returncode == 1, status.stderr
    assert (
        f"{torn}: torn (line 2 has {row} fields, the header {header}; a torn or hand-edited file): "
        "its units count as missing; harness resume moves it aside and measures them again" in status.stdout
    )
    table = {line.split()[1]: line.split() for line in status.stdout.splitlines()[2:4]}
    assert table[torn_point][4:6] == ["torn", "0/1"]  # never "completed"
    assert table[intact_point][4:6] == ["completed", "1/1"]
    assert "1 completed, 1 torn" in status.stdout

    resumed = harness("resume", str(sweep), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    (aside,) = torn.parent.glob("rank0.csv.torn-*")
    assert aside.read_bytes() == data[: len(data) - 40]  # kept, not deleted
    assert f"{torn}: torn (line 2 has {row} fields" in resumed.stdout
    assert f"moved aside to {aside.name}: its units are measured again" in resumed.stdout
    assert "running the 1 point(s) without complete results here (inline)" in resumed.stdout
    after = rank_files(sweep)
    assert [(r["rung"], r["repeat"], r["status"]) for r in after[torn_point]] == [("full", "0", "ok")]
    assert after[intact_point] == before[intact_point]  # measured once: not again
    assert "2 completed" in harness("status", str(sweep), cwd=tmp_path).stdout


def test_a_torn_cell_counts_the_file_as_torn(sweep: Path, tmp_path: Path) -> None:
    path = next(sweep.glob("points/*/rank0.csv"))
    rows = list(csv.reader(path.open()))
    rows[1][rows[0].index("repeat")] = "0\x00"
    with path.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    status = harness("status", str(sweep), cwd=tmp_path)
    assert status.returncode == 1 and "Traceback" not in status.stderr
    assert f"{path}: torn (line 2: repeat is '0\\x00', not a whole number; a torn or hand-edited file)" in (
        status.stdout
    )
    report = harness("report", str(sweep), cwd=tmp_path)
    assert (
        f"  {path}: torn (line 2: repeat is '0\\x00', not a whole number" in report.stdout
    )  # named, skipped


RANDOM = bytes([0x93, 0xFF, 0x7B, 0x00, 0xC3, 0x28, 0x41])  # not UTF-8: what a torn block holds


@pytest.mark.parametrize("name", ["sweep.json", "plan.json", "jobs.json"])
@pytest.mark.parametrize("verb", ["status", "resume"])
def test_random_bytes_in_a_sweep_file_are_one_line_and_exit_1(
    name: str, verb: str, sweep: Path, tmp_path: Path
) -> None:
    (sweep / name).write_bytes(RANDOM)
    out = harness(verb, str(sweep), cwd=tmp_path)
    assert out.returncode == 1
    assert one_line(out) == (
        f"harness: {sweep / name}: unreadable (not UTF-8 text: byte 0x93 at offset 0; a torn or hand-edited file)"
    )


@pytest.mark.parametrize("name", ["sweep.json", "plan.json"])
def test_a_torn_sweep_file_is_one_line_and_exit_1(name: str, sweep: Path, tmp_path: Path) -> None:
    whole = (sweep / name).read_text()
    (sweep / name).write_text(whole[: len(whole) // 2])
    out = harness("status", str(sweep), cwd=tmp_path)
    assert out.returncode == 1
    line = one_line(out)
    assert line.startswith(f"harness: {sweep / name}: unreadable (not JSON: line ")
    assert line.endswith("; a torn or hand-edited file)")


def test_a_newer_sweep_json_is_read_for_what_this_version_needs(sweep: Path, tmp_path: Path) -> None:
    info = json.loads((sweep / "sweep.json").read_text())
    (sweep / "sweep.json").write_text(json.dumps({**info, "format": 7, "lock": {"pid": 1}}))
    out = harness("status", str(sweep), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "2 completed" in out.stdout


def test_a_plan_from_another_version_is_one_line(sweep: Path, tmp_path: Path) -> None:
    plan = json.loads((sweep / "plan.json").read_text())
    del plan["points"][0]["measure"]  # a plan written before the field existed
    (sweep / "plan.json").write_text(json.dumps(plan))
    out = harness("resume", str(sweep), cwd=tmp_path)
    assert out.returncode == 1
    assert one_line(out) == (
        f"harness: {sweep / 'plan.json'}: point 0 has no 'measure': written by another version of the "
        "harness; status and resume cannot read this sweep (harness report still reads its rows)"
    )
    assert harness("report", str(sweep), cwd=tmp_path).returncode == 0  # its rows are still read


def test_a_sweep_json_from_another_version_is_one_line(sweep: Path, tmp_path: Path) -> None:
    (sweep / "sweep.json").write_text(json.dumps({"spec": "tiny", "ranks": 1}))
    out = harness("status", str(sweep), cwd=tmp_path)
    assert out.returncode == 1
    assert one_line(out).startswith(
        f"harness: {sweep / 'sweep.json'}: backend is None, not a backend's name: written by another version"
    )


def test_a_missing_spec_is_one_line_for_resume_and_status_still_reads(sweep: Path, tmp_path: Path) -> None:
    (sweep / "spec.yaml").unlink()
    next(sweep.glob("points/*/rank0.csv")).unlink()  # something left to resume
    out = harness("resume", str(sweep), cwd=tmp_path)
    assert out.returncode == 1
    assert one_line(out) == (
        f"harness: {sweep / 'spec.yaml'}: missing: resume runs the points with the sweep's own spec "
        "(harness report still reads its rows)"
    )
    status = harness("status", str(sweep), cwd=tmp_path)
    assert "1 completed, 1 not run" in status.stdout and "Traceback" not in status.stderr


@pytest.mark.parametrize("column", ["pin_memory", "num_workers", "hostname", "samples", "loading_time"])
def test_a_blank_cell_never_stops_the_report(column: str, sweep: Path, tmp_path: Path) -> None:
    """pandas 3 keeps NaN through astype(str): the table used to crash on a blank setting
    (TypeError: object of type 'float' has no len()). The other end of pyproject's range, pandas
    2.2: `pip install --target /tmp/pd2 --no-deps pandas==2.2.3 pytz`, then run these tests with
    PYTHONPATH=$PWD:/tmp/pd2 (the CLI's subprocesses keep it)."""
    files = sorted(sweep.glob("points/*/rank0.csv"))
    for path in files[:1] if column == "samples" else files:  # samples: one point left to report
        rows = list(csv.reader(path.open()))
        rows[1][rows[0].index(column)] = ""
        with path.open("w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
    for fmt in ("terminal", "markdown", "csv", "latex"):
        out = harness("report", str(sweep), "--format", fmt, cwd=tmp_path)
        assert "Traceback" not in out.stderr, out.stderr
        assert out.returncode == 0, out.stderr
    if column == "samples":  # a measured row without its samples is named and skipped
        assert f"{files[0]}: a row with status ok has no samples; row skipped" in out.stdout
    else:
        assert out.stdout.count("\n") >= 3  # a header and both points


FLAKY = """\
name: flaky
workload:
  dataset: [fake_cifar, "tests.fixtures.workloads:flaky_dataset"]
  dataset_args: {size: 48}
  model: linear
  batch_size: 8
  device: cpu
measure: {warmup_steps: 1, steps: 3, repeats: 1}
sampler: {host: false, gpu: false}
"""


def test_resume_failed_runs_a_transiently_failed_point_again_keeping_its_old_rows(tmp_path: Path) -> None:
    (tmp_path / "flaky.yaml").write_text(FLAKY)
    flag = tmp_path / "storage-away"
    flag.touch()
    run = harness("run", "flaky.yaml", cwd=tmp_path, FLAKY_FLAG=str(flag))
    assert run.returncode == 1, run.stderr
    (sweep,) = (tmp_path / "results" / "flaky").iterdir()
    before = rank_files(sweep)
    failed_point = next(p for p, rows in before.items() if rows[0]["status"] == "failed")
    ok_point = next(p for p in before if p != failed_point)
    assert "storage is away" in before[failed_point][0]["error"]
    flag.unlink()  # the fault has passed

    plain = harness("resume", str(sweep), cwd=tmp_path, FLAKY_FLAG=str(flag))
    assert plain.stdout.startswith("nothing to resume")  # a failed point has its results

    resumed = harness("resume", str(sweep), "--failed", cwd=tmp_path, FLAKY_FLAG=str(flag))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith(
        f"point {failed_point}: 1 failed row(s) moved aside to rank<k>.csv.failed-<time>\n"
        "running the 1 point(s) without complete results here (inline)\n"
    )
    after = rank_files(sweep)
    assert [(r["rung"], r["repeat"], r["status"]) for r in after[failed_point]] == [("full", "0", "ok")]
    assert after[ok_point] == before[ok_point]  # not measured again
    (aside,) = (sweep / "points" / failed_point).glob("rank0.csv.failed-*")
    assert reading.read_rows(aside) == before[failed_point]  # the failed row, kept whole
    status = harness("status", str(sweep), cwd=tmp_path)
    assert status.returncode == 0 and "2 completed" in status.stdout


def test_a_rank_reopening_its_point_sets_a_torn_file_aside_and_measures_it_again(sweep: Path) -> None:
    """A requeued job meets its own torn file: kept aside, and the point measured whole again."""
    from harness.config.plan import Point
    from harness.execution.dist import DistEnv
    from harness.execution.runner import run_point

    point = Point.from_json(json.loads((sweep / "plan.json").read_text())["points"][0])
    path = sweep / "points" / point.id / "rank0.csv"
    torn = path.read_bytes()[:-40]
    path.write_bytes(torn)
    run_point(point, sweep, env=DistEnv())
    (aside,) = path.parent.glob("rank0.csv.torn-*")
    assert aside.read_bytes() == torn
    assert [(r["rung"], r["repeat"], r["status"]) for r in reading.read_rows(path)] == [("full", "0", "ok")]
