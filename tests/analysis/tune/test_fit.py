"""The pipeline model's profile made from measured figures (analysis/tune/fit.py), on figures
whose answers are worked out by hand in the comment beside each."""

from __future__ import annotations

import pytest

from analysis.tune.fit import fit_profile


def test_fit_profile_reads_each_figure_from_its_column() -> None:
    zero = {
        "loading_time": 0.05,
        "steps_per_s": 1 / 0.07,  # 70 ms a step, 50 of them waiting: a 20 ms step
        "loading_time_p50": 0.04,
        "loading_time_p99": 0.14,
        "bound_steps_per_s": 50.0,
        "bound_main_cores": 0.1,
        "cpu_memory_gb": 1.0,
    }
    two = {
        "loader_capacity": 36.0,
        "steps_per_s": 36.0,
        "loading_time": 1 / 36 - 0.021,  # a 21 ms step
        "loader_cores": 0.72,
        "cpus_allotted": 4,
        "bound_steps_per_s": 49.0,
        "bound_main_cores": 0.2,
        "cpu_memory_gb": 1.5,
        "first_step_loading_time": 0.3,
        "epoch_steps": 100,
    }
    p = fit_profile(zero, two, workers=2, batch_size=16)
    # The median of 20 ms (bound), 20 ms (full less its wait), 20.4 ms (bound), 21 ms (full).
    assert p.step_s == pytest.approx((0.02 + 1 / 49) / 2)
    assert p.main_load_s == pytest.approx(0.05)
    assert p.stall_s == pytest.approx(0.10)  # p99 − p50
    assert p.stall_share == pytest.approx(0.1)  # (mean − p50) / stall
    assert p.efficiency == pytest.approx(0.9)  # 36 / (2 × 20)
    assert p.cpu_s_per_batch == pytest.approx(0.02)  # 0.72 cores / 36 batches/s
    assert p.cores == pytest.approx(3.9)  # 4 allotted − 0.1 the main process keeps busy
    assert p.memory_per_worker_gb == pytest.approx(0.25)
    assert (p.restart_s, p.epoch_steps, p.profiled_workers) == (0.3, 100, 2)


def test_fit_profile_without_the_tail_assumes_no_stalls() -> None:
    zero = {"loading_time": 0.05, "bound_steps_per_s": 50.0}
    one = {"loader_capacity": 20.0, "steps_per_s": 20.0, "bound_steps_per_s": 50.0}
    p = fit_profile(zero, one, workers=1, batch_size=8)
    assert (p.stall_s, p.stall_share, p.cpu_s_per_batch, p.memory_per_worker_gb) == (0, 0, 0, 0)
    with pytest.raises(ValueError, match="needs workers >= 1"):
        fit_profile(zero, one, workers=0, batch_size=8)
