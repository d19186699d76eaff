from __future__ import annotations

from pathlib import Path

from analysis.load import load_results
from analysis.verdict import ladder_verdicts, render_verdict, stage_between
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.runner import run_point
from tests.analysis.conftest import synthetic_row
from tests.analysis.test_tables import write

STARVED = ["PILToTensor", "RandomCrop", "RandomMask", "ConvertColor", "Scale"]


def test_stage_names_between_rungs() -> None:
    assert stage_between("device_batch", "host_batch", STARVED) == "host-to-device copy"
    assert stage_between("processed_sample", "raw_sample", STARVED) == "transforms"
    assert stage_between("processed_sample", "raw_sample", []) == "transforms"
    assert stage_between("transform:3", "transform:2", STARVED) == "transform 3/5 (RandomMask)"
    assert (
        stage_between("processed_sample", "transform:3", STARVED)
        == "transforms 4/5 (ConvertColor), 5/5 (Scale)"
    )
    assert stage_between("raw_sample", "full", STARVED) == "raw data loading"
    assert stage_between("raw_bytes", "full", STARVED) == "reading the stored bytes"
    assert stage_between("raw_sample", "raw_bytes", STARVED) == "decoding"
    assert (
        stage_between("host_batch", "full", []) == "collation and worker IPC + transforms + raw data loading"
    )


def article_ladder(
    tmp_path: Path, rates: dict[str, float], device: str = "cuda", repeats: int = 1, jitter: float = 0.01
) -> None:
    """Rows with the article's steps/s (001_*), written by the harness's writer."""
    rows = []
    for rung, rate in rates.items():
        for repeat in range(repeats):
            slower = 1 + jitter * repeat
            rows.append(
                synthetic_row(
                    rung=rung,
                    repeat=repeat,
                    steps=100,
                    samples=100 * 256,
                    training_time=100 / rate * slower,
                    device=device,
                    transform_names=",".join(STARVED),
                )
            )
    write(tmp_path, *rows)


ARTICLE = {
    "device_batch": 3.45,
    "host_batch": 3.33,
    "processed_sample": 3.23,
    "raw_sample": 1.72,
    "full": 0.89,
}


def test_the_article_ladder_names_raw_loading_and_transforms(tmp_path: Path) -> None:
    article_ladder(tmp_path, ARTICLE)
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    assert verdict.stages == ["raw data loading", "transforms"]  # 0.54 s/step, then 0.27 s/step
    assert verdict.sentence == (
        "raw data loading: −48% (full vs raw_sample); transforms: −47% (raw_sample vs processed_sample). "
        "full reaches 26% of the bound (device_batch)"
    )
    text = render_verdict(verdict)
    assert "host-to-device copy" in text and "+0.5422" in text


def test_a_pipeline_that_keeps_up(tmp_path: Path) -> None:
    article_ladder(
        tmp_path, {"device_batch": 3.45, "host_batch": 3.40, "processed_sample": 3.38, "full": 3.31}
    )
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    assert verdict.stages == []
    assert verdict.sentence == "the input pipeline keeps up: full reaches 96% of the bound (device_batch)"


def test_on_cpu_the_copy_is_not_assessed(tmp_path: Path) -> None:
    article_ladder(tmp_path, {"device_batch": 3.45, "host_batch": 2.0, "full": 1.9}, device="cpu")
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    assert "host-to-device copy" not in verdict.stages
    assert (
        "device cpu: device_batch and host_batch measure the same thing; no copy is assessed"
        in verdict.caveats
    )


def test_a_drop_within_the_spread_of_repeats_is_not_named(tmp_path: Path) -> None:
    rows = []
    for repeat, (top, bottom) in enumerate([(10.0, 9.0), (8.0, 9.5), (9.5, 8.5)]):
        rows += [
            synthetic_row(rung="processed_sample", repeat=repeat, steps=10, training_time=10 / top),
            synthetic_row(rung="full", repeat=repeat, steps=10, training_time=10 / bottom),
        ]
    write(tmp_path, *rows)
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    # full's median is 6 % under processed_sample's, but repeats spread by over 20 %.
    assert verdict.stages == []
    assert verdict.sentence.startswith("the input pipeline keeps up") or "no single stage" in verdict.sentence


