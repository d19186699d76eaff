from __future__ import annotations

import random
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.grid.compare import MATCH_COLUMNS, compare, comparison_table, render_comparison
from tests.analysis.conftest import synthetic_row, write_rows
from tests.fixtures import truth_grids

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
    config(a, "a0", 0, [101.0, 103.0, 102.0])
    config(a, "a2", 2, [150.0, 152.0, 151.0], loading=0.02)
    config(a, "a4", 4, [160.0, 161.0, 159.0])
    config(b, "b0", 0, [102.5, 101.5, 102.0])  # the same as A's: its interval lies within ±5 %
    config(b, "b2", 2, [200.0, 201.0, 199.0], loading=0.005)  # +32 %, far beyond the noise
    config(b, "b8", 8, [300.0, 300.0, 300.0])  # only in B
    c = compare([a], [b])
    assert c.matched == 2 and c.only_a == 1 and c.only_b == 1
    rows = comparison_table(c).set_index("num_workers")
    assert rows.loc["2", "judgement"] == "faster" and rows.loc["2", "change"] == pytest.approx(200 / 151 - 1)
    assert rows.loc["2", "loading"] == "shorter"
    assert rows.loc["0", "judgement"] == "same (within ±5%)"
    assert rows.loc["0", "interval"] == "-2.7% .. +2.8%"
    # loading_time 0.02 s -> 0.005 s against A's 0.1 s step: 15 % of a step shorter.
    assert rows.loc["2", "loading interval"] == "-15.7% .. -14.6%"
    text = render_comparison(c)
    assert "throughput of B: faster 1, same (within ±5%) 1" in text
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
    c = compare([tmp_path / "a"], [tmp_path / "b"])
    (row,) = comparison_table(c).itertuples()
    assert row.judgement == "untested" and row.interval == "" and row.change == pytest.approx(0.5)
    # What to do about it: the default follows up a sweep's own contenders, not a comparison's.
    assert (
        "untested: one run on a side, no interval, never called; to know, run both sweeps with "
        "measure.repeats set to 3 or more (by default a sweep measures again only the contenders "
        "of its own best)." in " ".join(render_comparison(c).split())
    )


def test_a_slower_configuration_is_called_slower(tmp_path: Path) -> None:
    config(tmp_path / "a", "x", 2, [150.0, 151.0, 149.0])
    config(tmp_path / "b", "y", 2, [100.0, 101.0, 99.0])
    (judgement,) = comparison_table(compare([tmp_path / "a"], [tmp_path / "b"]))["judgement"]
    assert judgement == "slower"


def test_an_interval_that_straddles_the_margin_is_undecided_with_the_runs_that_would_decide(
    tmp_path: Path,
) -> None:
    config(tmp_path / "a", "x", 2, [150.0, 155.0, 145.0])
    config(tmp_path / "b", "y", 2, [170.0, 176.0, 164.0])  # +13 %, but 3 runs spread by 3-4 %
    (row,) = comparison_table(compare([tmp_path / "a"], [tmp_path / "b"])).itertuples()
    assert row.interval == "+3.7% .. +23.9%"
    assert row.judgement == "undecided (6 runs would decide)"


def test_a_longer_wait_that_costs_a_step_nothing_is_the_same(tmp_path: Path) -> None:
    """Issue 19's A/A: per-step waits of 1-8 ms went +51.8 % and were called longer. Judged as a
    share of the 100 ms step, 2 ms -> 3 ms is +1 % of a step: the same, whatever its ratio."""
    config(tmp_path / "a", "x", 2, [150.0, 151.0, 149.0], loading=0.002)
    config(tmp_path / "b", "y", 2, [150.0, 151.0, 149.0], loading=0.003)
    row = comparison_table(compare([tmp_path / "a"], [tmp_path / "b"])).iloc[0]
    assert row["loading change"] == pytest.approx(0.5)  # +50 % of the wait itself
    assert row["loading interval"] == "+0.9% .. +1.1%" and row["loading"] == "same (within ±5%)"


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


@pytest.mark.serial
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


def test_a_a_comparisons_of_known_grids_call_at_most_one_configuration_in_forty(tmp_path: Path) -> None:
    """The same grids (tests/fixtures/truth_grids.py: 4 scenarios × 10 seeds, steady and
    erratic) measured twice with independent noise: 320 configurations compared, in one call
    (each grid has its own batch_size). A call, of throughput or of the wait for data, is a
    false alarm. Bound: a two-sided 95 % interval lies wholly beyond one edge of the margin,
    when there is no difference at all, at most 2.5 % of the time. This seeded set makes none
    (191 throughputs the same within ±5 %, 129 undecided; 195 and 125 of the waits)."""
    grids = [
        (kind, seed, name)
        for kind in truth_grids.KINDS
        for seed in range(10)
        for name in truth_grids.SCENARIOS
    ]
    for side in ("a", "b"):
        for batch, (kind, seed, name) in enumerate(grids, start=8):
            rng = random.Random(f"{side}-{kind}-{seed}-{name}")
            truth_grids.write_grid(tmp_path / side, truth_grids.SCENARIOS[name], kind, rng, batch=batch)
    table = comparison_table(compare([tmp_path / "a"], [tmp_path / "b"]))
    assert len(table) == 320
    calls = (
        table["judgement"].isin(["faster", "slower"]).sum()
        + table["loading"].isin(["longer", "shorter"]).sum()
    )
    assert calls <= 0.025 * len(table)


def test_sweeps_of_several_sizes_are_compared_size_by_size(tmp_path: Path) -> None:
    """slurm.nodes as an axis (issue #40): the same settings at 1 and 2 ranks are two
    configurations, never pooled; B's store gave way at 2 ranks only, and compare says so
    there alone, with the size as a column."""
    a, b = tmp_path / "a", tmp_path / "b"
    for sweep, at_two in ((a, [180.0, 181.0, 179.0]), (b, [120.0, 121.0, 119.0])):
        config(sweep, f"{sweep.name}1", 2, [100.0, 101.0, 99.0], world_size=1)
        config(sweep, f"{sweep.name}2", 2, at_two, world_size=2)
    c = compare([a], [b])
    assert c.matched == 2 and c.only_a == 0 and c.only_b == 0
    rows = comparison_table(c).set_index("world_size")
    assert rows.loc["1", "judgement"] == "same (within ±5%)"
    assert rows.loc["2", "judgement"] == "slower"
    assert rows.loc["2", "change"] == pytest.approx(120 / 180 - 1)
    assert "world_size:" not in "\n".join(c.changed)  # the same sizes on both sides


def test_one_size_a_side_is_what_changed_not_a_key(tmp_path: Path) -> None:
    """Before and after moving a sweep from 1 rank to 2: matched on the settings, the size named
    under what changed, as before sizes were an axis."""
    config(tmp_path / "a", "x", 2, [100.0, 101.0, 99.0], world_size=1)
    config(tmp_path / "b", "y", 2, [150.0, 151.0, 149.0], world_size=2)
    c = compare([tmp_path / "a"], [tmp_path / "b"])
    assert c.matched == 1 and "world_size" not in c.key
    assert "world_size: 1 → 2" in c.changed
