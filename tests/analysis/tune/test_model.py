"""The pipeline model of `harness tune`, on synthetic profiles whose answers are computed by hand
(each expected figure is worked out in the comment beside it, not by the model's code)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from analysis.tune import delivery
from analysis.tune.fit import with_copy_mode, with_plateau
from analysis.tune.model import (
    Config,
    Profile,
    batches_per_s,
    bound_of,
    cheapest_meeting,
    lightning_workers,
    predict,
    prefetch_needed,
    queue_period,
    samples_per_s,
    what_if,
    with_cache,
)
from tests.fixtures.tune_sim import Pipeline, true_rate


def profile(**kw: object) -> Profile:
    base: dict[str, object] = dict(
        batch_size=8, step_s=0.02, main_load_s=0.04, cpu_s_per_batch=0.01, cores=2.0
    )
    return Profile(**{**base, **kw})  # type: ignore[arg-type]


def w(n: int, prefetch: int = 2, persistent: bool = False) -> Config:
    return Config(num_workers=n, prefetch_factor=prefetch if n else None, persistent_workers=persistent)


def test_main_thread_case_is_the_step_and_the_load_in_series() -> None:
    # 20 ms step + 40 ms load = 60 ms a batch: 16.67 batches/s, 133.3 samples/s of 8.
    assert batches_per_s(profile(), w(0)) == pytest.approx(1 / 0.06)
    assert samples_per_s(profile(), w(0)) == pytest.approx(8 / 0.06)
    assert bound_of(profile(), w(0)) == "series"


def test_workers_add_capacity_until_the_step_caps_it() -> None:
    p = profile()
    # One worker: 25 batches/s (1 / 40 ms), under the demand of 50: the loader bounds.
    assert batches_per_s(p, w(1)) == pytest.approx(25)
    assert bound_of(p, w(1)) == "workers"
    # Two: 50 batches/s, the demand exactly; three: 75 of capacity, 50 delivered.
    assert batches_per_s(p, w(2)) == pytest.approx(50)
    assert batches_per_s(p, w(3)) == pytest.approx(50)
    assert bound_of(p, w(3)) == "step"
    # Two workers meet the demand: the cheapest within 5 % of the best.
    assert cheapest_meeting(predict(p, [w(0), w(1), w(2), w(3), w(4)])).config == w(2)


def test_efficiency_scales_each_worker() -> None:
    # 0.8 of the main thread's rate: 20 batches/s a worker; three give 60 > 50 demand.
    p = profile(efficiency=0.8)
    assert batches_per_s(p, w(2)) == pytest.approx(40)
    assert batches_per_s(p, w(3)) == pytest.approx(50)
    assert cheapest_meeting(predict(p, [w(n) for n in range(5)])).config == w(3)


def test_cores_cap_a_cpu_bound_loader() -> None:
    # All of the 40 ms is CPU; 2 cores: at most 2 / 0.04 = 50 batches/s whatever the workers.
    # A 10 ms step asks for 100: four workers (100 of worker rate) still deliver 50.
    p = profile(step_s=0.01, cpu_s_per_batch=0.04)
    assert batches_per_s(p, w(4)) == pytest.approx(50)
    assert bound_of(p, w(4)) == "cores"
    assert cheapest_meeting(predict(p, [w(n) for n in range(7)])).config == w(2)


def test_a_reader_that_sleeps_scales_past_the_cores() -> None:
    # Reads that sleep use no core (cpu 1 ms a batch): eight workers on 2 cores deliver
    # 8 × 25 = 200 batches/s, under a 5 ms step's demand of 200 exactly.
    p = profile(step_s=0.005, cpu_s_per_batch=0.001)
    assert batches_per_s(p, w(8)) == pytest.approx(200)


def simulated(pipe: Pipeline, c: Config) -> float:
    """The truth: batches/s of tests/fixtures/tune_sim.py's event simulation of the DataLoader
    (long noiseless runs, each its own draw of the stalls), not the model's recurrence."""
    return true_rate(replace(pipe, batch_size=1, noise=0.0), c)


