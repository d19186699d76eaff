"""What `harness tune` prints, from a tune.json made by hand (figures chosen so that each
printed number can be checked by eye)."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from typing import Any

from analysis.tune.model import Config, Profile, predict
from analysis.tune.report import render, render_what_if


def w(n: int) -> Config:
    return Config(num_workers=n, prefetch_factor=2 if n else None)


# 40 ms of reading a batch (no CPU to speak of), a 20 ms step: 0, 1, 2, 3 workers give
# 133.3, 200, 400, 400 samples/s of 8.
PROFILE = Profile(batch_size=8, step_s=0.02, main_load_s=0.04, cpu_s_per_batch=0.001, cores=2.0)


def summary(**kw: Any) -> dict[str, Any]:
    grid = [w(0), w(1), w(2), w(3)]
    out = {
        "spec": "demo",
        "grid_points": 4,
        "profile": PROFILE.to_json(),
        "repeats": 3,
        "predictions": [
            {**asdict(x.config), "samples_per_s": x.samples_per_s, "memory_gb": 0.0, "bound": x.bound}
            for x in predict(PROFILE, grid)
        ],
        "model_choice": asdict(w(2)),
        # Measured 10 % under the prediction at 1 worker and on the mark at 2 and 3.
        "measured": [
            {**asdict(c), "runs": r}
            for c, r in ((w(1), [180.0] * 3), (w(2), [400.0] * 3), (w(3), [400.0] * 3))
        ],
        "best": asdict(w(2)),
        "answer": asdict(w(2)),
        "verdicts": [{**asdict(w(1)), "verdict": "lower"}, {**asdict(w(2)), "verdict": "within"}],
        "undecided": [],
        "point_runs": {"tune": 13, "exhaustive": 12},
        "device_seconds": {"tune": 50.0, "exhaustive_estimate": 40.0},
        "budget_spent": False,
    }
    return {**out, **kw}


def test_render_states_the_answer_the_error_and_the_cost() -> None:
    text = render(summary())
    assert (
        "recommendation: num_workers=2 prefetch_factor=2 persistent_workers=false: 400.0 samples/s measured (the best itself)"
        in text
    )
    assert "the model's choice, confirmed" in text
    assert "model error: median 0.0% on the 3 point(s) measured" in text  # 11.1 %, 0, 0
    assert "cost: 13 point-runs against 12 for the exhaustive grid (108%; 3 runs a point)" in text
    assert "50 device-seconds against about 40 (125%" in text
    assert "with 1 device(s) a point: 0.014 device-hours against about 0.011" in text
    assert "step 20.0 ms a batch (demand 50.0 batches/s a rank)" in text


def test_the_cost_counts_every_rank_of_a_point_in_device_hours() -> None:
    eight = summary(profile=dataclasses.replace(PROFILE, ranks=8).to_json())
    eight["device_seconds"] = {"tune": 900.0, "exhaustive_estimate": 3600.0}
    assert "with 8 device(s) a point: 2.000 device-hours against about 8.000" in render(eight)


def test_render_says_when_the_measurements_corrected_the_model() -> None:
    text = render(summary(model_choice=asdict(w(1)), budget_spent=True))
    assert (
        "the model chose num_workers=1 prefetch_factor=2 persistent_workers=false; the measurements corrected it"
        in text
    )
    assert "the budget ran out before the answer's neighbourhood was measured: a provisional answer" in text


def test_what_if_sizes_the_workers_of_another_node() -> None:
    # 8 GPUs on 32 cores: 4 cores a rank; reads that sleep scale past them: 2 workers meet
    # the 20 ms step (400 samples/s a rank, 3200 on the node); Lightning says 3.
    text = render_what_if(summary(), gpus=8, cores=32)
    assert "what if: 8 GPU(s) and 32 cores: 4 cores a rank" in text
    assert (
        "predicted: num_workers=2 per rank (prefetch_factor=1), 3200 samples/s on the node; --cpus-per-task=4"
        in text
    )
    assert "Lightning's suggestion (cpus // ranks - 1): num_workers=3, 3200 samples/s predicted" in text


def test_render_says_when_the_models_choice_is_left_undecided() -> None:
    verdicts = [{**asdict(w(1)), "verdict": "undecided"}, {**asdict(w(2)), "verdict": "within"}]
    text = render(summary(model_choice=asdict(w(1)), verdicts=verdicts))
    assert (
        "the model chose num_workers=1 prefetch_factor=2 persistent_workers=false; its runs leave it "
        "undecided against the best (below), so the best stands"
    ) in text


def test_the_model_lines_and_the_what_if_name_each_copy_mode() -> None:
    # Pinned: a 10 ms step (the copy is cheaper) and a 2 ms hand-off: 12 ms a batch on the
    # step's side. The answer is pinned, so the what-if sizes the node in that mode: 2 workers
    # deliver 50 batches/s a rank (40 ms reads), short of 1 / 12 ms; 4 meet it: 83.3 batches/s,
    # 667 samples/s a rank, 5333 on 8 ranks.
    pin = Config(num_workers=2, prefetch_factor=2, pin_memory=True)
    profile = dataclasses.replace(PROFILE, copy_modes={pin.copy_mode(): (0.010, 0.002)})
    text = render(summary(profile=profile.to_json()))
    assert (
        "copy: pin_memory=true non_blocking=false: step 10.0 ms a batch, hand-off 2.0 ms "
        "(against 20.0 and 0.0 with pin_memory=false non_blocking=false)"
    ) in text
    what_if = render_what_if(summary(profile=profile.to_json(), answer=asdict(pin)), gpus=8, cores=32)
    assert "predicted: num_workers=4 per rank (prefetch_factor=1), 5333 samples/s on the node" in what_if


def test_the_caching_what_if_sizes_the_cache_and_names_the_cheapest_configuration() -> None:
    # The raw samples cached: 50,000 samples of 12 kB = 600 MB against a 16 GB job (80 %:
    # 12.8 GB) with 2 GB held: it fits; the model predicts num_workers=1 at 400 samples/s.
    # The processed samples (after RandomCrop, the first of 2 transforms) would replay its draw.
    entry = {
        "capacity": 200.0,
        "choice": asdict(w(1)),
        "samples_per_s": 400.0,
        "memory_gb": 2.0,
        "sample_bytes": 12_000.0,
        "samples": 50_000.0,
        "limit_gb": 16.0,
        "transform_names": ["RandomCrop", "Normalize"],
    }
    text = render(
        summary(
            caching=[{**entry, "rung": "raw_sample"}, {**entry, "rung": "processed_sample", "limit_gb": None}]
        )
    )
    assert (
        "what if: caching the raw samples (decoded, before the transforms), as raw_sample measured it "
        "(200.0 batches/s from 1 worker(s)): the model predicts num_workers=1 prefetch_factor=2 "
        "persistent_workers=false at 400.0 samples/s from the second epoch on (the recommendation "
        "measured 400.0); the cache: 50,000 samples × 12.0 kB = 600.0 MB; fits in 80% of the job's "
        "16.0 GB with the 2.0 GB the ranks hold there\n"
    ) in text
    assert (
        "the cache: 50,000 samples × 12.0 kB = 600.0 MB; the job's memory limit is not known; the cache "
        "would replay the draw of RandomCrop every epoch"
    ) in text
    assert "what if" not in render(summary())  # no cached rung profiled: no line


def test_render_says_when_nothing_was_measured_to_confirm_the_choice() -> None:
    text = render(
        summary(measured=[], verdicts=[], budget_spent=True, point_runs={"tune": 5, "exhaustive": 12})
    )
    assert (
        "unconfirmed: the model's choice, num_workers=2 prefetch_factor=2 persistent_workers=false: 400.0 "
        "samples/s predicted, nothing measured (the budget allowed no confirmation: 3 runs of a "
        "configuration are the least the judgement takes)"
    ) in text
    assert "recommendation:" not in text
    assert "cost: 5 point-runs against 12 for the exhaustive grid" in text


def test_a_profile_taken_on_a_shared_machine_is_named_with_its_share() -> None:
    windowed = dataclasses.replace(PROFILE, windows=3, intervals={"step_s": (0.019, 0.021)})
    text = render(
        summary(profile=windowed.to_json(), profile_shared={"mean": 0.35, "max": 0.6, "windows": 9})
    )
    assert (
        "the machine was shared while tune profiled: other processes used 35% of its CPU during the "
        "profile's windows (up to 60% in one); the model takes each figure as the median of 3 windows"
    ) in text
    assert "step 20.0 ms a batch (95 % CI 19.0-21.0 ms, 3 windows)" in text
    quiet = render(summary(profile_shared={"mean": 0.02, "max": 0.05, "windows": 9}))
    assert "shared" not in quiet
    assert "shared" not in render(summary(profile_shared=None))  # no host sampler


def test_the_grid_table_shows_each_predictions_interval_and_the_widened_point() -> None:
    rows = summary()["predictions"]
    rows[2] = {**rows[2], "low": 380.0, "high": 410.0}
    text = render(summary(predictions=rows, widened=[asdict(w(1))]))
    assert "380-410" in text
    assert (
        "measured too: num_workers=1 prefetch_factor=2 persistent_workers=false, the cheapest "
        "configuration the profile's intervals kept within reach of the best"
    ) in text


def test_windows_of_seconds_are_said_with_what_they_lasted() -> None:
    """tune.json's "windows" (harness/tune/summary.timed_windows): auto windows named with
    their rule and durations, those stopped at their most counted; windows of
    measure.seconds named as such; windows of a number of steps: nothing said."""
    auto = {
        "auto": True,
        "seconds": 2.0,
        "max_seconds": 30.0,
        "profile_seconds": 0.5,
        "profile_max_seconds": 7.5,
        "profile": {"windows": 10, "lasted": [0.6, 0.8, 2.4], "rse": [0.01, 0.031], "capped": 1},
        "confirmations": {"windows": 9, "lasted": [2.0, 2.1, 2.5], "rse": [0.012, 0.019], "capped": 0},
    }
    assert (
        "windows: auto windows (steps: auto): the confirmations' as the spec's, at least 2 s and on until "
        "the step rate is known to 2%, at most 30 s; the profile's a quarter (0.5 to 7.5 s); they lasted "
        "0.6-2.4 s (median 0.8, 10 windows) in the profile and 2.0-2.5 s (median 2.1, 9 windows) in the "
        "confirmations; the step rate's relative standard error at most 3.1% (1 window(s) stopped at their "
        "most above 2%: a noisy loader or a busy machine; raise measure.max_seconds)"
    ) in render(summary(windows=auto))
    timed = {**auto, "auto": False, "max_seconds": None, "profile_seconds": 1.25, "profile_max_seconds": None}
    timed = {
        **timed,
        "profile": {**auto["profile"], "rse": None},
        "confirmations": {**auto["confirmations"], "rse": None},
    }
    text = render(summary(windows=timed))
    assert (
        "windows: windows of at least 2 s (measure.seconds): the confirmations' as the spec's, the "
        "profile's a quarter (1.25 s); they lasted 0.6-2.4 s"
    ) in text
    assert "relative standard error" not in text
    assert "windows:" not in render(summary())
