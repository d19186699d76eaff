"""The tune's sweep folder and the points it runs (harness/tune/rounds.py)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from analysis.tune.model import Config
from harness.backends.registry import BACKENDS
from harness.config.plan import expand
from harness.config.spec import load_spec
from harness.execution.loop import timed_loop
from harness.execution.steady import most_said
from harness.tune.rounds import Tuner, profile_measure
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


def test_profile_windows_of_seconds_are_a_quarter_of_the_specs_seconds(tmp_path: Path) -> None:
    """An auto window (steps: auto) keeps its least steps (40: 5 blocks of 8) and gets a
    quarter of its least and most seconds; measure.seconds beside a number of steps, a
    quarter of both; a most never under the least. The confirmations keep the spec's."""
    auto = SPEC.replace("steps: 20, repeats: 1", "steps: auto, seconds: 4, max_seconds: 20, repeats: 1")
    plan = expand(load_spec(write_spec(tmp_path, auto)))
    tuner = Tuner(plan, tmp_path / "results", BACKENDS["inline"](plan.spec), 1)
    config = Config(num_workers=1, persistent_workers=True)
    profiled = tuner.variant(config, rungs=("full",), repeats=2, profile=True).measure
    confirmed = tuner.variant(config, rungs=("full",), repeats=3).measure
    assert (profiled.steps, profiled.seconds, profiled.max_seconds) == (40, 1.0, 5.0)
    assert (confirmed.steps, confirmed.seconds, confirmed.max_seconds) == (40, 4, 20)
    assert profiled.auto_window and confirmed.auto_window
    # No most given: the default 30 s, a quarter of it.
    plain = expand(load_spec(write_spec(tmp_path, SPEC.replace("steps: 20,", "steps: auto,"))))
    measure = profile_measure(plain.points[0].measure)
    assert (measure.seconds, measure.max_seconds) == (0.5, 7.5)
    timed = expand(load_spec(write_spec(tmp_path, SPEC.replace("steps: 20,", "steps: 200, seconds: 8,"))))
    measure = profile_measure(timed.points[0].measure)
    assert (measure.steps, measure.seconds, measure.max_seconds) == (50, 2.0, None)
    assert profile_measure(replace(measure, steps=200, seconds=8, max_seconds=8)).max_seconds == 2.0


def test_a_profile_window_stopped_at_its_most_names_the_profiles_limit_and_where_it_came_from(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A profile point's auto window runs a quarter of the spec's measure.max_seconds (here 1 s
    of 4): the point's adjustments say so, and when a noisy loader keeps the window going to
    that most, the loop's line names 1 s as the profile's quarter of the spec's 4 s, not as
    the user's measure.max_seconds. A confirmation point keeps the spec's most and the line
    as it was."""
    auto = SPEC.replace("steps: 20, repeats: 1", "steps: auto, seconds: 0.2, max_seconds: 4, repeats: 1")
    plan = expand(load_spec(write_spec(tmp_path, auto)))
    tuner = Tuner(plan, tmp_path / "results", BACKENDS["inline"](plan.spec), 1)
    config = Config(num_workers=1, persistent_workers=True)
    profiled = tuner.variant(config, rungs=("full",), repeats=2, profile=True)
    confirmed = tuner.variant(config, rungs=("full",), repeats=3)
    said = "measure.max_seconds 1 s in harness tune's profile: a quarter of the spec's 4 s"
    assert profiled.adjustments == (f"{said} (harness/tune/rounds.profile_measure)",)
    assert most_said(confirmed.adjustments) is None
    draw = random.Random(3)  # one batch in 5 costs 60 ms, the others 1 ms: blocks scatter by ~30 %
    with caplog.at_level("WARNING", logger="harness.execution.loop"):
        times = timed_loop(
            _Noisy(lambda: 0.06 if draw.random() < 0.2 else 0.001),
            lambda batch: time.sleep(0.002),
            warmup_steps=2,
            steps=40,
            seconds=profiled.measure.seconds,
            max_seconds=profiled.measure.max_seconds,
            max_seconds_said=most_said(profiled.adjustments),
            sync=lambda: None,
        )
    assert times.capped == caplog.messages[-1]
    assert times.capped == (
        f"the auto window stopped at its most, {said} (harness/tune/rounds.profile_measure), after "
        f"{times.steps} steps, with its step rate's relative standard error at {times.window_rse:.1%}, "
        "above the 2% it aims for: the rate varies between blocks of the window (a noisy loader or a "
        "busy machine); raise measure.max_seconds, or compare with more repeats"
    )
    assert "measure.max_seconds (1 s" not in times.capped


class _Noisy:
    """A loader whose batches each take `cost()` seconds (a sleep)."""

    epoch = 0

    def __init__(self, cost: Callable[[], float]) -> None:
        self.cost = cost

    def next(self) -> torch.Tensor:
        time.sleep(self.cost())
        return torch.zeros(4, 1)

    def close(self) -> None:
        pass
