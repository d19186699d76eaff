from __future__ import annotations

import base64
import re
from pathlib import Path

from analysis.render.report import build_report
from analysis.render.tables import JEAN_ZAY_COLUMNS
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.storage.sweep import create_sweep
from tests.analysis.conftest import UNSAMPLED, synthetic_row, write_rows, write_timeline
from tests.conftest import TINY_WORKLOAD


def planned_sweep(root: Path) -> tuple[Path, list[str]]:
    """A sweep folder as the harness creates it (spec, plan), 3 points × 2 repeats, no rows yet."""
    spec = "name: partial\n" + TINY_WORKLOAD.replace("repeats: 1", "repeats: 2")
    plan = expand(parse_spec(spec + "loader: {num_workers: [0, 1, 2]}\n" + UNSAMPLED))
    return create_sweep(plan, root, sweep_id="s"), [p.id for p in plan.points]


def test_a_partial_rank_file_a_missing_rank_and_unrun_points_are_reported(tmp_path: Path) -> None:
    sweep, ids = planned_sweep(tmp_path)
    write_rows(sweep, *(synthetic_row(point_id=ids[0], repeat=r) for r in (0, 1)))  # complete
    write_rows(
        sweep, synthetic_row(point_id=ids[1], repeat=0, rank=0, world_size=2)
    )  # 1 of 2 rows, rank 1 missing
    report = build_report([sweep])
    points = sweep / "points"
    assert report.problems == 2 and report.points == 2
    assert (
        f"  {points / ids[1]}: no rows from rank(s) 1 of 2 (rank1.csv missing or unreadable, run n1); the figures are those of the ranks present"
        in report.text
    )
    assert (
        f"  {points / ids[1] / 'rank0.csv'}: 1 of 2 (rung, repeat) rows; the run stopped early (time limit, crash) or is still running"
        in report.text
    )
    assert (
        f"{sweep}: 1 of 3 planned point(s) have no rows (not run yet, or their files are missing): {ids[2]}"
        in report.text
    )


def test_a_corrupt_plan_is_reported_and_the_tables_still_print(tmp_path: Path) -> None:
    sweep, ids = planned_sweep(tmp_path)
    write_rows(sweep, synthetic_row(point_id=ids[0]))
    (sweep / "plan.json").write_text("{")
    report = build_report([sweep])
    assert report.text.startswith("node n1\nsame in every row: batch_size 8, num_workers 2,")
    assert "\njobid " in report.text
    assert f"{sweep / 'plan.json'}: unreadable (not JSON: line 1 column 2: " in report.text


def test_the_html_report_is_one_self_contained_page(real_sweep: Path) -> None:
    page = build_report([real_sweep], "html").text
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<table>") == 2 and "<h2>node node-a</h2>" in page
    assert "recommendation for node-a" in page
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 2  # throughput per node; the fixture has no samples for a timeline
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "<script" not in page and 'src="http' not in page and "<link" not in page
    assert not (real_sweep / "plots").exists()


def test_the_html_report_embeds_a_timeline(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(point_id="a"))
    write_timeline(tmp_path / "points" / "a")
    page = build_report([tmp_path], "html").text
    assert "timeline of point a, rank 0" in page
    assert not (tmp_path / "plots").exists()  # embedded only: nothing written unless asked


def test_markdown_and_latex_carry_the_recommendation(real_sweep: Path) -> None:
    markdown = build_report([real_sweep], "markdown").text
    assert "### node node-a\n\nsame in every row: batch_size 8, " in markdown and "\n- best: " in markdown
    assert "non_blocking False, drop_last False\n\n| jobid " in markdown  # a paragraph, then the table
    latex = build_report([real_sweep], "latex").text
    assert "% recommendation for node-a" in latex and "\\toprule" in latex
    csv = build_report([real_sweep], "csv").text
    assert "best" not in csv and csv.startswith("# node node-a\njobid,num_workers")


