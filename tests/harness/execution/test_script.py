"""A point whose workload is the user's own script: every rank runs it as a subprocess under
the probe. The script (tests/fixtures/probe_script.py) has injected costs (sleeps) in its
dataset's read, its transform and its step, and ways to fail; the rows, the ladder's verdict
and the stragglers are checked against those costs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from analysis.ladder.verdict import ladder_verdicts
from analysis.ladder.verdict_text import KEEPS_UP, UNDECIDED
from analysis.load import load_results
from analysis.stragglers import find_stragglers
from harness.backends.local import run_local
from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.probe_job import ProbeJob
from harness.execution.runner import run_point
from harness.execution.script import script_environment
from harness.execution.script_end import Ended
from harness.storage.sweep import create_sweep
from harness_schema import layout
from harness_schema import rows as results

SCRIPT = Path(__file__).resolve().parents[2] / "fixtures" / "probe_script.py"
LADDER = "[device_batch, host_batch, processed_sample, raw_sample, full]"


def script_spec(args: list[str], *, rungs: str = "[full]", measure: str = "", extra: str = "") -> str:
    return (
        "name: script\n"
        f"workload: {{script: {SCRIPT}, args: {json.dumps(args)}}}\n"
        f"measure: {measure or '{warmup_steps: 1, steps: 4, repeats: 1}'}\n"
        f"rungs: {rungs}\n" + extra
    )


def points(args: list[str], **kwargs: str) -> list[Point]:
    return list(expand(parse_spec(script_spec(args, **kwargs))).points)


def rows_of(sweep: Path, point: Point, rank: int = 0) -> list[dict[str, str]]:
    return results.read_rows(layout.rank_file(layout.point_dir(sweep, point.id), rank))


def own_repository(folder: Path) -> tuple[Path, str]:
    """The fixture script in a git repository of its own: (its path, the repository's commit)."""
    folder.mkdir()
    script = folder / "train.py"
    script.write_text(SCRIPT.read_text())
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@x", "-C", str(folder)]
    for command in (["init", "-q"], ["add", "train.py"], ["commit", "-q", "-m", "mine"]):
        subprocess.run([*git, *command], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return script, head.stdout.strip()


def test_the_scripts_own_loop_measures_every_rung_with_the_points_loader(tmp_path: Path) -> None:
    script, commit = own_repository(tmp_path / "project")
    spec = script_spec(
        ["--step-ms", "1", "--num-workers", "0"], rungs=LADDER, extra="loader: {num_workers: 1}\n"
    )
    (point,) = expand(
        parse_spec(spec.replace(str(SCRIPT), "train.py"), path=script.parent / "spec.yaml")
    ).points
    assert point.workload.script == str(script)  # relative to the spec's folder, recorded absolute
    sweep = tmp_path / "sweep"
    outcome = run_point(point, sweep, env=DistEnv(hostname="node-a"))
    assert (outcome.ok, outcome.failed, outcome.skipped) == (5, 0, 0)
    rows = rows_of(sweep, point)
    assert [r["rung"] for r in rows] == [
        "device_batch",
        "host_batch",
        "processed_sample",
        "raw_sample",
        "full",
    ]
    for row in rows:
        assert row["status"] == "ok" and row["hostname"] == "node-a" and row["device"] == "cpu"
        # The point's num_workers replaced the script's 0; the batch size is the script's own.
        assert (row["num_workers"], row["batch_size"]) == ("1", "2")
        assert int(row["samples"]) == 4 * 2 and row["script"] == str(script)
        assert row["args"] == "--step-ms 1 --num-workers 0"
    # The loader alone, after each sample-level rung (the spec measures device_batch too).
    assert [bool(r["loader_capacity"]) for r in rows] == [False, False, True, True, True]
    assert rows[3]["transform_names"] == "ToTensor,Sleep"
    meta = json.loads((layout.point_dir(sweep, point.id) / "meta-rank0.json").read_text())
    assert meta["script"] == str(script) and meta["script_git_commit"] == commit != meta["git_commit"]
    assert (layout.point_dir(sweep, point.id) / "samples-rank0.csv").is_file()


def test_each_rank_of_a_script_keeps_its_output_in_its_point_folder(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (point,) = points(["--fail", "during"])
    run_point(point, tmp_path)
    out, err = layout.script_logs(layout.point_dir(tmp_path, point.id), 0)
    assert out.name == "script-rank0.out" and err.name == "script-rank0.err"
    assert "RuntimeError: the step blew up at batch 2" in err.read_text()
    (point,) = points([])
    run_point(point, tmp_path)
    out, err = layout.script_logs(layout.point_dir(tmp_path, point.id), 0)
    assert out.read_text() == "DATALOADER 0 False False False 2 False 2\nrank 0: training\n"
    # ...and still on the console (the job's log), as it comes.
    assert "rank 0: training" in capfd.readouterr().out


def test_a_sequence_of_the_scripts_own_flags_is_one_point_each(tmp_path: Path) -> None:
    found = points(
        [],
        extra="sequence:\n  - {name: two, args: [--batch-size, '2']}\n  - {name: four, args: [--batch-size, '4']}\n",
    )
    assert [p.workload.args for p in found] == [["--batch-size", "2"], ["--batch-size", "4"]]
    for point in found:
        run_point(point, tmp_path)
    assert [rows_of(tmp_path, p)[0]["samples"] for p in found] == ["8", "16"]


@pytest.mark.parametrize(
    ("fail", "words"),
    [
        ("before", "the script exited with status 3 without reaching harness.probe"),
        ("no-probe", "the script exited with status 0 without reaching harness.probe"),
        ("during", "the script exited with status 1 before the probe had measured the point"),
        ("kill", "the script was killed by SIGKILL (status -9) before the probe had measured the point"),
        (
            "break",
            "the script's loop left harness.probe.measure early (after 3 batches of the 17 it "
            "receives, as its loader's len() says; a step limit of the script's (a --test-nsteps) "
            "must be at least 17): iterate it to its end",
        ),
        (
            # A framework's teardown raised over the probe's SystemExit: the probe's reason.
            "teardown",
            "the script's loop left harness.probe.measure early (after 3 batches of the 17 it "
            "receives, as its loader's len() says; a step limit of the script's (a --test-nsteps) "
            "must be at least 17): iterate it to its end (no break) so that every rung is measured "
            "(the script then exited with status 1: an error was raised over the probe's SystemExit "
            "as it unwound, a framework's teardown; the error below is not the cause)",
        ),
    ],
)
def test_a_script_that_fails_leaves_failed_rows_that_say_how(tmp_path: Path, fail: str, words: str) -> None:
    (point,) = points(
        ["--fail", fail], rungs="[host_batch, full]", measure="{warmup_steps: 1, steps: 3, repeats: 2}"
    )
    outcome = run_point(point, tmp_path)
    assert (outcome.ok, outcome.failed) == (0, 4)
    rows = rows_of(tmp_path, point)
    assert sorted((r["rung"], r["repeat"]) for r in rows) == [
        ("full", "0"),
        ("full", "1"),
        ("host_batch", "0"),
        ("host_batch", "1"),
    ]
    assert all(r["status"] == "failed" and r["error"].startswith(words) for r in rows)
    if fail == "before":
        # It failed, saying why: no hint about its loop.
        assert rows[0]["error"] == (
            "the script exited with status 3 without reaching harness.probe; "
            "stderr: cannot open the data set: disk on fire"
        )
    if fail == "during":
        assert "RuntimeError: the step blew up at batch 2" in rows[0]["error"]
    if fail == "teardown":
        assert rows[0]["error"].endswith("RuntimeError: Please call iter(combined_loader) first.")


def test_an_error_raised_over_the_probes_end_names_the_probes_reason() -> None:
    ended = Ended(
        returncode=1,
        stderr_tail="RuntimeError: Please call iter(combined_loader) first.",
        reached=True,
        done=False,
        probe_ended="a probe.measure after the point was measured: the point is whole, the script ends there",
    )
    assert ended.reason() == (
        "harness.probe ended the script: a probe.measure after the point was measured: the point is "
        "whole, the script ends there (the script then exited with status 1: an error was raised over "
        "the probe's SystemExit as it unwound, a framework's teardown; the error below is not the "
        "cause); stderr: RuntimeError: Please call iter(combined_loader) first."
    )


LONG_ERROR = (
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] "
    f"Connection closed by peer [10.0.0.7]:{'5' * 200} (the end)"
)


def test_a_failed_row_keeps_the_scripts_error_whole_to_its_last_line(tmp_path: Path) -> None:
    """Warnings before it, a message of 300 characters and a warning after the traceback (at
    exit): the row ends with the exception's line, whole, after what fits of the traceback."""
    (point,) = points(["--fail", "long"])
    run_point(point, tmp_path)
    (row,) = rows_of(tmp_path, point)
    assert row["error"].startswith(
        "the script exited with status 1 before the probe had measured the point; stderr: "
    )
    assert row["error"].endswith(" | " + LONG_ERROR)
    assert '; stderr: raise RuntimeError(f"' in row["error"]  # its code line fits beside it
    assert "destroy_process_group" not in row["error"]


def test_status_shows_what_happened_and_the_scripts_error_line_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness import cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(script_spec(["--fail", "long"]))
    assert cli.main(["run", str(spec), "--results", str(tmp_path / "results")]) == 1
    (sweep,) = (tmp_path / "results" / "script").iterdir()
    capsys.readouterr()
    cli.main(["status", str(sweep)])
    out = capsys.readouterr().out
    assert (
        "the script exited with status 1 before the probe had measured the point; stderr: … " + LONG_ERROR
    ) in out


def test_a_script_without_the_probe_is_told_to_add_its_lines(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text("print('trained for an epoch')\n")
    (point,) = expand(parse_spec(script_spec([]).replace(str(SCRIPT), str(plain)))).points
    run_point(point, tmp_path)
    (row,) = rows_of(tmp_path, point)
    assert row["error"] == (
        "the script exited with status 0 without importing harness.probe (its lines are "
        "missing: docs/guides/training-script.md)"
    )


def test_the_sweep_goes_on_after_a_failed_script(tmp_path: Path) -> None:
    (bad,) = points(["--fail", "before"])
    (good,) = points([])
    assert [run_point(p, tmp_path).ok for p in (bad, good)] == [0, 1]


def test_a_resumed_script_point_keeps_its_rows_and_runs_the_rest(tmp_path: Path) -> None:
    (point,) = points([], rungs="[host_batch, full]")
    run_point(point, tmp_path)
    path = layout.rank_file(layout.point_dir(tmp_path, point.id), 0)
    kept = results.read_rows(path)[0]
    header, first, _ = path.read_text().splitlines(keepends=True)
    path.write_text(header + first)  # as if the job had stopped after host_batch
    outcome = run_point(point, tmp_path)
    rows = rows_of(tmp_path, point)
    assert outcome.ok == 2 and [r["rung"] for r in rows] == ["host_batch", "full"]
    assert rows[0] == kept


def ladder_verdict(tmp_path: Path, args: list[str]):  # type: ignore[no-untyped-def]
    """A 100 ms step (a sleep) keeps the cheap rungs far above a loaded machine's jitter;
    three repeats, so that a drop is tested."""
    (point,) = points(
        ["--step-ms", "100", *args],
        rungs="[processed_sample, raw_sample, full]",
        measure="{warmup_steps: 1, steps: 4, repeats: 3}",
    )
    outcome = run_point(point, tmp_path)
    assert outcome.failed == 0 and outcome.ok == 9
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    return verdict


@pytest.mark.serial
def test_a_slow_read_in_the_scripts_dataset_is_named(tmp_path: Path) -> None:
    assert ladder_verdict(tmp_path, ["--read-ms", "100"]).stages == ["raw data loading"]


@pytest.mark.serial
def test_a_slow_transform_in_the_scripts_dataset_is_named(tmp_path: Path) -> None:
    assert ladder_verdict(tmp_path, ["--transform-ms", "100"]).stages == ["transforms"]


@pytest.mark.serial
def test_nothing_is_named_where_nothing_was_injected(tmp_path: Path) -> None:
    verdict = ladder_verdict(tmp_path, [])
    # No stage is named and the loader is never said to fall short; whether three windows of
    # four steps call it "keeps up" or leave it undecided within the ±5 % margin is the
    # machine's load (a loaded 2-core CI machine left it undecided).
    assert verdict.stages == [], verdict.sentence
    assert verdict.state in (KEEPS_UP, UNDECIDED), verdict.sentence


@pytest.mark.serial
def test_two_local_ranks_of_a_script_name_the_slow_one_and_only_it(tmp_path: Path) -> None:
    spec = parse_spec(
        script_spec(
            ["--step-ms", "50"],
            measure="{warmup_steps: 1, steps: 6, repeats: 1}",
            extra=(
                "sequence:\n  - {name: even}\n"
                "  - {name: slow, args: [--step-ms, '50', --read-ms, '100', --slow-rank, '1']}\n"
                "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n"
            ),
        )
    )
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path, backend="local", world_size=2)
    assert run_local(plan.points, sweep, spec.slurm) == []
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 4
    assert set(rows["world_size"]) == {2}
    stragglers = find_stragglers(rows)
    assert [(s.point_id, s.who) for s in stragglers] == [
        (plan.points[1].id, f"rank 1 on {rows['hostname'][0]}")
    ]
    for point in plan.points:  # each rank's own output, in the point's folder
        for rank in (0, 1):
            out, _ = layout.script_logs(layout.point_dir(sweep, point.id), rank)
            assert out.read_text().endswith(f"\nrank {rank}: training\n")
    slow = rows[(rows["point_id"] == plan.points[1].id)].set_index("rank")
    # Rank 1 read 2 samples × 100 ms per step: it waited at least that, rank 0 did not.
    assert slow.loc[1, "loading_time"] >= 0.2 > slow.loc[0, "loading_time"]


def test_the_scripts_environment_is_torchruns_for_the_rank(tmp_path: Path) -> None:
    (point,) = points([])
    env = DistEnv(rank=3, world_size=4, local_rank=1, local_world_size=2, master_addr="n1", master_port=29511)
    job = ProbeJob(sweep_dir=tmp_path, point=point, env=env, skip_done=True, script=SCRIPT)
    inherited = {"PATH": "/bin", "TORCHELASTIC_RUN_ID": "x", "RANK": "0", "SLURM_CPUS_PER_TASK": "4"}
    environ = script_environment(job, inherited)
    ranks = {k: environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR")}
    assert ranks == {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "n1",
    }
    assert environ["MASTER_PORT"] == "29511" and "TORCHELASTIC_RUN_ID" not in environ
    assert environ["OMP_NUM_THREADS"] == "4" and environ["PATH"] == "/bin"
    assert ProbeJob.from_environ(environ) == job


def test_plan_refuses_the_flags_the_script_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness import cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(script_spec(["--read-ms", "1", "--bogus"]))
    assert cli.main(["plan", str(spec)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"harness: {spec}: workload.args: the script refused its flags (--read-ms 1 --bogus): "
        "probe_script.py: error: unrecognized arguments: --bogus"
    )
    spec.write_text(script_spec(["--read-ms", "1"]))
    assert cli.main(["plan", str(spec)]) == 0


def plan_of(tmp_path: Path, spec_text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`harness plan` from tmp_path/work (the working directory): its status and stderr."""
    from harness import cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    capsys.readouterr()
    code = cli.main(["plan", str(spec)])
    return code, capsys.readouterr().err.strip()


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_plan_checks_the_script_in_a_scratch_folder_and_stops_it_at_its_loop(
    tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What it writes before its loop lands in a scratch folder; it never trains nor saves."""
    (work / "data").mkdir()
    (work / "data" / "x").write_text("")  # an existing path in args is the working directory's
    spec = script_spec(["--log-file", "train.log", "--checkpoint", "ckpt.pt", "--log-file=data/x"])
    code, err = plan_of(tmp_path, spec, capsys)
    assert code == 0, err
    assert sorted(p.name for p in work.rglob("*")) == ["data", "x"]
    assert (work / "data" / "x").read_text() == (
        f"started --log-file train.log --checkpoint ckpt.pt --log-file={work}/data/x\n"
    )


def test_plan_refuses_a_loader_the_script_builds_after_the_first_probe_call(
    tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = plan_of(tmp_path, script_spec(["--val-workers", "0", "--val-persistent"]), capsys)
    assert code == 2
    assert err == (
        f"harness: {tmp_path / 'spec.yaml'}: workload.args: a DataLoader of the script refused the "
        "settings (--val-workers 0 --val-persistent): "
        "ValueError: persistent_workers option needs num_workers > 0"
    )


def test_plan_refuses_a_script_that_never_imports_the_probe_and_keeps_its_checkpoint_out(
    tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "main.py"  # ImageNet's main.py before the probe: it trains, then saves
    plain.write_text("open('checkpoint.pth.tar', 'w').write('weights')\n")
    code, err = plan_of(tmp_path, script_spec([]).replace(str(SCRIPT), str(plain)), capsys)
    assert code == 2 and list(work.iterdir()) == []
    assert err == (
        f"harness: {tmp_path / 'spec.yaml'}: workload.script: the script never imports "
        "harness.probe (its check run went to its end without it, and was stopped): add the "
        "probe's lines (docs/guides/training-script.md)"
    )


def test_plan_refuses_a_script_that_ends_before_its_loop_reaches_the_probe(
    tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = plan_of(tmp_path, script_spec(["--fail", "no-probe"]), capsys)
    assert code == 2
    assert err.endswith(
        "workload.script: the script ended (status 0) before its loop reached "
        "harness.probe.measure (--fail no-probe): the loop to measure must iterate "
        "probe.measure(loader, device)"
    )


def test_run_runs_the_script_once_per_point_and_rank_with_no_check_run_before(
    tmp_path: Path, work: Path
) -> None:
    from harness import cli

    starts = tmp_path / "starts.log"
    spec = tmp_path / "spec.yaml"
    spec.write_text(script_spec(["--log-file", str(starts)]))
    assert cli.main(["run", str(spec), "--results", str(tmp_path / "results")]) == 0
    assert len(starts.read_text().splitlines()) == 1


FLAGS = (
    "{num_workers: --num-workers, persistent_workers: --persistent-workers, pin_memory: --pin-memory, "
    "non_blocking: --non-blocking, prefetch_factor: --prefetch-factor, drop_last: --drop-last, "
    "batch_size: --batch-size}"
)


def flagged_spec(
    loader: str = "{num_workers: [0, 1], persistent_workers: true, pin_memory: true, drop_last: true}",
) -> str:
    return script_spec([], extra=f"loader: {loader}\n").replace(
        "args: []}", f"args: [], batch_size: 4, flags: {FLAGS}}}"
    )


def test_a_script_whose_flags_are_mapped_prints_each_points_own_settings(tmp_path: Path) -> None:
    """The course's DATALOADER line prints the point's values for the settings the spec names
    (prefetch_factor, null without workers, and non_blocking, not named: the script's own)."""
    found = list(expand(parse_spec(flagged_spec())).points)
    assert [p.flag_args() for p in found] == [
        ["--num-workers", "0", "--no-persistent-workers", "--pin-memory", "--drop-last", "--batch-size", "4"],
        ["--num-workers", "1", "--persistent-workers", "--pin-memory", "--drop-last", "--batch-size", "4"],
    ]
    lines = []
    for point in found:
        assert run_point(point, tmp_path).ok == 1
        out, _ = layout.script_logs(layout.point_dir(tmp_path, point.id), 0)
        lines.append(out.read_text().splitlines()[0])
        (row,) = rows_of(tmp_path, point)
        assert (row["num_workers"], row["pin_memory"], row["batch_size"]) == (lines[-1][11], "True", "4")
    assert lines == ["DATALOADER 0 False True False 2 True 4", "DATALOADER 1 True True False 2 True 4"]


def test_plan_shows_each_points_flags(tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness import cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(flagged_spec("{num_workers: [0, 1]}"))
    assert cli.main(["plan", str(spec)]) == 0
    out = capsys.readouterr().out
    (first, second) = expand(parse_spec(flagged_spec("{num_workers: [0, 1]}"))).points
    assert "note: the script's flags carry the point's settings (num_workers --num-workers, " in out
    assert f"note:   0 {first.id}: --num-workers 0 --batch-size 4\n" in out
    assert f"note:   1 {second.id}: --num-workers 1 --batch-size 4\n" in out


@pytest.mark.parametrize(
    ("flags", "field", "words"),
    [
        (
            "{workers: -j}",
            "workload.flags.workers",
            "'workers' is not a setting; allowed: batch_size, num_workers, persistent_workers, "
            "pin_memory, non_blocking, prefetch_factor, drop_last",
        ),
        (
            "{num_workers: j}",
            "workload.flags.num_workers",
            "'j' is not a flag; expected a string starting with -",
        ),
    ],
)
def test_a_flag_mapping_names_settings_and_flags(flags: str, field: str, words: str) -> None:
    from harness.config.spec import SpecError

    with pytest.raises(SpecError) as refused:
        parse_spec(script_spec([]).replace("args: []}", f"args: [], flags: {flags}}}"))
    assert refused.value.field == field and str(refused.value).endswith(words)


def test_a_dataloader_refusing_a_setting_the_script_keeps_says_to_name_it_in_the_spec(
    tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The course's dlojz.py: --persistent-workers on by default, its validation loader built
    # from its flags; a spec that sweeps num_workers [0, 2] alone gives point 0 no workers.
    flags = "{num_workers: --val-workers, persistent_workers: {true: --val-persistent, false: null}}"
    spec = script_spec(["--val-persistent"], extra="loader: {num_workers: [0, 1]}\n").replace(
        "]}", f"], flags: {flags}}}", 1
    )
    code, err = plan_of(tmp_path, spec, capsys)
    assert code == 2
    assert err == (
        f"harness: {tmp_path / 'spec.yaml'}: workload.args: a DataLoader of the script refused the "
        "settings (--val-persistent --val-workers 0): ValueError: persistent_workers option needs "
        "num_workers > 0 (persistent_workers is the script's own: the spec's loader section does not "
        "name it; name it there, its flag mapped in workload.flags, and each point passes the value "
        "PyTorch allows with its workers, as plan's adjusted column shows)"
    )
    # As said: the flag out of args, persistent_workers named; point 0 passes none.
    named = script_spec([], extra="loader: {num_workers: [0, 1], persistent_workers: true}\n")
    code, err = plan_of(tmp_path, named.replace("]}", f"], flags: {flags}}}", 1), capsys)
    assert code == 0, err


def test_plan_refuses_a_generator_around_the_loader(
    tmp_path: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = plan_of(tmp_path, script_spec(["--wrap"]), capsys)
    assert code == 2
    assert err.startswith(
        f"harness: {tmp_path / 'spec.yaml'}: workload.script: harness.probe: the loader is a generator, "
        "an iterator that can be read once"
    )
