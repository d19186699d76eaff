"""step_ms taken from a sweep that measured device_batch: resolved at load, or one clear error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import SpecError, parse_spec
from harness_schema import layout
from harness_schema.rows import RankWriter, RungRow


def _row(
    point: str, rung: str, repeat: int, rank: int, *, seconds: float, steps: int, status: str = "ok"
) -> RungRow:
    return RungRow(
        sweep_id="gpu",
        point_id=point,
        point_index=0,
        sequence_step="",
        rung=rung,
        repeat=repeat,
        rank=rank,
        world_size=2,
        hostname="node1",
        jobid="",
        device=f"cuda:{rank}",
        status=status,
        error="",
        steps=steps,
        training_time=seconds,
    )


def _write(sweep: Path, point: str, rows: list[RungRow]) -> None:
    for rank in sorted({r.rank for r in rows}):
        writer = RankWriter(layout.point_dir(sweep, point), rank)
        writer.path.parent.mkdir(parents=True, exist_ok=True)
        for row in rows:
            if row.rank == rank:
                writer.append(row)


def _gpu_sweep(root: Path) -> Path:
    """Point p1: three repeats on two ranks; the slower rank sets each repeat's step."""
    sweep = root / "results" / "gpu" / "s1"
    rows = [
        _row("p1", "device_batch", 0, 0, seconds=1.0, steps=20),  # 50 ms
        _row("p1", "device_batch", 0, 1, seconds=1.2, steps=20),  # 60 ms: the slowest rank
        _row("p1", "device_batch", 1, 0, seconds=1.4, steps=20),  # 70 ms
        _row("p1", "device_batch", 1, 1, seconds=1.0, steps=20),
        _row("p1", "device_batch", 2, 0, seconds=2.0, steps=20),  # 100 ms
        _row("p1", "device_batch", 2, 1, seconds=1.0, steps=20),
        _row("p1", "full", 0, 0, seconds=9.0, steps=20),  # not the train step alone: ignored
        _row("p1", "device_batch", 3, 0, seconds=9.0, steps=20, status="failed"),
    ]
    _write(sweep, "p1", rows)
    return sweep


def _spec(source: str) -> str:
    return textwrap.dedent(
        f"""\
        name: emu
        workload:
          dataset: fake_cifar
          model: emulated
          model_args:
            step_ms: {source}
        """
    )


def test_step_ms_is_the_median_repeat_of_the_slowest_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gpu_sweep(tmp_path)
    monkeypatch.chdir(tmp_path)
    spec = parse_spec(_spec("{from: results/gpu/s1}"), file="emu.yaml")
    # repeats: 60, 70, 100 ms -> median 70; the failed and the `full` rows are not counted
    assert spec.field_values["workload.model_args"] == ({"step_ms": 70.0},)
    assert any("results/gpu/s1" in note and "p1" in note for note in spec.notes)
    (point,) = expand(spec).points
    assert point.workload.model_args == {"step_ms": 70.0}


def test_a_relative_source_is_also_found_beside_the_spec(tmp_path: Path) -> None:
    _gpu_sweep(tmp_path)
    spec_file = tmp_path / "emu.yaml"
    spec = parse_spec(_spec("{from: results/gpu/s1, point: p1}"), file=str(spec_file), path=spec_file)
    assert spec.field_values["workload.model_args"] == ({"step_ms": 70.0},)


def test_a_missing_folder_is_named_with_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        SpecError, match=r"emu.yaml:5: workload.model_args: step_ms from results/gpu/nope: no sweep folder"
    ):
        parse_spec(_spec("{from: results/gpu/nope}"), file="emu.yaml")


def test_a_sweep_without_device_batch_says_to_measure_it(tmp_path: Path) -> None:
    sweep = tmp_path / "s0"
    _write(sweep, "p1", [_row("p1", "full", 0, 0, seconds=1.0, steps=10)])
    with pytest.raises(
        SpecError, match=r"workload.model_args: .*measure rungs: \[device_batch\] there first"
    ):
        parse_spec(_spec(f"{{from: {sweep}}}"), file="emu.yaml")


def test_an_unknown_point_lists_the_points_that_have_rows(tmp_path: Path) -> None:
    sweep = _gpu_sweep(tmp_path)
    with pytest.raises(
        SpecError,
        match=r"workload.model_args: .*point 'p9' has no ok device_batch rows; points that have: p1$",
    ):
        parse_spec(_spec(f"{{from: {sweep}, point: p9}}"), file="emu.yaml")


def test_several_points_and_none_chosen_asks_which(tmp_path: Path) -> None:
    sweep = _gpu_sweep(tmp_path)
    _write(sweep, "p2", [_row("p2", "device_batch", 0, 0, seconds=2.0, steps=10)])
    with pytest.raises(
        SpecError,
        match=r"workload.model_args: .*2 points have device_batch rows \(p1, p2\); say which with point: <id>",
    ):
        parse_spec(_spec(f"{{from: {sweep}}}"), file="emu.yaml")
    chosen = parse_spec(_spec(f"{{from: {sweep}, point: p2}}"), file="emu.yaml")
    assert chosen.field_values["workload.model_args"] == ({"step_ms": 200.0},)


def test_a_malformed_source_or_a_step_not_above_zero_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        SpecError, match=r"workload.model_args: step_ms .* expected \{from: results/<spec>/<sweep>"
    ):
        parse_spec(_spec("{form: results/gpu/s1}"), file="emu.yaml")
    with pytest.raises(
        SpecError, match=r"workload.model_args: step_ms 0 is not allowed; expected milliseconds > 0"
    ):
        parse_spec(_spec("0"), file="emu.yaml")
    assert parse_spec(_spec("12.5"), file="emu.yaml").field_values["workload.model_args"] == (
        {"step_ms": 12.5},
    )
