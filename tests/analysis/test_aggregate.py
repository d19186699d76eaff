from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.aggregate import UNKNOWN_TYPE, _tuples, add_nodes, summarize, varies
from analysis.load import load_results
from analysis.meta import load_meta
from tests.analysis.conftest import synthetic_row, write_node_meta, write_rows


def test_a_run_is_its_common_window_and_its_samples_are_all_ranks(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        synthetic_row(rank=0, world_size=2, training_time=1.0, loading_time=0.01),
        synthetic_row(rank=1, world_size=2, training_time=2.0, loading_time=0.05),
    )
    (row,) = summarize(load_results([tmp_path]).rows).itertuples()
    assert row.training_time == 2.0 and row.loading_time == 0.05 and row.loading_rank == 1
    assert row.samples_per_s == pytest.approx(160 / 2.0)
    assert row.ranks == 2


def test_under_ddp_the_loading_time_is_the_rank_that_waited_most_not_the_slowest(tmp_path: Path) -> None:
    """The all-reduce makes the ranks' training_time equal: rank 0 is "slowest" by a hair, but
    rank 1 is the one that waited 69 ms a step for its data. That wait is the run's."""
    write_rows(
        tmp_path,
        synthetic_row(rank=0, world_size=2, training_time=1.0001, loading_time=0.003, next_time=0.002),
        synthetic_row(rank=1, world_size=2, training_time=1.0, loading_time=0.069, next_time=0.066),
    )
    (row,) = summarize(load_results([tmp_path]).rows).itertuples()
    assert row.loading_time == 0.069 and row.loading_rank == 1
    assert row.next_time == 0.066 and row.next_rank == 1
    assert row.training_time == 1.0001 and row.samples_per_s == pytest.approx(160 / 1.0001)


def test_a_rank_without_a_wait_figure_leaves_the_other_ranks_figure(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        synthetic_row(rank=0, world_size=2, loading_time=None),
        synthetic_row(rank=1, world_size=2, loading_time=0.02),
    )
    (row,) = summarize(load_results([tmp_path]).rows).itertuples()
    assert row.loading_time == 0.02 and row.loading_rank == 1
    assert row.next_time != row.next_time  # no rank measured next_time: NaN, no rank named


def test_repeats_take_the_median_and_the_noise_models_interval(tmp_path: Path) -> None:
    write_rows(tmp_path, *(synthetic_row(repeat=r, training_time=t) for r, t in enumerate([1.0, 3.0, 1.2])))
    (row,) = summarize(load_results([tmp_path]).rows).itertuples()
    rates = (80 / 1.0, 80 / 3.0, 80 / 1.2)
    assert row.training_time == 1.2 and row.runs == 3
    assert row.run_samples_per_s == pytest.approx(rates)
    # Three runs, nothing to trim: Student's t (2 df) on the logs; ci95 is half the interval's
    # width over its centre, sinh(half-width on the log scale). The slow repeat widens it.
    logs = [math.log(r) for r in rates]
    assert row.ci95 == pytest.approx(math.sinh(4.303 * statistics.stdev(logs) / math.sqrt(3)))
    assert row.outliers == ""  # three runs this far apart are a spread, none stands out


def test_a_run_that_stands_out_is_named_with_its_repeat(tmp_path: Path) -> None:
    """Issue 19's best point: 222.6, 222.7 and 204.5 samples/s. The median stays 222.6, ci95
    is the interval the tests use (the slow run widens it), and the slow run is named."""
    write_rows(
        tmp_path,
        *(synthetic_row(repeat=r, training_time=80 / v) for r, v in enumerate([222.6, 222.7, 204.5])),
    )
    (row,) = summarize(load_results([tmp_path]).rows).itertuples()
    assert row.samples_per_s == pytest.approx(222.6)
    assert row.outliers == "repeat 2 -8%"
    assert f"{row.ci95:.1%}" == "12.2%"


def test_one_run_has_no_interval(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row())
    (row,) = summarize(load_results([tmp_path]).rows).itertuples()
    assert row.runs == 1 and row.ci95 != row.ci95 and row.outliers == ""


def test_steady_is_false_where_one_run_drifted_and_unknown_where_none_could_tell(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        *(synthetic_row(point_id="drift", repeat=r, window_steady=r != 1) for r in range(3)),
        synthetic_row(point_id="short", window_steady=None),
        synthetic_row(point_id="fine", window_steady=True),
    )
    summary = summarize(load_results([tmp_path]).rows).set_index("point_id")
    assert summary.loc["drift", "steady"] is False and summary.loc["drift", "unsteady_runs"] == 1
    assert summary.loc["fine", "steady"] is True and summary.loc["fine", "unsteady_runs"] == 0
    assert summary.loc["short", "steady"] != summary.loc["short", "steady"]  # NaN