def test_prefetch_absorbs_stalls_once_the_lead_covers_them() -> None:
    # Reads of 30 ms, of which 10 % stall 100 ms more (a mean load of 40 ms), no CPU; a
    # 20 ms step (50 batches/s). Four workers deliver 100 batches/s on average, yet a stalled
    # batch with prefetch 1 arrives after its 80 ms of lead (4 × 1 × 20 ms) and the step,
    # which takes batches in order, waits for it: the simulated loader gives 41.7 batches/s.
    p = profile(stall_s=0.1, stall_share=0.1, cpu_s_per_batch=0.0)
    pipe = Pipeline(read_s=0.03, cpu_s=0.0, step_s=0.02, cores=4, stall_p=0.1, stall_s=0.1)
    for prefetch in (1, 2, 4):
        truth = simulated(pipe, w(4, prefetch, persistent=True))
        assert batches_per_s(p, w(4, prefetch, persistent=True)) == pytest.approx(truth, rel=0.02)
    assert batches_per_s(p, w(4, prefetch=1)) < 0.9 * 50
    assert bound_of(p, w(4, prefetch=1)) == "stalls"
    # Prefetch 4: 320 ms of lead, a second stall right behind the first included: the step's 50.
    assert batches_per_s(p, w(4, prefetch=4)) == pytest.approx(50)
    assert bound_of(p, w(4, prefetch=4)) == "step"
    assert prefetch_needed(p, 4) == 2  # ceil((30 + 100) / 80)
    assert prefetch_needed(p, 8) == 1  # ceil(130 / 160)
    with pytest.raises(ValueError, match="num_workers=0 has no prefetch"):
        prefetch_needed(p, 0)


def test_a_second_stall_queued_behind_the_first_on_its_worker_makes_the_step_wait() -> None:
    # The erratic reader of benchmarks/tune_truth.py: 25 ms a batch, 5 % of batches stall
    # 300 ms (a mean of 40 ms), a 20 ms step, 4 workers, prefetch 4: a lead of 320 ms. The
    # stalled batch alone is 5 ms late (25 + 300 − 320); a second stall among the 3 batches
    # queued behind it on its worker is 135-245 ms late. The simulated loader: 46.2 batches/s,
    # more than the 5 % margin under the step's 50 (the first stall alone would say 49.4).
    p = profile(stall_s=0.3, stall_share=0.05, cpu_s_per_batch=0.005, cores=8.0)
    pipe = Pipeline(read_s=0.020, cpu_s=0.005, step_s=0.020, cores=8, stall_p=0.05, stall_s=0.300)
    for n, prefetch in ((4, 4), (4, 8), (6, 4), (8, 2), (2, 8)):
        truth = simulated(pipe, w(n, prefetch, persistent=True))
        assert batches_per_s(p, w(n, prefetch, persistent=True)) == pytest.approx(truth, rel=0.02)
    assert batches_per_s(p, w(4, prefetch=4)) < 0.95 * 50
    assert bound_of(p, w(4, prefetch=4)) == "stalls"


