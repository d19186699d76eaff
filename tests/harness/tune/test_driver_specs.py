"""`harness tune` (harness/tune/driver.py) on specs of other shapes than test_driver.py's grid:
a grid whose loader is the user's own (workload.loader, a factory:
harness/workloads/loader_factory.py), with the same known truth, the DataLoader built by
tests.fixtures.loaders:slow_reads with the point's settings; and a window of steps: auto,
tuned with windows of seconds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analysis.load import load_results
from analysis.tune.model import Config
from analysis.tune.report import render
from harness.config.plan import expand
from harness.config.spec import load_spec
from harness.tune.driver import check_grid, tune
from tests.harness.test_cli import harness
from tests.harness.tune.test_driver import BATCH, READ_S, STEP_S, truth, write_spec

SPEC = f"""\
name: tune-factory
workload:
  loader: tests.fixtures.loaders:slow_reads
  loader_args: {{size: 400, read: {READ_S}}}
  model: emulated
  model_args: {{step_ms: {STEP_S * 1000:.0f}}}
  batch_size: {BATCH}
  device: cpu
measure: {{warmup_steps: 2, steps: 12, repeats: 1}}
sampler: {{gpu: false}}
rungs: [full]
loader:
  num_workers: [0, 1, 2]
  persistent_workers: true
"""


@pytest.mark.serial
def test_tune_profiles_and_answers_a_grid_of_a_loader_factory(tmp_path: Path) -> None:
    """The profile's rungs (host_batch: the factory's first batch; full: its loader) and the
    loader timed alone are measured through the factory's DataLoader, built with each point's
    num_workers; the answer is the truth's, and every row names the loader as given."""
    plan = expand(load_spec(write_spec(tmp_path, SPEC)))
    sweep_dir, summary = tune(plan, tmp_path / "results")
    answer = Config.of(summary["answer"])
    truths = {n: truth(n) for n in (0, 1, 2)}
    assert truths[answer.num_workers] >= 0.95 * max(truths.values())
    rows = load_results([sweep_dir]).rows
    assert set(rows["status"]) == {"ok"}
    assert set(rows["loader_given"]) == {"torch.utils.data.dataloader.DataLoader"}
    # Each point's loader had the point's workers (the factory takes num_workers).
    assert {int(n) for n in rows["num_workers"]} == {0, 1, 2}


AUTO_READ_S, AUTO_STEP_S = 0.004, 0.024
AUTO_SPEC = f"""\
name: tune-auto
workload:
  dataset: tests.fixtures.workloads:read_then_transform
  dataset_args: {{size: 400, read: {AUTO_READ_S}}}
  model: emulated
  model_args: {{step_ms: {AUTO_STEP_S * 1000:.0f}}}
  batch_size: {BATCH}
  device: cpu
measure: {{warmup_steps: 2, steps: auto, seconds: 0.5, max_seconds: 4}}
sampler: {{gpu: false}}
rungs: [full]
loader:
  num_workers: [0, 1, 2, 3]
  persistent_workers: true
"""


def auto_truth(workers: int) -> float:
    """samples/s of AUTO_SPEC's pipeline: 32 ms of reads a batch, a 24 ms step (test_driver's
    rule): 143 with no worker, 250 with one, the step's 333 from two on."""
    if workers == 0:
        return BATCH / (AUTO_READ_S * BATCH + AUTO_STEP_S)
    return BATCH / max(AUTO_STEP_S, AUTO_READ_S * BATCH / workers)


@pytest.mark.serial
def test_tune_with_auto_windows_reaches_the_known_answer(tmp_path: Path) -> None:
    """measure.steps: auto, as harness run measures it: the profile's windows are auto with a
    quarter of the spec's least and most seconds, the confirmations' the spec's own; every
    row carries its window's relative standard error; the grid is priced in the seconds the
    windows last, and the report says the windows were auto and what they lasted."""
    plan = expand(load_spec(write_spec(tmp_path, AUTO_SPEC)))
    check_grid(plan)  # no longer refused
    sweep_dir, summary = tune(plan, tmp_path / "results")
    answer = Config.of(summary["answer"]).num_workers
    truths = {n: auto_truth(n) for n in (0, 1, 2, 3)}
    assert truths[answer] >= 0.95 * max(truths.values()), f"tune chose {answer} workers; truth {truths}"
    rows = load_results([sweep_dir]).rows
    assert set(rows["status"]) == {"ok"}
    assert rows["window_rse"].notna().all()  # every window was an auto one
    points = json.loads((sweep_dir / "plan.json").read_text())["points"]
    windows = {(p["measure"]["seconds"], p["measure"]["max_seconds"], p["measure"]["steps"]) for p in points}
    # The profile's (0.125 to 1 s) and the confirmations' (the spec's 0.5 to 4 s), both at
    # least the auto window's 40 steps (5 blocks of 8).
    assert windows == {(0.125, 1.0, 40), (0.5, 4, 40)}
    w = summary["windows"]
    assert (w["auto"], w["seconds"], w["max_seconds"], w["profile_seconds"]) == (True, 0.5, 4, 0.125)
    assert w["confirmations"]["windows"] == summary["point_runs"]["tune"] - w["profile"]["windows"]
    # Each window lasts at least its seconds (and its 40 steps), at most its most and a block.
    low, _, high = w["confirmations"]["lasted"]
    assert 0.5 <= low <= high
    # Every run of the exhaustive grid is priced at least at its window's least seconds.
    assert summary["device_seconds"]["exhaustive_estimate"] >= 3 * 4 * 0.5
    text = render(summary)
    assert (
        "windows: auto windows (steps: auto): the confirmations' as the spec's, at least 0.5 s and on "
        "until the step rate is known to 2%, at most 4 s; the profile's a quarter (0.125 to 1 s); "
        "they lasted "
    ) in text
    assert " in the profile and " in text and " in the confirmations" in text


@pytest.mark.serial
def test_the_cli_tunes_auto_windows_on_the_profile_alone(tmp_path: Path) -> None:
    """`harness tune SPEC --budget 0` on a spec of steps: auto (refused in one line before):
    the profile alone, its auto windows said with what they lasted, the choice unconfirmed.
    The grid of 3 points is no dearer than tune: the first line says so, counting the
    profile's windows of a quarter of the spec's seconds."""
    spec = write_spec(tmp_path, AUTO_SPEC.replace("num_workers: [0, 1, 2, 3]", "num_workers: [0, 1, 2]"))
    done = harness("tune", str(spec), "--budget", "0", "--results", str(tmp_path / "results"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "tune: the grid has 3 points (9 runs at 3 a point); tune spends at least 12 (the profile's "
        "12 windows in 2 passes, each a quarter of the spec's seconds: about 3 of the spec's windows"
    )
    assert (
        "windows: auto windows (steps: auto): the confirmations' as the spec's, at least 0.5 s and on "
        "until the step rate is known to 2%, at most 4 s; the profile's a quarter (0.125 to 1 s); "
        "they lasted "
    ) in done.stdout
    # The profile's windows alone (2 passes of 5, or 3 where they disagreed): no confirmation.
    assert re.search(
        r"they lasted [\d.]+-[\d.]+ s \(median [\d.]+, (10|15) windows\) in the profile(;|\n)", done.stdout
    )
    assert "in the confirmations" not in done.stdout
    assert "unconfirmed: the model's choice, num_workers=2" in done.stdout
