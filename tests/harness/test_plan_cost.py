"""What a point costs, as `harness plan` says it (harness/plan_cost.py): the real warmup (the
workers' stock included), the steps and the duration where a step's time is known, and the
refusals and warnings where a point cannot fit its limit, its cores or its budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.config.plan import expand
from harness.config.spec import SpecError, parse_spec
from harness.plan_cost import judge
from harness.plan_table import plan_table
from tests.conftest import TINY_WORKLOAD

EMULATED = """\
workload:
  dataset: fake_cifar
  dataset_args: {size: 3200, image_size: 32, resize: null}
  model: emulated
  model_args: {step_ms: 40}
  batch_size: 32
measure: {warmup_steps: 5, steps: 40, repeats: 3}
"""


def plan_of(extra: str, workload: str = EMULATED):
    return expand(parse_spec("name: cost\n" + workload + extra))


def written(tmp_path: Path, extra: str, workload: str = EMULATED) -> Path:
    spec = tmp_path / "cost.yaml"
    spec.write_text("name: cost\n" + workload + extra)
    return spec


def test_the_warmup_column_counts_the_workers_stock() -> None:
    """loop.py: at least max(warmup_steps, stock) steps, then up to 4 × stock more until the
    stock is used up; a batch-level rung's warmup is warmup_steps alone."""
    lines = plan_table(plan_of("loader: {num_workers: [0, 1, 2, 8], prefetch_factor: 2}\n")).splitlines()
    assert (
        lines[0]
        == "cost: 4 point(s) × 1 rung(s) × 3 repeat(s), 40 measured steps each after a warmup (its column)"
    )
    assert lines[1].split()[-2:] == ["warmup", "adjusted"]
    warmups = [line.split()[line.split().index("full") + 1] for line in lines[3:7]]
    assert warmups == ["5", "5-13", "5-21", "16-80"]
    bound = plan_table(plan_of("loader: {num_workers: [1, 2]}\nrungs: [device_batch]\n")).splitlines()
    assert [line.split()[-1] for line in bound[3:5]] == ["5", "5"]


def test_the_duration_is_given_where_the_step_is_known_and_said_unknown_elsewhere() -> None:
    lines = plan_table(plan_of("loader: {num_workers: [0, 2]}\n")).splitlines()
    # At most: the drains (48), and each window of the 2-worker point rounded up to whole
    # periods of a bursty delivery (3 steps more, 3 repeats).
    assert lines[-2] == "steps: 270 to 327 train steps in all (warmups until the workers' stock is used up)"
    assert lines[-1] == (
        "duration: at least 10.8 s one point after another (inline, local); the longest point at "
        "least 5.4 s of its 20 min limit (slurm.time); from the emulated step (step_ms), which the "
        "loader can only lengthen"
    )
    unknown = plan_table(plan_of("loader: {num_workers: [0, 2]}\n", TINY_WORKLOAD)).splitlines()
    assert unknown[-1] == (
        "duration: unknown per-step time (only model: emulated gives one); the longest point's 7 "
        "train steps fit its 20 min limit (slurm.time) at under 171 s a step"
    )