def test_workers_that_only_just_meet_the_step_queue_behind_a_late_batch() -> None:
    # The 193-point grid of benchmarks/tune_truth.py: reads of 40 ms and 15 ms of CPU a
    # batch, 2 % of reads stalling 200 ms (a mean of 59 ms), an 8 ms step (125 batches/s).
    # Seven workers deliver 7 / 59 ms = 118.6 batches/s on average, 95 % of the step; but
    # while the step waits for a stalled batch (in order) the other workers fill their
    # `prefetch` slots and sit idle, so the simulated loader gives 89 % of the step with
    # prefetch 6, not the 95 % the mean rate says; eight workers with prefetch 4, 95 %.
    p = profile(
        step_s=0.008, main_load_s=0.059, cpu_s_per_batch=0.015, cores=15.95, stall_s=0.2, stall_share=0.02
    )
    pipe = Pipeline(read_s=0.040, cpu_s=0.015, step_s=0.008, cores=16, stall_p=0.02, stall_s=0.2)
    for n, prefetch in ((6, 6), (7, 2), (7, 4), (7, 6), (7, 8), (8, 4), (8, 6), (9, 4), (10, 3)):
        truth = simulated(pipe, w(n, prefetch, persistent=True))
        assert batches_per_s(p, w(n, prefetch, persistent=True)) == pytest.approx(truth, rel=0.025)
    assert batches_per_s(p, w(7, prefetch=6, persistent=True)) < 0.92 * 125
    assert bound_of(p, w(7, prefetch=6)) == "workers"
    # The cheapest within 5 % of the best is not 7 workers (the mean rate's answer).
    grid = [w(n, f, persistent=True) for n in range(17) for f in (1, 2, 3, 4, 6, 8)]
    assert cheapest_meeting(predict(p, grid)).config.num_workers >= 8


def test_a_single_worker_slower_than_the_step_delivers_at_its_own_rate() -> None:
    # One worker slower than the step is never idle (its next batch is dealt as soon as the
    # step takes one), so the loader's mean rate is the answer whatever the prefetch: no
    # queueing term may take from it (the Kingman term tried in session 11 predicted 18
    # batches/s for a worker of 40 ms under a 20 ms step, whose truth is 25).
    for prefetch in (1, 2, 8):
        assert batches_per_s(profile(), w(1, prefetch)) == pytest.approx(25)
        assert batches_per_s(profile(), w(1, prefetch)) == pytest.approx(
            simulated(Pipeline(read_s=0.03, cpu_s=0.01, step_s=0.02, cores=2), w(1, prefetch)), rel=0.01
        )
    # With stalls: 55 ms on average (35 ms reads and 5 ms of CPU, 5 % of reads stalling
    # 300 ms more): 18.2 batches/s, as simulated.
    p = profile(main_load_s=0.055, cpu_s_per_batch=0.005, stall_s=0.3, stall_share=0.05)
    pipe = Pipeline(read_s=0.035, cpu_s=0.005, step_s=0.020, cores=2, stall_p=0.05, stall_s=0.3)
    for prefetch in (1, 2, 8):
        truth = simulated(pipe, w(1, prefetch, persistent=True))
        assert batches_per_s(p, w(1, prefetch, persistent=True)) == pytest.approx(1 / 0.055)
        assert batches_per_s(p, w(1, prefetch, persistent=True)) == pytest.approx(truth, rel=0.02)
    # Two workers (36 batches/s on average, under the step) and three (55, just over it) lose
    # a little to stalls: as simulated.
    for n in (2, 3):
        assert batches_per_s(p, w(n, persistent=True)) == pytest.approx(
            simulated(pipe, w(n, persistent=True)), rel=0.02
        )


def test_the_recurrence_is_deterministic_and_smooth_in_the_stall_share() -> None:
    # The same stalls for every configuration and every call (a fixed draw): a prediction asked
    # twice is the same figure, and a share a little higher never predicts more.
    p = profile(
        step_s=0.008, main_load_s=0.059, cpu_s_per_batch=0.015, cores=15.95, stall_s=0.2, stall_share=0.02
    )
    first = queue_period(p, 8, 4)
    delivery.family.cache_clear()  # computed afresh, not read back
    assert queue_period(p, 8, 4) == first
    shares = [0.015 + 0.001 * k for k in range(11)]
    rates = [batches_per_s(replace(p, stall_share=q), w(8, 4, persistent=True)) for q in shares]
    assert rates == sorted(rates, reverse=True)
    with pytest.raises(ValueError, match=r"queue_period: needs workers >= 1 and prefetch >= 1 \(got 0, 2\)"):
        queue_period(p, 0, 2)