def test_the_table_notes_say_when_an_epoch_is_shorter_than_the_window_and_windows_drifted(
    tmp_path: Path,
) -> None:
    write_rows(
        tmp_path,
        *(
            synthetic_row(
                point_id="short",
                repeat=r,
                steps=20,
                epoch_steps=6,
                epoch_restarts=3,
                epoch_restart_time=0.25,
                window_steady=r != 2,
            )
            for r in range(3)
        ),
        synthetic_row(point_id="long", steps=20, epoch_steps=500, epoch_restarts=0, window_steady=True),
    )
    text = build_report([tmp_path]).text
    assert (
        "short: epoch shorter than the window (6 batches per rank, 20 steps measured): "
        "3 worker restart(s) inside it (0.250 s of the window)"
    ) in text
    assert "long: epoch" not in text
    assert (
        "window not steady (step time drifted between its halves beyond the noise): short (1 of 3 runs)"
        in text
    )
    # under the table, before the recommendation
    assert text.index("epoch shorter") < text.index("recommendation for n1")
    markdown = build_report([tmp_path], "markdown").text
    assert "\n- short: epoch shorter than the window" in markdown


def test_fp16_rows_beside_others_carry_the_grad_scaler_caveat(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        synthetic_row(point_id="a", device="cuda:0", amp="fp16"),
        synthetic_row(point_id="b", point_index=1, device="cuda:0", amp="bf16"),
    )
    text = build_report([tmp_path]).text
    assert "amp fp16: the GradScaler reads its found-inf flag with .item() every step" in text
    write_rows(tmp_path / "bf16", synthetic_row(point_id="c", device="cuda:0", amp="bf16"))
    assert "GradScaler" not in build_report([tmp_path / "bf16"]).text


def test_a_run_that_stands_out_is_named_under_its_table(tmp_path: Path) -> None:
    """Issue 19's best point (runs 222.6, 222.7, 204.5): the table's median hides the slow run,
    so the note names it, and says where it went (the median, and ci95, which it widens)."""
    write_rows(
        tmp_path,
        *(synthetic_row(repeat=r, training_time=80 / v) for r, v in enumerate([222.6, 222.7, 204.5])),
        *(synthetic_row(point_id="p2", point_index=1, repeat=r, training_time=80 / 150) for r in range(3)),
    )
    assert (
        "runs that stand out from their point's others (% from its median): p1 repeat 2 -8%; kept in "
        "samples_per_s (the median) and in ci95, which they widen: more repeats tell a stall from the "
        "configuration's own speed"
    ) in build_report([tmp_path]).text.splitlines()


def test_the_html_recommendation_has_a_row_for_an_undecided_configuration(tmp_path: Path) -> None:
    """An undecided cheaper configuration is a row of the recommendation's table, as the best,
    the cheapest and the baseline are, not a paragraph under it."""
    for index, (workers, rates) in enumerate(((0, [60.0, 35.0, 62.0]), (2, [101.0, 60.0, 104.0]))):
        write_rows(
            tmp_path,
            *(
                synthetic_row(
                    point_id=f"p{index}",
                    point_index=index,
                    num_workers=workers,
                    repeat=r,
                    training_time=80 / v,
                )
                for r, v in enumerate(rates)
            ),
        )
    write_rows(
        tmp_path,
        *(
            synthetic_row(point_id="p2", point_index=2, num_workers=4, repeat=r, training_time=80 / v)
            for r, v in enumerate([187.0, 120.0, 195.0])
        ),
    )
    page = build_report([tmp_path], "html").text
    recommendation = page.split("<h3>recommendation for n1")[1].split("</table>")[0]
    assert "<td>undecided, cheaper</td><td>p1 num_workers=2</td>" in recommendation


def test_auto_windows_that_stopped_at_their_most_are_named_under_the_table(tmp_path: Path) -> None:
    """measure.steps: auto: a window that reached measure.max_seconds with its rate's relative
    standard error above 2 % (window_rse) is named, with its worst error; a precise one is not."""
    write_rows(
        tmp_path,
        *(synthetic_row(point_id="noisy", repeat=r, window_rse=0.041 if r else 0.015) for r in range(3)),
        *(synthetic_row(point_id="quiet", repeat=r, window_rse=0.004) for r in range(3)),
    )
    text = build_report([tmp_path]).text
    assert (
        "auto window stopped at measure.max_seconds with its step rate's relative standard error above "
        "2%: noisy (2 of 3 runs, up to 4.1%); raise measure.max_seconds, or compare with more repeats"
    ) in text
    assert "quiet (" not in text


