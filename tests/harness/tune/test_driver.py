"""`harness tune` on a real grid whose answer is known from its injected costs.

The pipeline: each sample's read sleeps 10 ms (tests.fixtures.workloads:read_then_transform,
8 samples a batch: 80 ms a batch, no core used), the step is the emulated accelerator's 60 ms
sleep. So a batch takes 140 ms with num_workers=0 (57 samples/s), one worker delivers one
batch per 80 ms (100 samples/s), and from two workers on the step bounds: 60 ms a batch, 133
samples/s. Grid num_workers [0, 1, 2, 3]: the answer is 2 (3 ties with it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.load import load_results
from analysis.render.report import build_report
from analysis.tune.model import Config, lightning_workers
from analysis.tune.report import render
from analysis.tune.windows import FIRST_WINDOWS, WINDOWS
from harness.config.plan import expand
from harness.config.spec import load_spec
from harness.storage.sweep import load_points
from harness.tune.driver import check_grid, small_grid_note, tune
from harness.tune.rounds import TuneError
from harness.tune.summary import TUNE_FILE
from tests.harness.test_cli import harness

READ_S, STEP_S, BATCH = 0.010, 0.060, 8
SPEC = f"""\
name: tune-truth
workload:
  dataset: tests.fixtures.workloads:read_then_transform
  dataset_args: {{size: 400, read: {READ_S}}}
  model: emulated
  model_args: {{step_ms: {STEP_S * 1000:.0f}}}
  batch_size: {BATCH}
  device: cpu
measure: {{warmup_steps: 2, steps: 20, repeats: 1}}
sampler: {{gpu: false}}
rungs: [full]
loader:
  num_workers: [0, 1, 2, 3]
  persistent_workers: true
"""


def truth(workers: int) -> float:
    """samples/s from the injected costs (module docstring)."""
    if workers == 0:
        return BATCH / (READ_S * BATCH + STEP_S)
    return BATCH / max(STEP_S, READ_S * BATCH / workers)


def write_spec(folder: Path, text: str = SPEC) -> Path:
    path = folder / "tune.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The grid, with the raw samples' rung named: the profile measures it for the caching
    what-if."""
    folder = tmp_path_factory.mktemp("tune")
    plan = expand(load_spec(write_spec(folder, SPEC.replace("rungs: [full]", "rungs: [raw_sample, full]"))))
    return tune(plan, folder / "results")


@pytest.mark.serial
def test_tune_reaches_the_grids_answer(tuned: tuple[Path, dict]) -> None:
    _, summary = tuned
    answer = Config.of(summary["answer"]).num_workers
    truths = {n: truth(n) for n in (0, 1, 2, 3)}
    assert truths[answer] >= 0.95 * max(truths.values()), f"tune chose {answer} workers; truth {truths}"
    # Never worse than Lightning's cpus // ranks - 1 or num_workers = cores (on 2 cores: 1, 2).
    for other in (lightning_workers(2, 1), 2):
        assert truths[answer] >= 0.95 * truths[other]


@pytest.mark.serial
def test_tune_writes_a_sweep_that_report_reads(tuned: tuple[Path, dict]) -> None:
    sweep_dir, summary = tuned
    assert json.loads((sweep_dir / TUNE_FILE).read_text())["answer"] == summary["answer"]
    plan = json.loads((sweep_dir / "plan.json").read_text())["points"]
    measured = {(p["loader"]["num_workers"], tuple(p["rungs"])) for p in plan}
    # The profile (0 and 1 worker, the bound and full; the spec's cached rung at 1 worker) and
    # the confirmations (full, 3 runs).
    assert {(0, ("host_batch", "full")), (1, ("host_batch", "raw_sample", "full"))} <= measured
    # The profile's points: 2 windows each, 3 where the first two disagreed (repeats.json).
    windows = summary["profile"]["windows"]
    assert windows in (FIRST_WINDOWS, WINDOWS)
    profile = [p for p in plan if "host_batch" in p["rungs"] or p["measure"]["repeats"] == FIRST_WINDOWS]
    confirmed = [p for p in plan if p not in profile]
    assert confirmed and all(p["rungs"] == ["full"] and p["measure"]["repeats"] == 3 for p in confirmed)
    # Undecided ones may have been measured again (repeats.json): every run is counted.
    runs = {p.id: p.measure.repeats for p in load_points(sweep_dir)}
    assert all(runs[p["id"]] == windows for p in profile)
    # The plateau point: the grid's most workers (3), full only.
    assert (3, ("full",)) in measured
    # A pass of the profile: 2 + 3 rungs of its two points and the plateau's full: 6 rows.
    assert summary["point_runs"]["tune"] == 6 * windows + sum(runs[p["id"]] for p in confirmed)
    assert summary["point_runs"]["exhaustive"] == 3 * 4
    report = build_report([sweep_dir], "terminal")
    assert "recommendation for" in report.text