def test_epoch_restarts_are_the_median_over_runs(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        *(
            synthetic_row(repeat=r, epoch_steps=4, epoch_restarts=n, epoch_restart_time=0.1 * n)
            for r, n in enumerate([2, 3, 2])
        ),
    )
    (row,) = summarize(load_results([tmp_path]).rows).itertuples()
    assert row.epoch_restarts == 2 and row.epoch_restart_time == pytest.approx(0.2) and row.epoch_steps == 4


def test_a_node_without_meta_takes_its_type_from_its_other_points_else_unknown(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(point_id="p", hostname="n1", device="cuda:0"))
    write_node_meta(tmp_path, "p", 0, "n1", "NVIDIA A100-SXM4-80GB", 8)
    write_rows(tmp_path, synthetic_row(point_id="late", hostname="n1"))  # no meta of its own
    write_rows(tmp_path, synthetic_row(point_id="lost", hostname="n9"))
    rows = load_results([tmp_path]).rows
    summary = summarize(rows, by="gpu", meta=load_meta(rows)).set_index("point_id")
    assert summary.loc["late", "group"] == "8× NVIDIA A100-SXM4-80GB"
    assert summary.loc["lost", "group"] == UNKNOWN_TYPE


def test_each_run_keeps_its_pass_labelled_by_its_sweep(tmp_path: Path) -> None:
    """The pass a run was measured in (`run_pass`), per sweep: two points' runs with the same
    label took turns on the machine; a run without one (Slurm) has None."""
    write_rows(tmp_path, *(synthetic_row(repeat=r, run_pass=4 + r) for r in range(2)))
    write_rows(tmp_path, synthetic_row(point_id="p2", repeat=0, run_pass=""))
    summary = summarize(load_results([tmp_path]).rows).set_index("point_id")
    assert summary.loc["p1", "run_passes"] == (f"{tmp_path}#4", f"{tmp_path}#5")
    assert summary.loc["p2", "run_passes"] == (None,)


def test_a_point_of_nodes_emulated_on_one_host_gets_a_table_of_its_own() -> None:
    """The local backend's point of slurm.nodes: 2 runs on one host: it is not one of that
    host's one-node points (a Slurm run of two nodes is n1+n2)."""
    rows = pd.DataFrame(
        [synthetic_row(point_id="one", nodes=1, hostname="vm").cells()]
        + [
            synthetic_row(point_id="two", rank=k, world_size=2, nodes=2, hostname="vm").cells()
            for k in (0, 1)
        ]
    )
    rows["sweep_dir"] = "s"
    nodes = add_nodes(rows).drop_duplicates("point_id").set_index("point_id")["node"]
    assert dict(nodes) == {"one": "vm", "two": "vm ×2 emulated nodes"}


def test_each_points_runs_are_gathered_in_their_order_whether_grouped_or_not() -> None:
    """_tuples (run_samples_per_s and the like): a point's values in the rows' order, as
    groupby(...).agg(tuple) gives them, when its rows are together and when they interleave."""
    index = pd.Index(["a", "b", "c"])
    values = pd.Series([1.0, 2.0, 3.0, 4.0, 5.0])
    grouped = _tuples(values, np.array([0, 0, 1, 2, 2]), index)
    assert grouped.tolist() == [(1.0, 2.0), (3.0,), (4.0, 5.0)]
    interleaved = _tuples(values, np.array([0, 1, 0, 2, 1]), index)
    assert interleaved.tolist() == [(1.0, 3.0), (2.0, 5.0), (4.0,)]
    expected = values.groupby(np.array([0, 1, 0, 2, 1])).agg(tuple).tolist()
    assert interleaved.tolist() == expected


def test_a_setting_varies_as_its_text_does() -> None:
    """varies: astype(str).nunique() > 1, whatever the dtype and the pandas (0.0 and -0.0 read
    apart; NaN is "nan" on pandas 2, missing on 3)."""
    cases = [
        [1, 1, 1],
        [1, 2],
        [True, True],
        [True, False],
        [2.0, 2.0, float("nan")],
        [float("nan"), float("nan")],
        [0.0, -0.0],
        [0.0, 0.0],
        [1.5, 1.5],
        ["a", "a"],
        ["a", None],
        [2, None],
    ]
    for values in cases:
        series = pd.Series(values)
        assert varies(series) == (series.astype(str).nunique() > 1), values
    assert varies(pd.Series([0.0, -0.0])) and not varies(pd.Series([3, 3]))