def test_epoch_restarts_cost_what_persistent_workers_save() -> None:
    # 50 ms to restart the workers once per 10-batch epoch: 5 ms a batch: 25 ms, 40 batches/s.
    p = profile(restart_s=0.05, epoch_steps=10)
    assert batches_per_s(p, w(2)) == pytest.approx(40)
    assert batches_per_s(p, w(2, persistent=True)) == pytest.approx(50)


def test_memory_grows_by_a_share_per_worker() -> None:
    p = profile(memory_gb=1.0, memory_per_worker_gb=0.25)
    assert predict(p, [w(4)])[0].memory_gb == pytest.approx(2.0)


def test_the_plateau_run_gives_the_hand_off_each_batch_costs_the_step() -> None:
    # A 20 ms step; 4 workers deliver 100 batches/s, far above the step's 50. A run at 4
    # workers measured 40 batches/s: 25 ms a batch, so the hand-off is 5 ms, and every
    # configuration on the step's side now plateaus at 40, not 50.
    p = profile()
    assert batches_per_s(p, w(4)) == pytest.approx(50)
    calibrated = with_plateau(p, w(4), 40.0)
    assert calibrated.handoff_s == pytest.approx(0.005)
    assert batches_per_s(calibrated, w(4)) == pytest.approx(40)
    assert batches_per_s(calibrated, w(8)) == pytest.approx(40)
    assert batches_per_s(calibrated, w(0)) == pytest.approx(batches_per_s(p, w(0)))  # no hand-off in series
    assert with_plateau(calibrated, w(4), 40.0).handoff_s == pytest.approx(0.005)  # the same run again
    # A run the model puts on the loader's side (1 worker: 25 batches/s) says nothing of it.
    assert with_plateau(p, w(1), 20.0) == p
    assert with_plateau(p, w(4), 60.0).handoff_s == 0.0  # faster than the step: no negative cost
    # 49 batches/s: 0.4 ms over the step, 2 % of it, inside the ±5 % margin: noise to one run.
    assert with_plateau(p, w(4), 49.0).handoff_s == 0.0


def pinned(c: Config, non_blocking: bool = False) -> Config:
    return replace(c, pin_memory=True, non_blocking=non_blocking)


def test_each_copy_mode_has_its_own_step_and_hand_off() -> None:
    # The profile's mode (pageable): a 20 ms step with its copy. The pinned mode's bound rung
    # ran at 0.8 of the pageable one's period: a 16 ms step. Its plateau run at 4 workers
    # measured 50 batches/s: 20 ms a batch, so a 4 ms hand-off (the pin thread's share).
    p = profile()
    both = with_copy_mode(p, pinned(w(4)), 0.8, pinned(w(4)), 50.0)
    assert both.copy_modes["pin_memory=true non_blocking=false"] == pytest.approx((0.016, 0.004))
    # The pageable mode is untouched: 50 batches/s on the step's side, 1 / (20 + 40 ms) alone.
    assert batches_per_s(both, w(4)) == pytest.approx(50)
    assert batches_per_s(both, w(0)) == pytest.approx(1 / 0.06)
    # Pinned: 1 / (16 + 4 ms) on the step's side; the loader's side is shared (1 worker: 25).
    assert batches_per_s(both, pinned(w(4))) == pytest.approx(50)
    assert batches_per_s(both, pinned(w(1))) == pytest.approx(25)
    assert batches_per_s(both, pinned(w(0))) == pytest.approx(1 / 0.056)  # no hand-off in series
    assert bound_of(both, pinned(w(4))) == "step"
    # A plateau as fast as the step: no hand-off; pinned is then 1 / 16 ms = 62.5 batches/s.
    faster = with_copy_mode(p, pinned(w(4)), 0.8, pinned(w(4)), 62.5)
    assert batches_per_s(faster, pinned(w(4))) == pytest.approx(62.5)
    # A mode the profile never measured is predicted as the profile's own.
    assert batches_per_s(both, pinned(w(4), non_blocking=True)) == pytest.approx(50)
    # The modes travel through tune.json.
    assert Profile.from_json(both.to_json()) == both
    with pytest.raises(ValueError, match="the bound rungs' ratio must be > 0"):
        with_copy_mode(p, pinned(w(4)), 0.0)


