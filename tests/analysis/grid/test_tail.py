"""The tail of the wait for data: flagged where heavy, and the axis that absorbs it named from the data."""

from __future__ import annotations

from pathlib import Path

from analysis.aggregate import summarize
from analysis.grid.tail import heavy_tailed, tail_notes
from analysis.load import load_results
from analysis.render.report import build_report
from analysis.render.tables import loader_tables, render
from tests.analysis.conftest import synthetic_row, write_rows

STEP = 0.1  # the synthetic rows' step time, seconds


def grid(tmp_path: Path, p99: dict[tuple[int, int], float], share: float = 0.05, **same: object) -> Path:
    """A (num_workers, prefetch_factor) grid of 50-step windows with a 1 ms median wait and the
    given p99 waits; `same`: columns every row shares."""
    rows = []
    for n, ((workers, prefetch), tail) in enumerate(sorted(p99.items())):
        rows.append(
            synthetic_row(
                point_id=f"w{workers}p{prefetch}",
                point_index=n,
                num_workers=workers,
                prefetch_factor=prefetch,
                loading_time=0.001 + tail / 50,
                loading_time_p50=0.001,
                loading_time_p95=0.001,
                loading_time_p99=tail,
                waited_share=share if tail > STEP else 0.0,
                step_time=STEP,
                **{"steps": 50, **same},
            )
        )
    write_rows(tmp_path, *rows)
    return tmp_path


def shown(sweep: Path):
    return summarize(load_results([sweep]).rows)


def test_prefetch_factor_named_when_it_absorbs_the_stalls_and_num_workers_does_not(tmp_path: Path) -> None:
    # A 300 ms stall now and then: 8 batches ahead per worker hide it, a second worker does not.
    sweep = grid(tmp_path, {(1, 1): 0.300, (1, 8): 0.004, (2, 1): 0.280, (2, 8): 0.003})
    notes = tail_notes(shown(sweep))
    assert notes[0].startswith(
        "the wait for data is heavy-tailed in 2 of 4 row(s): w1p1 (p50 1.0 ms, p99 300.0 ms, mean 7.0 ms), "
        "w2p1 (p50 1.0 ms, p99 280.0 ms, mean 6.6 ms); steps that wait far longer than most now and then"
    )
    assert notes[1] == (
        "in these runs prefetch_factor absorbs it (p99 wait ×0.01 at its largest value); "
        "prefetch_factor 1 -> 8: p99 wait 290.0 ms -> 3.5 ms (median of 2 comparison(s) of points that differ only in it); "
        "num_workers 1 -> 2: p99 wait 152.0 ms -> 141.5 ms (median of 2 comparison(s) of points that differ only in it)"
    )


def test_num_workers_named_when_it_is_the_one_that_absorbs(tmp_path: Path) -> None:
    sweep = grid(tmp_path, {(1, 2): 0.300, (4, 2): 0.010})
    (note,) = tail_notes(shown(sweep))[1:]
    assert note.startswith("in these runs num_workers absorbs it (p99 wait ×0.03 at its largest value); ")
    assert note.endswith(
        "vary prefetch_factor to see whether it absorbs the stalls (prefetch_factor: the batches each worker prepares ahead)"
    )


def test_neither_named_when_neither_halves_the_tail(tmp_path: Path) -> None:
    sweep = grid(tmp_path, {(1, 1): 0.300, (1, 8): 0.250, (2, 1): 0.290, (2, 8): 0.240})
    assert tail_notes(shown(sweep))[1].startswith(
        "in these runs neither prefetch_factor nor num_workers absorbs it; "
    )


def test_jitter_of_a_loader_that_keeps_up_is_no_tail(tmp_path: Path) -> None:
    # p99 20× p50, but 20 ms is a fifth of the 100 ms step: nothing a user would pay for.
    sweep = grid(tmp_path, {(1, 2): 0.020, (2, 2): 0.002})
    summary = shown(sweep)
    assert not heavy_tailed(summary).any()
    assert tail_notes(summary) == []
    table = loader_tables(summary)["n1"]
    assert "loading_time_p99" not in table and "waited_share" in table


def test_a_short_window_is_not_judged_and_epoch_ends_are_named_as_a_cause(tmp_path: Path) -> None:
    # 10 steps: p99 is the longest step, which says nothing of a tail.
    assert not heavy_tailed(shown(grid(tmp_path / "short", {(1, 1): 0.3, (1, 8): 0.004}, steps=10))).any()
    notes = tail_notes(shown(grid(tmp_path / "restarts", {(1, 1): 0.3, (1, 8): 0.004}, epoch_restarts=1)))
    assert notes[0] == (
        "the wait for data is heavy-tailed in 1 of 2 row(s): w1p1 (p50 1.0 ms, p99 300.0 ms, mean 7.0 ms; "
        "1 epoch end(s) in the window); steps that wait far longer than most now and then: erratic storage, "
        "a machine busy with other work, epoch ends (a new iterator, new workers unless persistent_workers); "
        "the mean loading_time hides them"
    )


def test_the_table_shows_the_tail_and_the_report_its_caveat(tmp_path: Path) -> None:
    sweep = grid(tmp_path, {(1, 1): 0.300, (1, 8): 0.004})
    table = loader_tables(shown(sweep))["n1"]
    assert list(table.columns[-2:]) == ["loading_time_p99", "waited_share"]
    _header, _rule, *lines = render(table, "terminal").splitlines()
    assert [line.split()[-2:] for line in lines] == [["0.300000", "5%"], ["0.004000", "0%"]]
    text = build_report([sweep]).text
    assert "the wait for data is heavy-tailed in 1 of 2 row(s): w1p1" in text
    assert "in these runs prefetch_factor absorbs it" in text
    assert "in these runs prefetch_factor absorbs it" in build_report([sweep], "html").text


def test_results_without_the_tail_columns_still_load_and_show_no_tail(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row())  # an older harness's row: no percentiles
    summary = shown(tmp_path)
    assert tail_notes(summary) == []
    assert "waited_share" not in loader_tables(summary)["n1"]


def test_a_periodic_wait_is_named_as_bursts_never_as_erratic_storage(tmp_path: Path) -> None:
    """Workers in step deliver in bursts of 4: one step in 4 waits 60 ms, the others none. The
    p99 is far above the p50, as in a heavy tail, but the rank saw the period: the note says
    what the wait is, and the window of 8 steps (2 periods) is said to be too short."""
    periodic = synthetic_row(
        point_id="bursts",
        loading_time=0.015,
        loading_time_p50=0.0003,
        loading_time_p95=0.060,
        loading_time_p99=0.060,
        waited_share=0.25,
        step_time=0.020,
        steps=24,
        delivery_period=4,
    )
    short = synthetic_row(**{**periodic.cells(), "point_id": "short", "point_index": 1, "steps": 8})
    write_rows(tmp_path, periodic, short)
    rows = shown(tmp_path)
    assert not heavy_tailed(rows).any()
    notes = tail_notes(rows)
    assert not any("erratic" in n or "heavy-tailed" in n for n in notes)
    assert notes[0] == (
        "the wait for data is periodic in 2 of 2 row(s) (bursts, short): the loader delivers in bursts "
        "of 4 batches (workers of equal cost in step), and the step waits between bursts: the loader's "
        "rhythm, not a tail; it is short on average (more workers or cheaper batches raise its rate), "
        "and each window covers whole periods"
    )
    assert notes[1] == (
        "short: the window of 8 steps covers 2 period(s) of the loader's bursts of 4: too short to read "
        "its steady rate; set measure.steps: 12 or more, or measure.seconds"
    )
