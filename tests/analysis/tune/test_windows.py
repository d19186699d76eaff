"""The profile over repeated windows (analysis/tune/windows.py): a shared machine's slow
window outvoted, the intervals, and the predictions that carry them. The windows come from
tests/fixtures/tune_sim.py's DataLoader simulation of known costs."""

from __future__ import annotations

import dataclasses

import pytest

from analysis.tune.model import Config, Profile, predict, worker_rate
from analysis.tune.windows import agree, figure, fit_windows, passes_agree, plateau_windows, with_intervals
from tests.fixtures.tune_sim import Bench, Pipeline

# The machine: a 28 ms step, one window of three read 40 % slow beside other work.
PIPE = Pipeline(read_s=0.100, cpu_s=0.004, step_s=0.028, cores=4)


def test_one_slow_window_of_three_does_not_move_the_figure() -> None:
    step = figure([28.1, 40.7, 27.9])
    assert step.value == 28.1
    assert step.n == 3
    # noise.outliers flags the slow window: the interval is the two that agree.
    assert (step.low, step.high) == (27.9, 28.1)


def test_windows_that_disagree_get_a_wide_interval() -> None:
    spread = figure([26.0, 28.0, 30.0, 32.0])
    assert spread.low < 26.5 and spread.high > 31.5  # noise.location's 95 % interval


def test_a_third_window_is_wanted_only_where_two_differ_by_more_than_twice_the_margin() -> None:
    # The median of three lies between the first two: it moves at most half their gap.
    assert agree([100.0, 109.0])
    assert not agree([100.0, 140.0])
    assert agree([100.0])


def test_the_windowed_fit_outvotes_a_slow_pass_that_fools_a_single_window() -> None:
    bench = Bench(PIPE, seed=3, profile_steps=200)  # the spec's whole window, as it was written for
    passes = [bench.profile_figures(slow=slow) for slow in (1.0, 1.4, 1.0)]
    fitted = fit_windows([z for z, _ in passes], [s for _, s in passes], workers=1, batch_size=8)
    assert fitted.windows == 3
    assert fitted.step_s == pytest.approx(PIPE.step_s, rel=0.03)
    assert worker_rate(fitted) == pytest.approx(1 / (PIPE.read_s + PIPE.cpu_s), rel=0.05)
    _, high = fitted.intervals["step_s"]
    assert high < 1.2 * PIPE.step_s  # the slow pass is set aside, not averaged in
    alone = fit_windows([passes[1][0]], [passes[1][1]], workers=1, batch_size=8)
    assert alone.step_s > 1.3 * PIPE.step_s  # what one window of the slow pass says


def test_the_plateaus_windows_give_the_hand_off_an_interval() -> None:
    p = Profile(batch_size=8, step_s=0.020, main_load_s=0.040, cpu_s_per_batch=0.0, cores=8.0)
    top = Config(num_workers=8, prefetch_factor=2)
    # Three windows at 40, 40 and 28 batches/s: a 25 ms period, 5 ms of hand-off; the slow
    # window is set aside.
    handed = plateau_windows(p, top, [40.0, 40.0, 28.0])
    assert handed.handoff_s == pytest.approx(0.005)
    assert handed.intervals["handoff_s"] == pytest.approx((0.005, 0.005))


def test_predictions_carry_the_profiles_interval() -> None:
    p = Profile(batch_size=8, step_s=0.020, main_load_s=0.040, cpu_s_per_batch=0.0, cores=8.0)
    grid = [Config(num_workers=n, prefetch_factor=2 if n else None) for n in (0, 1, 4)]
    plain = with_intervals(p, predict(p, grid))
    assert all(x.low == x.samples_per_s == x.high for x in plain)
    uncertain = dataclasses.replace(p, intervals={"step_s": (0.018, 0.025)})
    step_bound = with_intervals(uncertain, predict(uncertain, grid))[2]  # 4 workers: the step bounds
    assert step_bound.low == pytest.approx(8 / 0.025)
    assert step_bound.high == pytest.approx(8 / 0.018)
    assert step_bound.low < step_bound.samples_per_s < step_bound.high