@pytest.mark.serial
def test_the_caching_what_if_finds_that_caching_the_reads_frees_the_workers(tuned: tuple[Path, dict]) -> None:
    """The raw samples cached, the 80 ms of reads a batch are gone: the step's 60 ms bounds
    with at most one worker (two were needed), at the step's 133 samples/s. The step is the
    profile's reading of it: 60 ms of sleep and the emulated head's compute, which a loaded
    machine slows, with the hand-off of each batch (beside a test run and two other jobs on 2
    cores: a 63 ms step, and the what-if said 117 samples/s, 93 % of that step's 127)."""
    _, summary = tuned
    (entry,) = summary["caching"]
    assert entry["rung"] == "raw_sample"
    assert Config.of(entry["choice"]).num_workers <= 1
    step_s = summary["profile"]["step_s"]
    assert STEP_S <= step_s < 1.5 * STEP_S
    assert entry["samples_per_s"] >= 0.9 * BATCH / step_s
    assert entry["samples"] == 400 and entry["sample_bytes"] > 0
    assert "what if: caching the raw samples (decoded, before the transforms), as raw_sample measured it" in (
        render(summary)
    )


@pytest.mark.serial
def test_what_if_from_the_tune_sweep(tuned: tuple[Path, dict], tmp_path: Path) -> None:
    sweep_dir, _ = tuned
    done = harness("tune", "--what-if", "gpus=8,cores=64", str(sweep_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "what if: 8 GPU(s) and 64 cores: 8 cores a rank" in done.stdout
    assert "Lightning's suggestion (cpus // ranks - 1): num_workers=7" in done.stdout
    bad = harness("tune", "--what-if", "gpus=8", str(sweep_dir), cwd=tmp_path)
    assert bad.returncode == 2
    assert (
        "--what-if: expected gpus=G,cores=C with integers >= 1 (e.g. gpus=8,cores=64), got 'gpus=8'"
        in bad.stderr
    )


def test_a_negative_budget_is_refused_before_anything_runs(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    done = harness("tune", str(spec), "--budget", "-1", "--results", str(tmp_path / "results"), cwd=tmp_path)
    assert done.returncode == 2
    assert (
        "--budget: the point-runs the confirmations may spend, an integer >= 0 (0: the profile alone, "
        "its choice unconfirmed); got -1"
    ) in done.stderr
    assert not (tmp_path / "results").exists()


def test_what_if_needs_a_tune_sweep(tmp_path: Path) -> None:
    done = harness("tune", "--what-if", "gpus=8,cores=64", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert f"{tmp_path}: no tune.json: not a sweep made by `harness tune`" in done.stderr


@pytest.mark.serial
def test_a_grid_over_the_copy_settings_profiles_each_mode(tmp_path: Path) -> None:
    """pin_memory [false, true]: the pinned mode gets its own bound rung (its step and copy)
    and plateau run in the profile's round. On a CPU PyTorch pins nothing, so nothing was
    injected: the answer's worker count is the truth's, and the report names the mode."""
    text = SPEC.replace("num_workers: [0, 1, 2, 3]", "num_workers: [0, 1, 2]\n  pin_memory: [false, true]")
    plan = expand(load_spec(write_spec(tmp_path, text.replace("steps: 20", "steps: 12"))))
    check_grid(plan)
    sweep_dir, summary = tune(plan, tmp_path / "results")
    points = json.loads((sweep_dir / "plan.json").read_text())["points"]
    profiled = {
        (p["loader"]["num_workers"], p["loader"]["pin_memory"], tuple(p["rungs"]))
        for p in points
        if p["measure"]["repeats"] == FIRST_WINDOWS  # the profile's windows (the confirmations': 3)
    }
    assert profiled == {
        (0, False, ("host_batch", "full")),
        (1, False, ("host_batch", "full")),
        (2, False, ("full",)),  # the plateau, pageable
        (1, True, ("host_batch",)),  # the pinned mode's step
        (2, True, ("full",)),  # and its plateau
    }
    assert list(summary["profile"]["copy_modes"]) == ["pin_memory=true non_blocking=false"]
    answer = Config.of(summary["answer"])
    truths = {n: truth(n) for n in (0, 1, 2)}
    assert truths[answer.num_workers] >= 0.95 * max(truths.values())
    assert summary["point_runs"]["exhaustive"] == 3 * 6
    rendered = harness("tune", "--what-if", "gpus=2,cores=8", str(sweep_dir), cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr


def test_a_grid_over_an_unmodelled_setting_is_refused(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SPEC.replace(f"batch_size: {BATCH}", "batch_size: [8, 16]"))
    with pytest.raises(
        TuneError, match=r"the grid also varies batch_size \(16, 8\): tune one value at a time"
    ):
        check_grid(expand(load_spec(spec)))


def test_tune_on_the_local_backend_measures_every_rank(tmp_path: Path) -> None:
    """Two ranks a point (submitit's local executor): the profile counts them, and every
    measured point has both ranks' rows."""
    text = SPEC.replace("num_workers: [0, 1, 2, 3]", "num_workers: [0, 1]").replace("steps: 20", "steps: 6")
    plan = expand(load_spec(write_spec(tmp_path, text + "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n")))
    sweep_dir, summary = tune(plan, tmp_path / "results", backend="local", world_size=2)
    assert summary["profile"]["ranks"] == 2
    rows = load_results([sweep_dir]).rows
    for _, point in rows.groupby("point_id"):
        assert set(point["rank"]) == {0, 1}
        assert set(point["status"]) == {"ok"}


def test_a_script_workload_is_refused(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "fixtures" / "probe_script.py"
    spec = write_spec(tmp_path, f"name: p\nworkload: {{script: {script}}}\nloader: {{num_workers: [0, 1]}}\n")
    with pytest.raises(TuneError, match=r"a script workload does not have .* sweep it with harness run"):
        check_grid(expand(load_spec(spec)))


def test_a_grid_no_dearer_than_tune_is_said_to_be_cheaper_measured() -> None:
    # The profile, in 2 passes: 2 points × 2 rungs, the worker point's loader timed alone and
    # the plateau point; then the choice and its two num_workers neighbours, and the one an
    # uncertain profile adds. Up to 8 points at 3 runs, harness run costs less.
    assert small_grid_note(4, 3) == (
        "tune: the grid has 4 points (12 runs at 3 a point); tune spends at least 21 (the "
        "profile's 12 windows in 2 passes, then 3 points 3 times), more where its profile is "
        "uncertain, and its windows at num_workers=0 and 1 are the grid's slowest: harness run "
        "measures this grid for less; tune pays from about 9 points"
    )
    assert small_grid_note(8, 3).startswith("tune: the grid has 8 points (24 runs at 3 a point)")
    assert small_grid_note(9, 3) == ""
    assert small_grid_note(4, 5).startswith(
        "tune: the grid has 4 points (20 runs at 5 a point); tune spends at least 27"
    )
    assert small_grid_note(7, 5) == ""  # 35 runs against 27 and 5


def test_with_windows_of_seconds_the_profile_counts_a_quarter_of_a_window_each() -> None:
    """measure.seconds or steps: auto: every window lasts about its seconds, the profile's a
    quarter of the spec's: its 12 windows cost about 3 of the grid's, and tune pays from 6
    points (at 3 runs a point) instead of 9."""
    assert small_grid_note(5, 3, timed=True) == (
        "tune: the grid has 5 points (15 runs at 3 a point); tune spends at least 12 (the profile's "
        "12 windows in 2 passes, each a quarter of the spec's seconds: about 3 of the spec's windows, "
        "then 3 points 3 times), more where its profile is uncertain, and its windows last their "
        "seconds (at least), whatever their configuration: harness run measures this grid for less; "
        "tune pays from about 6 points"
    )
    assert small_grid_note(6, 3, timed=True) == ""
    assert small_grid_note(6, 3) != ""
