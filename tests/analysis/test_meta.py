from __future__ import annotations

from pathlib import Path

from analysis.load import load_results
from analysis.meta import load_meta
from tests.analysis.conftest import synthetic_row, write_node_meta, write_rows


def test_meta_is_read_per_point_and_rank_and_a_corrupt_one_is_reported(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(point_id="a"), synthetic_row(point_id="b"))
    write_node_meta(tmp_path, "a", 0, "n1", "NVIDIA A100-SXM4-80GB", 8)
    (tmp_path / "points" / "b" / "meta-rank0.json").write_text("{not json")
    problems: list[str] = []
    meta = load_meta(load_results([tmp_path]).rows, problems)
    assert meta[["point_id", "device_name", "gpu_count"]].values.tolist() == [
        ["a", "NVIDIA A100-SXM4-80GB", 8]
    ]
    (problem,) = problems
    assert problem.startswith(f"{tmp_path / 'points' / 'b' / 'meta-rank0.json'}: unreadable (JSONDecodeError")
    assert problem.endswith("; node type unknown")
