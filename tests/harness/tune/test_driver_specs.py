"""`harness tune` (harness/tune/driver.py) on specs of other shapes than test_driver.py's grid:
a grid whose loader is the user's own (workload.loader, a factory:
harness/workloads/loader_factory.py), with the same known truth, the DataLoader built by
tests.fixtures.loaders:slow_reads with the point's settings; and a window of steps: auto,
refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.load import load_results
from analysis.tune.model import Config
from harness.config.plan import expand
from harness.config.spec import load_spec
from harness.tune.driver import check_grid, tune
from harness.tune.rounds import TuneError
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


def test_an_auto_window_is_refused_in_one_line(tmp_path: Path) -> None:
    """tune prices its runs and the grid's in steps (summary.py): an auto window's steps are
    known only as it runs."""
    spec = write_spec(tmp_path, SPEC.replace("steps: 12", "steps: auto"))
    with pytest.raises(TuneError) as error:
        check_grid(expand(load_spec(spec)))
    assert str(error.value) == (
        f"{spec}: measure.steps: auto is a window of harness run; tune prices its runs in steps: give "
        "it a number (e.g. the override measure.steps=50, without measure.max_seconds)"
    )