def test_a_prefetch_factor_of_a_million_is_refused_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = written(tmp_path, "loader:\n  num_workers: [0, 2]\n  prefetch_factor: 1000000\n")
    point = expand(parse_spec(spec.read_text())).points[1]
    for verb in ("plan", "run", "submit", "sbatch"):
        results = [] if verb == "plan" else ["--results", str(tmp_path / "r")]
        assert main([verb, str(spec), *results]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.splitlines() == [
            f"harness: {spec}:11: loader.prefetch_factor: point 1 ({point.id}) "
            "takes at least 3 days: 6,000,120 train steps of at least 40 ms (step_ms), each warmup at "
            "least 2,000,000 (the workers' stock, num_workers 2 × prefetch_factor 1000000, is used up "
            "before the window), and its limit is 20 min (slurm.time): it would be killed before it "
            "ends; lower loader.prefetch_factor or raise slurm.time"
        ]
    assert not (tmp_path / "r").exists()


def with_measure(measure: str, workload: str = EMULATED) -> str:
    return "\n".join(line for line in workload.splitlines() if not line.startswith("measure:")) + (
        f"\nmeasure: {measure}\n"
    )


def test_a_window_past_the_limit_is_refused() -> None:
    plan = plan_of("", with_measure("{warmup_steps: 5, steps: 15000, repeats: 3}"))
    with pytest.raises(SpecError) as error:
        judge(plan)
    assert str(error.value) == (
        f"<spec>: measure.steps: point 0 ({plan.points[0].id}) takes at least 30 min: 45,015 train "
        "steps of at least 40 ms (step_ms), and its limit is 20 min (slurm.time): it would be killed "
        "before it ends; lower measure.steps or raise slurm.time"
    )


def test_the_points_own_limit_is_the_one_judged_where_the_spec_gives_it() -> None:
    # limits.point_minutes is the limit the backends apply (harness/backends/limit.py): the
    # plan judges against it, and names it, in place of slurm.time.
    plan = plan_of(
        "limits: {point_minutes: 10}\n", with_measure("{warmup_steps: 5, steps: 7000, repeats: 3}")
    )
    with pytest.raises(SpecError) as error:
        judge(plan)
    assert str(error.value) == (
        f"<spec>: measure.steps: point 0 ({plan.points[0].id}) takes at least 14 min: 21,015 train "
        "steps of at least 40 ms (step_ms), and its limit is 10 min (limits.point_minutes): it would "
        "be killed before it ends; lower measure.steps or raise limits.point_minutes"
    )


def test_a_budget_that_cannot_bound_a_window_is_refused_where_the_step_is_known() -> None:
    measure = "{warmup_steps: 5, steps: 1000000000, repeats: auto, budget_minutes: 0.1}"
    plan = plan_of('slurm: {time: "10000-00:00:00"}\n', with_measure(measure))
    with pytest.raises(SpecError) as error:
        judge(plan)
    assert str(error.value) == (
        f"<spec>: measure.budget_minutes: 0.1 cannot bound point 0 ({plan.points[0].id}): the "
        "budget only decides whether to measure more repeats after the first 3, never cuts a "
        "window, and the first 3 take at least 1,389 days (3,000,000,015 train steps of at least "
        "40 ms, step_ms); lower measure.steps or raise the budget"
    )


def test_where_the_step_is_unknown_an_impossible_pace_is_a_warning() -> None:
    workload = with_measure(
        "{warmup_steps: 1, steps: 1000000000, repeats: auto, budget_minutes: 0.1}", TINY_WORKLOAD
    )
    plan = plan_of("loader: {num_workers: [0, 1]}\n", workload)
    assert judge(plan) == [
        f"point 1 ({plan.points[1].id}) (and 1 other point(s)): its 3,000,000,006 train steps or more "
        "fit its 20 min limit (slurm.time) only at under 400 ns a step; the spec gives no per-step "
        "time to tell (model: emulated has one)",
        "measure.budget_minutes 0.1 bounds the repeats after the first 3, never a window: point 1's "
        "first 3 (3,000,000,006 train steps) fit it only at under 2 ns a step",
    ]
    assert plan_table(plan).splitlines()[-1] == (
        "budget: 0.1 min a point bounds the repeats after the first 3, never a window"
    )


def test_workers_far_past_the_cores_are_refused_and_a_few_past_them_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = written(tmp_path, "loader: {num_workers: [0, 512]}\nslurm: {cpus_per_task: 2}\n")
    assert main(["plan", str(spec)]) == 2
    assert capsys.readouterr().err == (
        f"harness: {spec}:9: loader.num_workers: 512 is not allowed with 2 core(s) a rank "
        "(slurm.cpus_per_task): past 16 workers a core they measure only the time-sharing, and each "
        "is a process with its copy of the dataset and its batches (512 workers on 2 cores took 9 GB "
        "in 40 s); at most 32 here, or give the rank more cores\n"
    )
    assert judge(plan_of("loader: {num_workers: [2, 4, 5, 8]}\nslurm: {cpus_per_task: 2}\n")) == [
        "loader.num_workers 5, 8: more than 2 workers a core on 2 core(s) a rank (slurm.cpus_per_task); "
        "they time-share the cores (more memory, rarely more batches)"
    ]
    assert judge(plan_of("loader: {num_workers: [8, 16]}\nslurm: {cpus_per_task: 8}\n")) == []


def test_a_warning_is_said_and_the_plan_still_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    spec = written(tmp_path, "loader: {num_workers: [2, 8]}\nslurm: {cpus_per_task: 2}\n")
    assert main(["plan", str(spec)]) == 0
    assert capsys.readouterr().out.startswith("cost: 2 point(s)")
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"{spec}: loader.num_workers 8: more than 2 workers a core on 2 core(s) a rank "
        "(slurm.cpus_per_task); they time-share the cores (more memory, rarely more batches)"
    ]