def test_varying_input_sizes_and_a_saturated_cpu_are_caveats(tmp_path: Path) -> None:
    write(
        tmp_path,
        synthetic_row(
            rung="processed_sample",
            steps=10,
            training_time=1.0,
            input_shapes=1,
            loader_cores=0.5,
            main_cores=1.0,
            cpus_allotted=4,
        ),
        synthetic_row(
            rung="full",
            steps=10,
            training_time=2.0,
            input_shapes=3,
            loader_cores=2.9,
            main_cores=1.0,
            cpus_allotted=4,
        ),
    )
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    assert verdict.caveats == [
        "the CPU was saturated on full (3.9 of 4 cores busy): transforms + raw data loading may only have tipped it "
        "over; another stage may be the one to optimise (001_*)",
        "inputs vary in size (3 batch shapes seen): a single cached sample or batch may not reflect real steps (001_*)",
    ]


# --- real runs with one injected slow stage: the verdict must name it and no other -----------


def run_ladder(
    tmp_path: Path,
    dataset: str,
    rungs: str,
    *,
    workers: int = 0,
    batch: int = 2,
    args: str = "{}",
    step_s: float = 0.1,
    repeats: int = 1,
    warmup: int = 2,
    steps: int = 6,
) -> list:
    """A fixed train step (a sleep of step_s) keeps the cheap rungs far above timer and
    scheduler noise, even on a loaded 2-core machine."""
    spec = parse_spec(
        f"""\
name: injected
workload: {{dataset: "tests.fixtures.workloads:{dataset}", dataset_args: {args}, model: "tests.fixtures.workloads:slow_model", model_args: {{delay: {step_s}}}, batch_size: {batch}, device: cpu}}
measure: {{warmup_steps: {warmup}, steps: {steps}, repeats: {repeats}}}
rungs: {rungs}
loader: {{num_workers: {workers}}}
"""
    )
    (point,) = expand(spec).points
    outcome = run_point(point, tmp_path)
    assert outcome.failed == 0 and outcome.skipped == 0
    return ladder_verdicts(load_results([tmp_path]).rows)


def test_a_slow_raw_read_is_named(tmp_path: Path) -> None:
    (verdict,) = run_ladder(
        tmp_path,
        "slow_read",
        "[processed_sample, raw_sample, full]",
        args="{delay: 0.1}",
        repeats=2,
        warmup=1,
        steps=4,
    )
    assert verdict.stages == ["raw data loading"]


def test_the_slow_transform_in_the_middle_of_a_compose_is_named(tmp_path: Path) -> None:
    (verdict,) = run_ladder(
        tmp_path,
        "slow_middle_transform",
        "[processed_sample, transform:2, transform:1, raw_sample, full]",
        args="{delay: 0.1}",
        repeats=2,
        warmup=1,
        steps=4,
    )
    assert verdict.stages == ["transform 2/3 (Sleep)"]


def test_a_very_large_batch_payload_is_named_collation_and_ipc(tmp_path: Path) -> None:
    # 16 samples of 3×512² floats (48 MB a batch) through collation and 2 workers' IPC, against
    # a 20 ms step; CPU-bound stages jitter under load, so three repeats give the noise.
    (verdict,) = run_ladder(
        tmp_path,
        "large_payload",
        "[host_batch, processed_sample, raw_sample]",
        workers=2,
        batch=16,
        args="{side: 512}",
        step_s=0.02,
        repeats=3,
    )
    assert verdict.stages == ["collation and worker IPC"]


def test_transform_cuts_under_the_noise_are_named_together(tmp_path: Path) -> None:
    rates = {
        "device_batch": 14.3,
        "processed_sample": 13.8,
        "transform:3": 12.0,
        "transform:2": 10.7,
        "raw_sample": 9.8,
        "full": 9.5,
    }
    article_ladder(tmp_path, rates, device="cpu", repeats=3, jitter=0.08)  # a 16 % spread
    (verdict,) = ladder_verdicts(load_results([tmp_path]).rows)
    assert verdict.stages == ["transforms"]
    assert verdict.sentence.startswith(
        "transforms: −29% (raw_sample vs processed_sample), the most in "
        "transforms 4/5 (ConvertColor), 5/5 (Scale) (−13%)"
    )
