from __future__ import annotations

from pathlib import Path

import pytest

from analysis.load import load_results
from analysis.report import build_report
from analysis.stragglers import RULE, find_stragglers
from tests.analysis.conftest import synthetic_row, write_rows


def ranks(sweep: Path, times_per_repeat: list[list[float]], **values: object) -> None:
    rows = [
        synthetic_row(rank=rank, world_size=len(times), repeat=repeat, training_time=t, **values)
        for repeat, times in enumerate(times_per_repeat)
        for rank, t in enumerate(times)
    ]
    write_rows(sweep, *rows)


def test_a_rank_much_slower_than_the_others_is_flagged(tmp_path: Path) -> None:
    ranks(tmp_path, [[1.0, 1.02, 0.99, 1.5]])
    (straggler,) = find_stragglers(load_results([tmp_path]).rows)
    assert straggler.kind == "rank" and straggler.who == "rank 3 on n1"
    assert straggler.time == 1.5 and straggler.others == 1.0
    assert straggler.line().endswith(
        "point p1 (full): rank 3 on n1 took 1.500 s, the other ranks 1.000 s (+50%)"
    )


@pytest.mark.parametrize(
    "times",
    [
        [[1.0, 1.0, 1.0, 1.09]],  # under 10 %
        [[1.0, 1.0, 1.0, 1.3], [1.0, 1.6, 1.0, 1.3]],  # 30 % slower, but repeats spread by 0.6 s
    ],
)
def test_a_rank_within_10_percent_or_within_the_spread_is_not(
    tmp_path: Path, times: list[list[float]]
) -> None:
    ranks(tmp_path, times)
    assert find_stragglers(load_results([tmp_path]).rows) == []


def test_a_slow_node_of_a_multi_node_run_is_flagged(tmp_path: Path) -> None:
    hosts = ["a", "a", "b", "b", "c", "c"]
    rows = [
        synthetic_row(rank=r, world_size=6, hostname=h, jobid="9_1", training_time=1.4 if h == "c" else 1.0)
        for r, h in enumerate(hosts)
    ]
    write_rows(tmp_path, *rows)
    found = find_stragglers(load_results([tmp_path]).rows)
    assert [s.who for s in found] == ["node c", "rank 4 on c", "rank 5 on c"]
    report = build_report([tmp_path])
    assert "3 straggler(s):\n" in report.text and f"  (rule: {RULE})" in report.text
    assert "point p1 (full): node c took 1.400 s, the other nodes 1.000 s (+40%)" in report.text


def test_the_same_point_run_on_a_slower_node_is_flagged(tmp_path: Path) -> None:
    """Separate runs (no Slurm: one host each) of one point in one sweep."""
    for n, (host, t) in enumerate((("x", 1.0), ("y", 1.02), ("z", 1.3))):
        write_rows(tmp_path / f"copy{n}", synthetic_row(hostname=host, training_time=t))
    # the three copies are three sweeps; gather them in one
    sweep = tmp_path / "one"
    for n in range(3):
        src = tmp_path / f"copy{n}" / "points" / "p1" / "rank0.csv"
        (sweep / "points" / "p1").mkdir(parents=True, exist_ok=True)
        src.rename(sweep / "points" / "p1" / f"rank{n}.csv")
    (straggler,) = find_stragglers(load_results([sweep]).rows)
    assert straggler.who == "node z" and straggler.others == pytest.approx(1.01)