def test_the_traces_of_a_profiled_point_are_named_whether_its_sweep_or_the_point_is_given(
    tmp_path: Path,
) -> None:
    # The listing of the point folders finds profile/ (no second look into every point folder);
    # a point given alone is looked up in its sweep as before.
    sweep, ids = planned_sweep(tmp_path)
    write_rows(sweep, *(synthetic_row(point_id=i, repeat=r) for i in ids for r in (0, 1)))
    profile = sweep / "points" / ids[1] / "profile"
    for folder in (profile, profile / "cycle0", profile / "cycle1"):
        folder.mkdir(exist_ok=True)
        (folder / "rank0.pt.trace.json").write_text("{}")
    (sweep / "points" / ids[2] / "profile").mkdir()  # no trace in it: not named
    named = [f"profiler traces (1): {f}" for f in (profile, profile / "cycle0", profile / "cycle1")]
    for given in (sweep, tmp_path, sweep / "points" / ids[0]):
        lines = [line.split("  (")[0] for line in build_report([given]).text.splitlines()]
        assert [line for line in lines if line.startswith("profiler traces")] == named, given


def _table_lines(text: str, title: str) -> tuple[list[str], list[str]]:
    """A group's section up to its first blank line: the lines that say what every row shares
    (wrapped at 120 columns), and the table's (the header, the rule and the rows)."""
    lines = text.split(f"{title}\n", 1)[1].splitlines()
    lines = lines[: lines.index("")] if "" in lines else lines
    header = next(n for n, line in enumerate(lines) if line.startswith("jobid"))
    return lines[:header], lines[header:]


def test_the_table_a_person_reads_fits_120_columns_and_says_once_what_every_row_shares(
    real_sweep: Path,
) -> None:
    """A real sweep (num_workers 0, 1, 2): the settings that vary, then the figures that answer;
    the others once, above; every column with wide, as the CSV has them."""
    (above,), (header, rule, *rows) = _table_lines(build_report([real_sweep]).text, "node node-a")
    assert above == (
        "same in every row: batch_size 8, persistent_workers False, pin_memory False, "
        "non_blocking False, drop_last False"
    )
    assert header.split() == [
        "jobid",
        "num_workers",
        "prefetch_factor",
        "samples_per_s",
        "loading_time",
        "waited_share",
    ]
    assert len(rows) == 3 and max(len(line) for line in [above, header, rule, *rows]) <= 120
    wide_header = _table_lines(build_report([real_sweep], wide=True).text, "node node-a")[1][0]
    csv_header, *csv_rows = build_report([real_sweep], "csv").text.split("\n\n")[0].splitlines()[1:]
    assert wide_header.split() == csv_header.split(",")
    assert not any("%" in row for row in csv_rows)  # every digit, for a program: 0.25, not 25%
    assert wide_header.split()[:12] == [
        *JEAN_ZAY_COLUMNS,
        "first_step_loading_time",
        "samples_per_s",
        "cpu_memory_gb",
    ]


def test_a_two_rank_table_keeps_the_course_order_and_fits_120_columns(tmp_path: Path) -> None:
    """Two ranks, three repeats, a grid of num_workers and pin_memory: 18 columns wide (no
    sampled figures here), and the course's columns keep their order in the one a person reads."""
    write_rows(
        tmp_path,
        *(
            synthetic_row(
                point_id=f"w{workers}p{pin:d}",
                num_workers=workers,
                pin_memory=pin,
                rank=rank,
                world_size=2,
                repeat=repeat,
                window_steady=not (workers == 0 and repeat == 1),
                training_time=1.0 + 0.01 * repeat + 0.1 * workers,
                loading_time=0.01 + 0.02 * rank,
            )
            for workers in (0, 4)
            for pin in (False, True)
            for rank in (0, 1)
            for repeat in range(3)
        ),
    )
    nothing_above, (wide, *_) = _table_lines(build_report([tmp_path], wide=True).text, "node n1")
    assert not nothing_above and len(wide.split()) == 18 and len(wide) > 200
    above, (header, *rows) = _table_lines(build_report([tmp_path]).text, "node n1")
    said = " ".join(line.strip() for line in above)
    assert said.startswith("same in every row: batch_size 8, persistent_workers False,")
    assert said.endswith(", runs 3, ranks 2")
    columns = header.split()
    assert columns == [
        *("jobid", "num_workers", "pin_memory", "samples_per_s", "loading_time"),
        *("ci95", "steady"),
    ]
    course = [c for c in columns if c in JEAN_ZAY_COLUMNS]
    assert course == sorted(course, key=JEAN_ZAY_COLUMNS.index)
    assert max(len(line) for line in [*above, header, *rows]) <= 120
    assert sum(" no" in row for row in rows) == 2  # the unsteady windows of num_workers=0
