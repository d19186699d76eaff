from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness_schema import rows as results
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


def python_code(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter running `code`: what it imports is what a user's command would."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
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
    out = python_code(HELP_IMPORTS, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    imported, shown = out.stdout.split("\n", 1)
    assert imported == "[]"
    # report and compare are listed although their arguments (from analysis) were not added
    assert (
        "report" in shown
        and "compare" in shown
        and "usage: harness plan [-h] [--format {terminal,markdown,csv,latex}] [-v | -q]" in shown
    )


def test_report_takes_the_analysis_arguments(tmp_path: Path) -> None:
    out = harness("report", "--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--by {node,gpu}" in out.stdout and "--timeline POINT_ID" in out.stdout


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    """pip's metadata of the installed distribution, as `pip show pipeline-harness` says it."""
    from importlib.metadata import version

    out = harness("--version", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"harness {version('pipeline-harness')}\n"


def test_the_version_without_an_install_is_pyprojects(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout run without an install (PYTHONPATH) says harness.__version__, which must be
    pyproject.toml's version."""
    import importlib.metadata

    import tomllib

    from harness import __version__
    from harness.cli import installed_version

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert installed_version() == __version__ == pyproject["project"]["version"]


def _verb_parsers() -> dict[str, argparse.ArgumentParser]:
    from harness.cli import _parser

    parser = _parser(analysis=True)
    (verbs,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(verbs.choices)


def test_every_positional_argument_says_what_it_is() -> None:
    """`harness VERB --help` (and the CLI reference generated from it) explains each argument."""
    bare = [
        f"{name} {action.metavar or action.dest}"
        for name, verb in _verb_parsers().items()
        for action in verb._actions
        if not action.option_strings and not action.help
    ]
    assert bare == []


def test_every_verb_that_prints_tables_offers_the_same_formats() -> None:
    from harness.text_tables import TABLE_FORMATS

    verbs = _verb_parsers()
    for name in ("plan", "run", "submit", "status", "report", "compare"):
        (fmt,) = [a for a in verbs[name]._actions if "--format" in a.option_strings]
        assert tuple(fmt.choices)[: len(TABLE_FORMATS)] == TABLE_FORMATS, name


def test_every_verb_that_prints_the_per_point_tables_offers_wide() -> None:
    """`--wide`: every column, wherever the per-point tables are printed (issue 38)."""
    verbs = _verb_parsers()
    offers = {
        name for name, verb in verbs.items() if any("--wide" in a.option_strings for a in verb._actions)
    }
    assert offers == {"run", "submit", "status", "resume", "report"}


def test_plan_prints_its_table_as_markdown(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 2]}\n")
    out = harness("plan", str(spec), "--format", "markdown", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    header, rule = out.stdout.splitlines()[1:3]
    assert header.startswith("| #") and "num_workers" in header and rule.startswith("|---")


def test_verbosity_is_accepted_after_the_verb_too(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD)
    quiet = harness("run", str(spec), "-q", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert " I " not in quiet.stderr  # no progress lines: warnings and errors only
    assert "num_workers" in quiet.stdout  # the table still
    loud = harness("run", str(spec), "--verbose", cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert " I " in loud.stderr
    both = harness("plan", str(spec), "-v", "-q", cwd=tmp_path)
    assert both.returncode == 2
    assert "argument -q/--quiet: not allowed with argument -v/--verbose" in both.stderr


def test_plan_prints_points_and_runs_nothing(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 2], prefetch_factor: 4}\n")
    out = harness("plan", str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        "grid: 2 point(s) × 1 rung(s) × 1 repeat(s), 3 measured steps each after a warmup (its column)"
    )
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
        measure: {warmup_steps: 1, steps: 2, repeats: 1}
        loader: {num_workers: [0, 1]}
        """
    )
    out = harness("run", str(spec), "--wide", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert (
        "harness: 2 of 4 point(s) failed or did not finish; see the rows' error column, or: harness status results/mixed/"
        in out.stderr
    )
    table = out.stdout.split("\n\n")[0].splitlines()
    # --wide: the course's columns first; others (epoch_restarts...) follow only when they say something
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
    report = harness("report", str(sweep), "--wide", cwd=tmp_path)
    assert report.stdout.split("\n\n")[0] == out.stdout.split("\n\n")[0]
    status = harness("status", str(sweep), "--wide", cwd=tmp_path)
    assert status.returncode == 1, status.stderr
    assert (
        sorted(line.split()[4] for line in status.stdout.splitlines()[2:6])
        == ["completed"] * 2 + ["failed"] * 2
    )
    assert status.stdout.rstrip().endswith("2 completed, 2 failed")


PLAN_IMPORTS = """
import sys
from harness.cli import main
main(["plan", sys.argv[1]])
print(sorted(m for m in ("pandas", "torch", "torchvision") if m in sys.modules), file=sys.stderr)
"""


def test_plan_of_builtin_workloads_imports_neither_pandas_nor_torch(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 2]}\n")
    out = python_code(PLAN_IMPORTS, str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "[]"


def test_an_empty_spec_says_so(write_spec, tmp_path: Path) -> None:
    spec = write_spec("# to be written\n")
    out = harness("plan", str(spec), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith(f"harness: {spec}: the spec is empty; expected a mapping with keys name, ")


def test_a_line_break_in_an_sbatch_value_is_refused_before_anything_is_written(
    write_spec, tmp_path: Path
) -> None:
    spec = write_spec(
        "name: grid\n" + TINY_WORKLOAD + 'slurm: {partition: gpu, extra: {mail-type: "END\\nrm -rf ~"}}\n'
    )
    for verb in ("plan", "submit", "sbatch"):
        out = harness(verb, str(spec), cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stdout == ""
        assert out.stderr == (
            f"harness: {spec}:9: slurm.extra.mail-type: 'END\\nrm -rf ~' is not allowed; "
            "expected a single line without control characters\n"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]  # no results, no script


def test_overrides_change_the_plan_without_editing_the_file(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD)
    out = harness("plan", str(spec), "loader.num_workers=[0,2]", "measure.steps=5", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        "grid: 2 point(s) × 1 rung(s) × 1 repeat(s), 5 measured steps each after a warmup (its column)"
    )
    assert "\noverrides: loader.num_workers=[0,2] measure.steps=5\n" in out.stdout
    assert not (tmp_path / "results").exists()


def test_a_bad_override_prints_one_line_naming_it_and_writes_nothing(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD)
    for verb in ("plan", "run", "submit", "sbatch"):
        out = harness(verb, str(spec), "loader.num_wrokers=8", cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stdout == ""
        assert out.stderr == (
            f"harness: {spec}: override loader.num_wrokers=8: loader.num_wrokers: unknown key; valid keys: "
            "num_workers, persistent_workers, pin_memory, non_blocking, prefetch_factor, drop_last\n"
        )
    out = harness("run", str(spec), "--backend", "inline", "measure.steps=-3", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith(
        f"harness: {spec}: override measure.steps=-3: measure.steps: -3 is not allowed"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]  # no results, no script


GATED = """\
expect:
  - {min_samples_per_s: 1}
  - {max_loading_time: 0.000000001, num_workers: 2}
"""


def test_a_failed_expectation_exits_3_after_run(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: gated\n" + TINY_WORKLOAD + GATED + "sampler: {host: false, gpu: false}\n")
    # The override comes after an option: argparse leaves it over, and it is still taken.
    out = harness("run", str(spec), "--format", "terminal", "loader.num_workers=[0,2]", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    block = out.stdout.split("expectations (each sweep's expect:)\n", 1)[1]
    lines = block.splitlines()
    assert (
        lines[0].startswith("pass  min_samples_per_s >= 1: ") and "(worst of 2 point(s): point " in lines[0]
    )
    assert lines[1].startswith("FAIL  max_loading_time <= 1e-09 (num_workers=2): ")
    assert lines[2] == "1 of 2 expectation(s) failed (exit status 3)"
    assert out.stderr.endswith("harness: 1 expectation(s) not met\n")
    (sweep,) = (tmp_path / "results" / "gated").iterdir()
    saved = (sweep / "spec.yaml").read_text()
    assert saved.startswith(f"# {spec} with overrides: loader.num_workers=[0,2]\n")
    assert "num_workers: [0, 2]" in saved
    status = harness("status", str(sweep), cwd=tmp_path)
    assert status.returncode == 0 and "2 completed" in status.stdout  # the merged spec's 2 points


def test_report_checks_the_saved_expectations_and_exits_3(write_spec, tmp_path: Path) -> None:
    spec = write_spec("name: gated\n" + TINY_WORKLOAD + GATED + "loader: {num_workers: 2}\n")
    assert harness("run", str(spec), cwd=tmp_path).returncode == 3
    (sweep,) = (tmp_path / "results" / "gated").iterdir()
    report = harness("report", str(sweep), cwd=tmp_path)
    assert report.returncode == 3, report.stderr
    assert "FAIL  max_loading_time <= 1e-09 (num_workers=2)" in report.stdout


SLOW = """\
name: slow
workload:
  dataset: fake_cifar
  dataset_args: {size: 48, image_size: 8, resize: null}
  model: "tests.fixtures.workloads:slow_model"
  model_args: {delay: 0.25}
  batch_size: [4, 6, 8]
  device: cpu
measure: {warmup_steps: 0, steps: 6, repeats: 1}  # one run a point: units counted, no follow-up
slurm: {tasks_per_node: 1, gpus_per_node: 0}
"""


def start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the test signals it alone
    )


def first_rows(cwd: Path, timeout: float = 240) -> Path:
    """The sweep folder, once one point has its rows."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = list(cwd.glob("results/slow/*/points/*/rank0.csv"))
        if done:
            return done[0].parents[2]
        time.sleep(0.1)
    raise TimeoutError("no point finished")


def rows_by_point(sweep: Path) -> dict[str, list[dict[str, str]]]:
    return {p.parent.name: results.read_rows(p) for p in sweep.glob("points/*/rank0.csv")}


@pytest.mark.parametrize(
    ("backend", "stop"), [("inline", signal.SIGINT), ("local", signal.SIGKILL)], ids=["ctrl-c", "killed"]
)
def test_an_interrupted_sweep_is_completed_by_resume_each_point_measured_once(
    backend: str, stop: signal.Signals, tmp_path: Path
) -> None:
    (tmp_path / "slow.yaml").write_text(SLOW)
    run = start(["run", "slow.yaml", "--backend", backend], tmp_path)
    sweep = first_rows(tmp_path)
    os.killpg(run.pid, stop)  # Ctrl-C in a terminal signals the whole group; so does a kill of it
    _, stderr = run.communicate(timeout=120)
    if stop == signal.SIGINT:
        assert run.returncode == 130
        assert f"go on with: harness resume {sweep.relative_to(tmp_path)}" in stderr
    before = {point: rows for point, rows in rows_by_point(sweep).items() if rows}
    assert 1 <= len(before) < 3

    status = harness("status", str(sweep), cwd=tmp_path)
    assert status.returncode == 1
    left = 3 - len(before)
    assert f"run here the {left} point(s) without complete results: harness resume {sweep}" in status.stdout

    resumed = harness("resume", str(sweep), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"running the {left} point(s) without complete results here ({backend})" in resumed.stdout
    after = rows_by_point(sweep)
    assert len(after) == 3 and all(len(rows) == 1 for rows in after.values())  # one row per unit
    for point, rows in before.items():
        assert after[point] == rows  # measured once: the rows of before the stop are kept as they were
    table = resumed.stdout.split("\n", 1)[1].split("\n\n")[0].splitlines()
    header = next(n for n, line in enumerate(table) if line.startswith("jobid"))
    assert len(table) == header + 2 + 3  # the settings every row shares, header, rule, each point once
    assert harness("resume", str(sweep), cwd=tmp_path).stdout.startswith("nothing to resume")


def test_a_local_job_that_outlives_its_killed_run_is_left_to_end_and_never_run_twice(tmp_path: Path) -> None:
    """`kill PID` of the harness process alone: submitit's local job runs on (it is made to
    outlive the process that submits it). The job holds the whole pass (PassJob: its points one
    after the other in the same ranks), so status must call each of its points running, and
    resume must let it end before running anything here, and never run its points again."""
    (tmp_path / "slow.yaml").write_text(SLOW.replace("delay: 0.25", "delay: 1.0"))
    run = start(["run", "slow.yaml", "--backend", "local"], tmp_path)
    deadline = time.time() + 120
    while not (found := list(tmp_path.glob("results/slow/*/jobs.json"))):
        assert time.time() < deadline, "no job was started"
        time.sleep(0.1)
    sweep = found[0].parent
    entries = json.loads((sweep / "jobs.json").read_text())
    assert len(entries) == 3 and len({e["job_id"] for e in entries}) == 1  # one job for the pass
    os.kill(run.pid, signal.SIGKILL)  # the harness process alone, not its group
    run.wait(timeout=30)  # not communicate(): the orphan holds the pipes open
    orphan = f"pid {entries[0]['job_id']} on {socket.gethostname()}"

    status = harness("status", str(sweep), "--wide", cwd=tmp_path)  # each row its state
    first = next(line for line in status.stdout.splitlines() if entries[0]["point_id"] in line)
    assert f"RUNNING ({orphan})" in first

    resumed = harness("resume", str(sweep), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == (
        "3 point(s) with a live job (3 running): left alone\n"
        "nothing to resume: every other point has complete results\n"
    )
    deadline = time.time() + 180  # the orphan ends its pass on its own
    while len(after := rows_by_point(sweep)) < 3:
        assert time.time() < deadline, "the orphaned job did not finish its pass"
        time.sleep(0.5)
    assert all(len(rows) == 1 for rows in after.values())  # every point measured once
    assert len(json.loads((sweep / "jobs.json").read_text())) == 3  # the orphan's pass not run again
    run.stdout.close()
    run.stderr.close()


def test_the_local_backend_refuses_gpus_it_cannot_give_before_anything_is_written(tmp_path: Path) -> None:
    spec = tmp_path / "gpu.yaml"
    text = "name: gpu\n" + TINY_WORKLOAD.replace("device: cpu", "device: cuda")
    spec.write_text(text + "slurm: {gpus_per_node: 0, tasks_per_node: 2}\n")
    out = harness("run", str(spec), "--backend", "local", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().endswith(
        "device cuda, but slurm.gpus_per_node is 0: the local backend gives its tasks the GPUs "
        "slurm.gpus_per_node asks for (all others are hidden from them)"
    )
    assert not (tmp_path / "results").exists()


def test_the_local_backend_runs_a_point_of_two_nodes_as_their_ranks_on_this_machine(tmp_path: Path) -> None:
    """It refused slurm.nodes > 1 before sizes were axes; now it emulates the nodes (issue #40)."""
    from analysis.load import load_results

    spec = tmp_path / "two.yaml"
    spec.write_text("name: two\n" + TINY_WORKLOAD + "slurm: {nodes: 2, gpus_per_node: 0}\n")
    out = harness("run", str(spec), "--backend", "local", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = load_results([tmp_path / "results"]).rows
    assert sorted(rows["rank"]) == [0, 1] and set(rows["world_size"]) == {2} and set(rows["nodes"]) == {2}


def test_a_second_resume_is_refused_while_the_first_holds_the_sweep_and_no_unit_is_measured_twice(
    tmp_path: Path,
) -> None:
    """Two resumes of one sweep at once: the lock is taken before the status is read, so the
    second names the first and exits 1; the first's lock replaced the stale one of the run
    killed hard (its process is gone)."""
    (tmp_path / "slow.yaml").write_text(SLOW.replace("delay: 0.25", "delay: 1.0"))
    run = start(["run", "slow.yaml"], tmp_path)
    sweep = first_rows(tmp_path)
    os.killpg(run.pid, signal.SIGKILL)  # killed hard: its lock stays behind
    run.communicate(timeout=120)
    lock = sweep / "sweep.lock"
    assert json.loads(lock.read_text())["pid"] == run.pid

    first = start(["resume", str(sweep)], tmp_path)
    deadline = time.time() + 120
    while (held := _holder(lock)).get("pid") != first.pid:
        assert time.time() < deadline and first.poll() is None, "the first resume never took the lock"
        time.sleep(0.05)
    second = harness("resume", str(sweep), cwd=tmp_path)
    first_out, first_err = first.communicate(timeout=240)
    assert second.returncode == 1
    since = held["since"].replace("T", " ")
    assert second.stderr.strip() == (
        f"harness: {sweep} is held by harness resume (pid {first.pid} on {socket.gethostname()}, "
        f"since {since}): one run or resume of a sweep at a time"
    )
    assert second.stdout == ""  # it read nothing and ran nothing

    assert first.returncode == 0, first_err
    assert "running the 2 point(s) without complete results here (inline)" in first_out
    after = rows_by_point(sweep)
    assert len(after) == 3 and all(len(rows) == 1 for rows in after.values())  # each unit once
    assert not lock.exists()


def _holder(lock: Path) -> dict[str, object]:
    try:
        return dict(json.loads(lock.read_text()))
    except (OSError, ValueError):
        return {}


def test_sizes_as_an_axis_are_refused_where_one_array_or_one_rank_cannot_hold_them(
    write_spec, tmp_path: Path
) -> None:
    spec = write_spec("name: grid\n" + TINY_WORKLOAD + "slurm: {nodes: [1, 2], gpus_per_node: 0}\n")
    sizes = "1 node × 0 GPU(s) (1 rank(s)), 2 nodes × 0 GPU(s) (2 rank(s))"
    out = harness("run", str(spec), "--backend", "inline", cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"harness: {spec}: inline runs every point as one rank in this process, so it cannot run the spec's "
        f"sizes ({sizes}); use --backend local (nodes emulated on this machine) or slurm\n"
    )
    out = harness("sbatch", str(spec), cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"harness: {spec}: a standalone script is one job array of one size, and the spec has 2 "
        f"({sizes}); use harness submit (an array per size), or give slurm.nodes, gpus_per_node "
        "and tasks_per_node one value each\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.yaml"]  # no results, no script
