from __future__ import annotations

from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.compare import MATCH_COLUMNS, compare, comparison_table, render_comparison
from tests.analysis.conftest import synthetic_row, write_rows

SAMPLES = 80


def config(
    sweep: Path, point_id: str, workers: int, rates: list[float], loading: float = 0.01, **kw: object
) -> None:
    write_rows(
        sweep,
        *(
            synthetic_row(
                point_id=point_id,
                num_workers=workers,
                prefetch_factor=2 if workers else None,
                repeat=repeat,
                samples=SAMPLES,
                training_time=SAMPLES / rate,
                loading_time=loading * (1 + 0.01 * repeat),
                **kw,
            )
            for repeat, rate in enumerate(rates)
        ),
    )


def test_configurations_match_on_settings_not_ids_and_changes_need_the_runs_to_call_them(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    config(a, "a0", 0, [100.0, 104.0, 102.0])
    config(a, "a2", 2, [150.0, 152.0, 151.0], loading=0.02)
    config(a, "a4", 4, [160.0, 161.0, 159.0])
    config(b, "b0", 0, [103.0, 101.0, 102.0])  # the same as A's, as far as 3 runs can tell
    config(b, "b2", 2, [200.0, 201.0, 199.0], loading=0.005)  # +32 %, far beyond the noise
    config(b, "b8", 8, [300.0, 300.0, 300.0])  # only in B
    c = compare([a], [b])
    assert c.matched == 2 and c.only_a == 1 and c.only_b == 1
    rows = comparison_table(c).set_index("num_workers")
    assert rows.loc["2", "judgement"] == "faster" and rows.loc["2", "change"] == pytest.approx(200 / 151 - 1)
    assert rows.loc["2", "loading"] == "shorter"
    assert rows.loc["0", "judgement"] == "same (within noise)"
    assert rows.loc["0", "interval"].startswith("-") and " .. +" in rows.loc["0", "interval"]
    text = render_comparison(c)
    assert "throughput of B: faster 1, same (within noise) 1" in text
    others = len(MATCH_COLUMNS) - 1  # every setting but num_workers is equal throughout
    assert (
        f"2 configuration(s) in both, matched on num_workers (and {others} settings equal throughout)" in text
    )
    assert "not matched: 1 configuration(s) only in A, 1 only in B" in text
    assert "what changed from A to B:\n  nothing in settings" in text


@pytest.mark.parametrize("runs_a", [[100.0], [100.0, 101.0, 99.0]])
def test_with_one_run_on_a_side_even_a_large_change_is_untested(tmp_path: Path, runs_a: list[float]) -> None:
    config(tmp_path / "a", "x", 2, runs_a)
    config(tmp_path / "b", "y", 2, [150.0])
    (row,) = comparison_table(compare([tmp_path / "a"], [tmp_path / "b"])).itertuples()
    assert row.judgement == "untested" and row.interval == "" and row.change == pytest.approx(0.5)


def test_a_slower_configuration_is_called_slower(tmp_path: Path) -> None:
    config(tmp_path / "a", "x", 2, [150.0, 151.0, 149.0])
    config(tmp_path / "b", "y", 2, [100.0, 101.0, 99.0])
    (judgement,) = comparison_table(compare([tmp_path / "a"], [tmp_path / "b"]))["judgement"]
    assert judgement == "slower"


def test_the_same_sweep_measured_twice_calls_nothing(real_sweep_twice: tuple[Path, Path]) -> None:
    """An A/A comparison: the harness measured one spec twice, 3 repeats each; its change may
    not be called faster or slower, though the two sweeps' medians differ."""
    first, second = real_sweep_twice
    (row,) = comparison_table(compare([first], [second])).itertuples()
    assert row.judgement == "same (within noise)", row
    assert row.interval != ""  # tested, not merely untested


def test_a_setting_changed_on_every_point_is_named_and_not_matched_on(tmp_path: Path) -> None:
    config(tmp_path / "a", "x", 2, [100.0], batch_size=8, hostname="v100-node")
    config(tmp_path / "b", "y", 2, [150.0], batch_size=16, hostname="a100-node")
    c = compare([tmp_path / "a"], [tmp_path / "b"])
    assert c.matched == 1 and "batch_size" not in c.key
    assert c.changed[:2] == ["batch_size: 8 → 16", "nodes: v100-node → a100-node"]


def test_no_match_says_which_setting_has_no_value_in_common(tmp_path: Path) -> None:
    config(tmp_path / "a", "x", 2, [100.0], rung="device_batch")
    config(tmp_path / "b", "y", 2, [150.0])
    c = compare([tmp_path / "a"], [tmp_path / "b"])
    assert c.matched == 0
    assert c.notes == [
        "no configuration of A matches one of B: no value in common in rung: A has device_batch, B has full"
    ]


def test_compare_cli_on_two_real_sweeps(
    real_sweep_pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = real_sweep_pair
    assert main(["compare", str(before), str(after)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"A: {before} (1 sweep(s), 2 point(s))\nB: {after} (1 sweep(s), 2 point(s))\n")
    assert (
        "what changed from A to B:\n  batch_size: 8 → 4\n  spec.yaml (- A, + B):\n    -  batch_size: 8\n    +  batch_size: 4"
        in out
    )
    assert "2 configuration(s) in both, matched on" in out
    for fmt in ("markdown", "latex", "csv"):
        assert main(["compare", str(before), str(after), "--format", fmt]) == 0
    csv = capsys.readouterr().out
    assert "num_workers,A samples/s,B samples/s,change,interval,judgement" in csv


def test_compare_exits_1_when_nothing_matches(
    real_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(real_sweep), str(tmp_path)]) == 1
    assert "B: no ok rows to compare" in capsys.readouterr().out
