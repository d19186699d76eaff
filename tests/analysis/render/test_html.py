from __future__ import annotations

import re
from pathlib import Path

from analysis.render import html
from analysis.render.report import build_report
from tests.analysis.conftest import synthetic_row, write_rows


def test_a_table_escapes_its_cells_and_scrolls_in_its_own_box() -> None:
    table = html.table(["rung", "adds"], [["full", "<raw> & decode"]], "ladder")
    assert table.startswith('<div class="scroll"><table class="ladder">')
    assert "<td>&lt;raw&gt; &amp; decode</td>" in table
    assert ".scroll { overflow-x: auto;" in html.STYLE


def test_the_page_has_no_external_resource() -> None:
    page = html.page("t <1>", [html.Section("s", html.figure(b"\x89PNG", "a plot"))])
    assert "<title>t &lt;1&gt;</title>" in page and 'src="data:image/png;base64,' in page
    assert not re.search(r'(src|href)="(https?:)?//', page) and "<link" not in page


def test_the_ladder_and_the_recommendation_are_tables_not_preformatted_text(tmp_path: Path) -> None:
    rungs = (("device_batch", 0.5), ("host_batch", 0.55), ("raw_sample", 0.8), ("full", 1.1))
    write_rows(tmp_path, *(synthetic_row(point_id="lad", rung=r, training_time=t) for r, t in rungs))
    page = build_report([tmp_path], "html").text
    assert "<pre>" not in page.split("<h2>notes</h2>")[0]  # only the closing notes are preformatted
    ladder = page.split("<h3>caching ladder, node n1, point lad</h3>")[1]
    assert ladder.startswith(
        '\n<div class="scroll"><table class="ladder"><thead><tr><th>rung</th><th>adds</th>'
    )
    assert "<td>raw_sample</td>" in ladder and "<td>full</td>" in ladder
    assert '<p class="verdict">' in ladder
    recommendation = page.split("<h3>recommendation for n1")[1]
    assert '<table class="text">' in recommendation and "<td>best</td>" in recommendation
