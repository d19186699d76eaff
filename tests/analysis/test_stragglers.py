from __future__ import annotations

from pathlib import Path

import pytest

from analysis.load import load_results
from analysis.render.report import build_report
from analysis.stragglers import RULE, find_stragglers
from tests.analysis.conftest import synthetic_row, write_rows


def ranks(sweep: Path, waits_per_repeat: list[list[float]], **values: object) -> None:
    """DDP ranks in lockstep: equal training_time, chosen waits for data (loading_time)."""
    rows = [
        synthetic_row(rank=rank, world_size=len(waits), repeat=repeat, loading_time=w, **values)
        for repeat, waits in enumerate(waits_per_repeat)
        for rank, w in enumerate(waits)
    ]
    write_rows(sweep, *rows)


def test_a_rank_that_waits_for_data_is_flagged_though_training_times_are_equal(tmp_path: Path) -> None:
    """Under DDP the all-reduce hides rank 1's 69 ms wait behind equal training times."""
    ranks(tmp_path, [[0.003, 0.069], [0.0031, 0.070], [0.0029, 0.068]], step_time=0.1, training_time=1.0)
    (straggler,) = find_stragglers(load_results([tmp_path]).rows)
    assert straggler.kind == "rank" and straggler.who == "rank 1 on n1" and straggler.tested
    assert straggler.time == 0.069 and straggler.others == 0.003
    assert straggler.line().endswith(
        "point p1 (full): rank 1 on n1 waited 0.0690 s per step for data, the other ranks 0.0030 s "
        "(+66% of a 0.100 s step)"
    )


def test_with_one_repeat_a_waiting_rank_is_flagged_as_untested(tmp_path: Path) -> None:
    ranks(tmp_path, [[0.003, 0.069]], step_time=0.1)
    (straggler,) = find_stragglers(load_results([tmp_path]).rows)
    assert not straggler.tested and straggler.line().endswith("(untested: 1 run)")


@pytest.mark.parametrize(
    "waits",
    [
        [[0.003, 0.003], [0.003, 0.003]],  # equal waits
        [[0.003, 0.012], [0.003, 0.011]],  # 9 ms more: under 10 % of a 100 ms step
        [[0.003, 0.011], [0.003, 0.0125], [0.003, 0.010]],  # and repeated: decided, within 10 %
    ],
)
def test_equal_small_or_noisy_differences_in_the_wait_are_not(
    tmp_path: Path, waits: list[list[float]]
) -> None:
    ranks(tmp_path, waits, step_time=0.1)
    assert find_stragglers(load_results([tmp_path]).rows) == []


def test_a_wait_the_repeats_cannot_tell_apart_is_listed_as_undecided(tmp_path: Path) -> None:
    """22 ms more on average (+22 % of a 100 ms step), but the repeats range -5 .. +40 %: not a
    straggler, nor nothing: undecided, with the repeats that would decide."""
    ranks(tmp_path, [[0.010, 0.040], [0.050, 0.045], [0.020, 0.060]], step_time=0.1)
    (straggler,) = find_stragglers(load_results([tmp_path]).rows)
    assert straggler.who == "rank 1 on n1" and straggler.tested and straggler.undecided
    assert straggler.line().endswith(
        "(+25% of a 0.100 s step) (undecided: 95% CI -35.0% .. +82.5% of a step, n=3; about 27 repeats would decide)"
    )


def test_the_waiting_ranks_of_a_multi_node_run_are_flagged_with_their_node(tmp_path: Path) -> None:
    hosts = ["a", "a", "b", "b", "c", "c"]
    rows = [
        synthetic_row(
            rank=r,
            world_size=6,
            hostname=h,
            jobid="9_1",
            step_time=0.1,
            loading_time=0.05 if h == "c" else 0.005,
        )
        for r, h in enumerate(hosts)
    ]
    write_rows(tmp_path, *rows)
    found = find_stragglers(load_results([tmp_path]).rows)
    assert [s.who for s in found] == ["rank 4 on c", "rank 5 on c"]
    report = build_report([tmp_path])
    assert "2 straggler(s):\n" in report.text and f"  (rule: {RULE})" in report.text
    assert "rank 4 on c waited 0.0500 s per step for data, the other ranks 0.0050 s" in report.text


def gather(tmp_path: Path, runs: list[tuple[str, list[float]]]) -> Path:
    """Separate runs (no Slurm: one host each) of one point, gathered in one sweep folder."""
    sweep = tmp_path / "one"
    (sweep / "points" / "p1").mkdir(parents=True)
    for n, (host, times) in enumerate(runs):
        copy = tmp_path / f"copy{n}"
        write_rows(
            copy, *(synthetic_row(hostname=host, repeat=r, training_time=t) for r, t in enumerate(times))
        )
        (copy / "points" / "p1" / "rank0.csv").rename(sweep / "points" / "p1" / f"rank{n}.csv")
    return sweep


def test_the_same_point_run_on_a_slower_node_is_flagged_untested_with_one_run(tmp_path: Path) -> None:
    sweep = gather(tmp_path, [("x", [1.0]), ("y", [1.02]), ("z", [1.3])])
    (straggler,) = find_stragglers(load_results([sweep]).rows)
    assert straggler.who == "node z" and straggler.others == pytest.approx(1.01) and not straggler.tested
    assert straggler.line().endswith("node z took 1.300 s, the other nodes 1.010 s (+29%) (untested: 1 run)")


def test_a_slower_node_is_flagged_when_its_runs_call_it_and_not_when_they_do_not(tmp_path: Path) -> None:
    slow = gather(tmp_path / "slow", [("x", [1.0, 1.01, 0.99]), ("z", [1.3, 1.31, 1.29])])
    (straggler,) = find_stragglers(load_results([slow]).rows)
    assert straggler.who == "node z" and straggler.tested
    noisy = gather(tmp_path / "noisy", [("x", [1.0, 1.6, 0.9]), ("z", [1.3, 1.0, 1.7])])
    (undecided,) = find_stragglers(load_results([noisy]).rows)
    assert undecided.who == "node z" and undecided.undecided
    assert undecided.line().endswith(
        "(+30%) (undecided: 95% CI -47.2% .. +133.9%, n=3; over 100 repeats would decide)"
    )
