from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import TINY_WORKLOAD

REPO = Path(__file__).resolve().parents[2]


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, in a folder of its own; tests.fixtures stays importable."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


HELP_IMPORTS = """
import contextlib, io, sys
from harness.cli import main
shown = io.StringIO()
for argv in (["--help"], ["plan", "--help"]):
    with contextlib.redirect_stdout(shown):
        try:
            main(argv)
        except SystemExit:  # argparse exits after printing the help
            pass
print(sorted(m for m in ("pandas", "matplotlib", "torch") if m in sys.modules))
print(shown.getvalue())
"""


def test_help_imports_neither_pandas_nor_torch(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", HELP_IMPORTS],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    imported, shown = out.stdout.split("\n", 1)
    assert imported == "[]"
    # report and compare are listed although their arguments (from analysis) were not added
    assert "report" in shown and "compare" in shown and "usage: harness plan [-h] spec" in shown


def test_report_takes_the_analysis_arguments(tmp_path: Path) -> None:
    out = harness("report", "--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--by {node,gpu}" in out.stdout and "--timeline POINT_ID" in out.stdout


def test_plan_prints_points_and_runs_nothing(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 2], prefetch_factor: 4}\n")
    out = harness("plan", str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("grid: 2 point(s) × 1 rung(s) × 1 repeat(s), 1+3 steps each")
    assert "prefetch_factor 4 -> null (num_workers=0)" in out.stdout
    assert not (tmp_path / "results").exists()


def test_a_typo_prints_one_line_and_exits_2(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD + "loader:\n  num_wrokers: 2\n")
    for verb in ("plan", "run"):
        out = harness(verb, str(spec), cwd=tmp_path)
        assert out.returncode == 2
        assert out.stdout == ""
        assert out.stderr == (
            f"harness: {spec}:10: loader.num_wrokers: unknown key; valid keys: num_workers, "
            "persistent_workers, pin_memory, non_blocking, prefetch_factor, drop_last\n"
        )
    assert not (tmp_path / "results").exists()


def test_a_failing_point_is_recorded_and_the_others_complete(write_spec, tmp_path: Path) -> None:
    spec = write_spec(
        """\
        name: mixed
        workload:
          dataset: [fake_cifar, "tests.fixtures.workloads:raising_dataset"]
          dataset_args: {size: 16}
          model: linear
          batch_size: 4
          device: cpu
        measure: {warmup_steps: 1, steps: 2}
        loader: {num_workers: [0, 1]}
        """
    )
    out = harness("run", str(spec), cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert (
        "harness: 2 of 4 point(s) failed or did not finish; see the rows' error column, or: harness status results/mixed/"
        in out.stderr
    )
    table = out.stdout.split("\n\n")[0].splitlines()
    # the course's columns first; others (epoch_restarts...) follow only when they say something
    assert table[1].split()[:13] == [
        "jobid",
        "num_workers",
        "persistent_workers",
        "pin_memory",
        "non_blocking",
        "prefetch_factor",
        "drop_last",
        "loading_time",
        "training_time",
        "first_step_loading_time",
        "samples_per_s",
        "cpu_memory_gb",
        "loader_cores",  # sampled by default: the cores the DataLoader workers used
    ]
    assert len(table) == 3 + 2  # title, header, rule, two completed points
    assert "2 point(s) had failed rungs:" in out.stdout
    assert "OSError: cannot read sample" in out.stdout
    sweep = tmp_path / out.stdout.split("results: ")[1].strip()
    assert (sweep / "spec.yaml").read_text() == spec.read_text()
    assert len(list((sweep / "points").glob("*/rank0.csv"))) == 4
    report = harness("report", str(sweep), cwd=tmp_path)
    assert report.stdout.split("\n\n")[0] == out.stdout.split("\n\n")[0]
    status = harness("status", str(sweep), cwd=tmp_path)
    assert status.returncode == 1, status.stderr
    assert (
        sorted(line.split()[4] for line in status.stdout.splitlines()[2:6])
        == ["completed"] * 2 + ["failed"] * 2
    )
    assert status.stdout.rstrip().endswith("2 completed, 2 failed")