def test_a_window_whose_p99_missed_the_rare_stalls_does_not_halve_them() -> None:
    """A reader stalling 200 ms on 2 % of batches: a window of 200 steps whose p99 wait
    caught no stall reads "no stall" though its mean holds them. The length comes from the
    windows that saw one, each window's share from its mean's excess over its p50."""
    p = Pipeline(read_s=0.040, cpu_s=0.015, step_s=0.008, cores=16, stall_p=0.02, stall_s=0.2)
    bench = Bench(p, seed=5, profile_steps=200)
    bench.profile_figures()  # its first window holds no stall
    zero, some = bench.profile_figures()  # this seed's second window holds 4 stalls
    missed = {**zero, "loading_time_p99": zero["loading_time_p50"]}
    fitted = fit_windows([zero, missed], [some, some], workers=1, batch_size=8)
    assert fitted.stall_s == pytest.approx(0.2, rel=0.1)
    assert fitted.stall_share == pytest.approx(0.02, abs=0.012)


def _zero(stalls: int) -> dict[str, float]:
    """A 50-step num_workers=0 window of a reader that loads in 25 ms and stalls 300 ms on
    `stalls` of its batches, under a 20 ms step."""
    wait = 0.025 + stalls * 0.3 / 50
    return {
        "loading_time": wait,
        "loading_time_p50": 0.025,
        "loading_time_p99": 0.325 if stalls else 0.025,
        "steps_per_s": 1 / (0.020 + wait),
        "bound_steps_per_s": 50.0,
    }


def _one_worker(stalls: int, capacity_stalls: int, **extra: float) -> dict[str, float]:
    """The same reader's 50-step window at one worker: slower than the step, so each step
    waits 5 ms for it (its median step is the worker's 25 ms) and a stall adds 300 ms to one
    wait; its capacity window, timed alone, held `capacity_stalls` stalls of its own."""
    wait = 0.005 + stalls * 0.3 / 50
    return {
        "loading_time": wait,
        "loading_time_p50": 0.005,
        "loading_time_p99": 0.305 if stalls else 0.005,
        "step_time_median": 0.025,
        "steps_per_s": 1 / (0.020 + wait),
        "loader_capacity": 1 / (0.025 + capacity_stalls * 0.3 / 50),
        "bound_steps_per_s": 50.0,
        **extra,
    }


def test_the_load_and_the_workers_rate_do_not_move_with_a_windows_own_count_of_stalls() -> None:
    """Two passes whose windows caught 1 and 3 stalls at num_workers=0, 2 and 0 at one worker,
    and 4 and 0 in its capacity windows: the same reader throughout. The windows' mean loads
    (31 and 43 ms) and capacities (20.4 and 40 batches/s) disagree by far more than the margin,
    so a third pass was asked for and the worker's rate came out at 22 batches/s. Stall-free,
    every pass reads a 25 ms load and a 25 ms worker; the stalls pooled over the four windows
    (6 of 200 steps: 3 %) add 0.03 × 300 = 9 ms to both: 34 ms, a worker at 29.4 batches/s,
    and the passes agree."""
    zeros, somes = [_zero(1), _zero(3)], [_one_worker(2, 4), _one_worker(0, 0)]
    fitted = fit_windows(zeros, somes, workers=1, batch_size=8)
    assert fitted.stall_s == pytest.approx(0.3)
    assert fitted.stall_share == pytest.approx(0.03)
    assert fitted.main_load_s == pytest.approx(0.034)
    assert worker_rate(fitted) == pytest.approx(1 / 0.034)
    assert fitted.intervals["main_load_s"] == pytest.approx((0.034, 0.034))
    assert passes_agree(zeros, somes, workers=1, batch_size=8)


def test_the_worker_windows_count_the_stalls_the_num_workers_0_windows_missed() -> None:
    """Two num_workers=0 windows without a stall (a reader stalling 2 % of its reads leaves
    two 50-step windows without one a time in eight) and a one-worker window with two: the
    stall's length is that window's tail, 300 ms, and its share is pooled over the four
    windows (2 of 200 steps). The same window having crossed an epoch's end holds the workers'
    restart among its waits: it counts nothing."""
    zeros = [_zero(0), _zero(0)]
    fitted = fit_windows(zeros, [_one_worker(2, 0), _one_worker(0, 0)], workers=1, batch_size=8)
    assert fitted.stall_s == pytest.approx(0.3)
    assert fitted.stall_share == pytest.approx(0.01)
    restarted = [_one_worker(2, 0, epoch_restarts=1.0), _one_worker(0, 0, epoch_restarts=1.0)]
    assert fit_windows(zeros, restarted, workers=1, batch_size=8).stall_s == 0.0