def test_an_auto_window_is_planned_by_its_least_and_most_seconds() -> None:
    """steps: auto: the steps are not known before the windows run, their duration is bounded
    by measure.seconds and measure.max_seconds (and each loader-capacity pass lasts as long as
    its window): the plan says both bounds, not a count of steps."""
    plan = plan_of(
        "loader: {num_workers: [0, 2]}\nrungs: [host_batch, full]\n",
        with_measure("{warmup_steps: 5, steps: auto, repeats: 3, seconds: 3, max_seconds: 20}"),
    )
    lines = plan_table(plan).splitlines()
    assert lines[0] == (
        "cost: 2 point(s) × 2 rung(s) × 3 repeat(s), auto windows (at least 40 steps and 3 s, on "
        "until the step rate is known to 2%, at most 20 s) after a warmup (its column)"
    )
    assert lines[-2] == (
        "steps: 540 or more train steps in all (warmups until the workers' stock is used up; auto "
        "windows as many as their rate needs)"
    )
    # 2 rungs × 3 repeats, and a capacity pass after each full window (host_batch is the demand).
    assert lines[-1] == (
        "duration: auto windows of 3 to 20 s each (measure.seconds, measure.max_seconds), "
        "loader-capacity passes as long: 54.0 s to 6 min one point after another (inline, "
        "local), warmups besides; the longest point's 9 windows take 27.0 s to 3 min of its 20 min "
        "limit (slurm.time)"
    )
    assert judge(plan) == []


def test_auto_windows_past_the_limit_are_refused_at_their_least_and_warned_at_their_most() -> None:
    plan = plan_of(
        "limits: {point_minutes: 1}\n", with_measure("{steps: auto, repeats: 3, seconds: 30}", TINY_WORKLOAD)
    )
    with pytest.raises(SpecError) as error:
        judge(plan)
    assert str(error.value) == (
        f"<spec>: measure.seconds: point 0 ({plan.points[0].id}) takes at least 1.5 min: 3 auto windows "
        "of at least 30 s (measure.seconds), and its limit is 1 min (limits.point_minutes): it would be "
        "killed before it ends; lower measure.seconds or raise limits.point_minutes"
    )
    plan = plan_of("limits: {point_minutes: 1}\n", with_measure("{steps: auto, repeats: 3}", TINY_WORKLOAD))
    assert judge(plan) == [
        f"point 0 ({plan.points[0].id}): its 3 auto windows of at most 30 s (measure.max_seconds) take up "
        "to 1.5 min, past its 1 min limit (limits.point_minutes); a noisy rate would have it killed: "
        "lower measure.max_seconds or raise limits.point_minutes"
    ]
