from __future__ import annotations

import json
from pathlib import Path

from harness_schema import rows as results
from tests.fixtures.calls import counted


def row(rung: str, repeat: int, rank: int = 0, status: str = "ok") -> results.RungRow:
    values = {c: "" for c in results.ROW_COLUMNS}
    values.update(point_id="p", point_index=0, rung=rung, repeat=repeat, rank=rank, status=status)
    return results.RungRow.from_cells(values)


def test_rank_writer_appends_rows_with_the_schema_header(tmp_path: Path) -> None:
    writer = results.RankWriter(tmp_path, rank=1)
    writer.append(row("full", 0, rank=1))
    writer.append(row("full", 1, rank=1, status="failed"))
    lines = (tmp_path / "rank1.csv").read_text().splitlines()
    assert lines[0] == ",".join(results.ROW_COLUMNS)
    assert [r["status"] for r in results.read_rows(tmp_path / "rank1.csv")] == ["ok", "failed"]


def test_point_complete_needs_every_rank_and_every_repeat(tmp_path: Path) -> None:
    r0 = results.RankWriter(tmp_path, 0)
    r0.append(row("full", 0))
    r0.append(row("full", 1))
    assert not results.point_complete(tmp_path, ["full"], repeats=2, world_size=2)  # rank 1 missing
    r1 = results.RankWriter(tmp_path, 1)
    r1.append(row("full", 0, rank=1))
    assert results.completed_units(tmp_path, 2) == {("full", 0)}
    r1.append(row("full", 1, rank=1, status="failed"))
    assert results.point_complete(tmp_path, ["full"], repeats=2, world_size=2)


def test_a_mapping_in_every_row_is_written_once_and_each_other_as_itself() -> None:
    """plan.csv holds the spec's mappings in every point's row (issue #36: ten json.dumps a
    point); one object is written once, and an equal or another mapping as its own."""
    shared = {"size": 64, "image_size": 8}
    rows = [
        {"a": shared, "b": [1, 2]},
        {"a": shared, "b": None},
        {"a": {"size": 64, "image_size": 8}, "b": ()},
    ]
    with counted(dumps=json.dumps) as calls:
        text = results.csv_text(rows, ["a", "b"])
    assert text.splitlines()[1:] == [
        '"{""image_size"": 8, ""size"": 64}","[1, 2]"',
        '"{""image_size"": 8, ""size"": 64}",',
        '"{""image_size"": 8, ""size"": 64}",[]',
    ]
    assert calls == {"dumps": 4}