def test_a_cached_stage_loads_at_its_rungs_capacity_without_stalls() -> None:
    # The profile's worker loads a batch in 40 ms (25 batches/s), stalls included; the raw
    # samples cached, one worker's loader reached 200 batches/s on 4 core-ms a batch. So a
    # worker loads a batch in 5 ms, num_workers=0 runs at 1 / (20 + 5 ms) = 40 batches/s,
    # and one worker meets the 20 ms step: 50 batches/s.
    p = profile(stall_s=0.2, stall_share=0.05)
    cached = with_cache(p, 200.0, 0.004)
    assert cached.main_load_s == pytest.approx(0.005)
    assert (cached.stall_s, cached.stall_share) == (0.0, 0.0)
    assert batches_per_s(cached, w(0)) == pytest.approx(40)
    assert batches_per_s(cached, w(1)) == pytest.approx(50)
    assert bound_of(cached, w(1)) == "step"
    assert batches_per_s(p, w(1)) == pytest.approx(25)  # without: one worker's 25
    with pytest.raises(ValueError, match="the cached rung's capacity must be > 0"):
        with_cache(p, 0.0, 0.004)


def test_copy_settings_are_named_only_when_set() -> None:
    assert w(2).text() == "num_workers=2 prefetch_factor=2 persistent_workers=false"
    assert pinned(w(2), True).text() == (
        "num_workers=2 prefetch_factor=2 persistent_workers=false pin_memory=true non_blocking=true"
    )
    assert pinned(w(0)).text() == "num_workers=0 pin_memory=true"
    assert Config.of({"num_workers": 2, "prefetch_factor": 2, "pin_memory": True}) == pinned(w(2))
    # Pageable before pinned among configurations alike otherwise.
    assert w(2).cost() < pinned(w(2)).cost() < pinned(w(2), True).cost() < w(3).cost()


def test_a_profile_refuses_a_zero_step() -> None:
    with pytest.raises(ValueError, match=r"profile: step_s must be > 0 \(got 0\)"):
        profile(step_s=0)


def test_what_if_gives_each_rank_its_share_of_the_node() -> None:
    # All CPU, 40 ms a batch, a 5 ms step (demand 200 batches/s a rank). 8 GPUs on 64 cores:
    # 8 cores a rank, less 0.5 the main process keeps: a roof of 7.5 / 0.04 = 187.5 batches/s,
    # reached at 8 workers (8 × 25 = 200 > 187.5); 7 workers give 175, 6.7 % below: not within 5 %.
    p = profile(step_s=0.005, cpu_s_per_batch=0.04)
    node = what_if(p, gpus=8, cores=64, main_cores=0.5)
    assert node.cores == pytest.approx(7.5)
    assert node.ranks == 8
    assert samples_per_s(node, w(8)) == pytest.approx(187.5 * 8 * 8)
    assert cheapest_meeting(predict(node, [w(n) for n in range(13)])).config == w(8)
    assert lightning_workers(64, 8) == 7
    with pytest.raises(ValueError, match="gpus and cores must be >= 1"):
        what_if(p, gpus=0, cores=64)


def test_config_of_settings_drops_worker_settings_without_workers() -> None:
    zero = Config.of({"num_workers": 0, "prefetch_factor": None, "persistent_workers": False})
    assert zero == Config(num_workers=0, prefetch_factor=None)
    assert zero.text() == "num_workers=0"
    four = Config.of({"num_workers": 4, "prefetch_factor": 3, "persistent_workers": True})
    assert four.text() == "num_workers=4 prefetch_factor=3 persistent_workers=true"
    assert four.cost() > Config(num_workers=4, prefetch_factor=3).cost()
