"""The tune's sweep folder and the points it runs (harness/tune/rounds.py)."""

from __future__ import annotations

from pathlib import Path

from analysis.tune.model import Config
from harness.backends.registry import BACKENDS
from harness.config.plan import expand
from harness.config.spec import load_spec
from harness.tune.rounds import Tuner
from tests.harness.tune.test_driver import SPEC, write_spec


def test_profile_points_measure_a_quarter_of_the_specs_window(tmp_path: Path) -> None:
    """The profile's windows are a quarter of the spec's (tune.windows.profile_steps: its
    windows at num_workers=0 and 1 are the grid's slowest); the confirmations measure the
    spec's own window, as the exhaustive grid would."""
    plan = expand(load_spec(write_spec(tmp_path, SPEC.replace("steps: 20", "steps: 200"))))
    tuner = Tuner(plan, tmp_path / "results", BACKENDS["inline"](plan.spec), 1)
    config = Config(num_workers=1, persistent_workers=True)
    profiled = tuner.variant(config, rungs=("full",), repeats=2, profile=True)
    confirmed = tuner.variant(config, rungs=("full",), repeats=3)
    assert profiled.measure.steps == 50
    assert confirmed.measure.steps == 200
    assert profiled.id != confirmed.id
    # A spec's window already short is kept whole (never under 20 steps).
    short = expand(load_spec(write_spec(tmp_path, SPEC.replace("steps: 20", "steps: 12"))))
    tuner = Tuner(short, tmp_path / "short", BACKENDS["inline"](short.spec), 1)
    assert tuner.variant(config, rungs=("full",), repeats=2, profile=True).measure.steps == 12
