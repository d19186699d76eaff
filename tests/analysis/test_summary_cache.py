"""A sweep's summary kept beside its consolidated rows (analysis/summary_cache.py): a report made
again takes it where the rows are the same, and never serves figures of rows that changed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import aggregate, consolidated, exact_frame, summary_cache
from analysis.load import load_results
from analysis.meta import load_meta
from analysis.render.report import build_report
from tests.analysis.conftest import synthetic_row, write_node_meta, write_rows


def _write_sweep(sweep: Path, hosts: tuple[str, ...]) -> None:
    """Four points, two ranks, three repeats; point 3's second repeat failed on rank 1."""
    for index in range(4):
        for rank in (0, 1):
            write_node_meta(sweep, f"p{index}", rank, hosts[index % len(hosts)], "NVIDIA A100-SXM4-80GB", 8)
            write_rows(
                sweep,
                *(
                    synthetic_row(
                        point_id=f"p{index}",
                        point_index=index,
                        num_workers=index,
                        rank=rank,
                        world_size=2,
                        repeat=repeat,
                        training_time=1.0 + index / 10 + repeat / 50 + rank / 1000,
                        hostname=hosts[index % len(hosts)],
                        **(
                            {"status": "failed", "error": "boom"}
                            if (index, repeat, rank) == (3, 1, 1)
                            else {}
                        ),
                    )
                    for repeat in (0, 1, 2)
                ),
            )


@pytest.fixture
def sweeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Two sweeps of four points on two hosts, consolidated however small (MIN_FILES is 1000)."""
    monkeypatch.setattr(consolidated, "MIN_FILES", 1)
    made = [tmp_path / "grid" / "20260101-000000", tmp_path / "grid" / "20260102-000000"]
    _write_sweep(made[0], ("n1", "n2"))
    _write_sweep(made[1], ("n2",))
    return made


def summarized(paths: list[Path], by: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The summary as a report makes it (sweep by sweep, kept), and of all the rows at once."""
    loaded = load_results(paths, refresh=True)
    meta = load_meta(loaded.rows, [], consolidated=True) if by == "gpu" else None
    rows = aggregate.add_nodes(loaded.rows, meta)
    summaries = summary_cache.summarize(rows, by, meta, keys=loaded.file_keys)
    summary_cache.recommendations(summaries)  # keeps the sweeps summarized now
    return summaries.summary, aggregate.summarize(rows, by=by, meta=meta)


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each summary made from now on (aggregate.summarize_grouped's calls)."""
    calls: list[int] = []
    real = aggregate.summarize_grouped

    def summarize_grouped(rows: pd.DataFrame) -> pd.DataFrame:
        calls.append(len(rows))
        return real(rows)

    monkeypatch.setattr(aggregate, "summarize_grouped", summarize_grouped)
    return calls


@pytest.mark.parametrize("by", ["node", "gpu"])
def test_each_sweep_summarized_on_its_own_is_the_summary_of_all_rows(sweeps: list[Path], by: str) -> None:
    made, whole = summarized(sweeps, by)
    assert exact_frame.same(made, whole) and len(whole) == 8
    assert all(summary_cache.path_of(s, by).is_file() for s in sweeps)
    kept, whole = summarized(sweeps, by)  # now from the files
    assert exact_frame.same(kept, whole)


def test_a_report_made_again_takes_the_kept_summary_and_says_the_same(
    sweeps: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = build_report(sweeps).text
    summarized_again = counted(monkeypatch)
    assert build_report(sweeps).text == first == build_report(sweeps, consolidated=False).text
    assert len(summarized_again) == 1  # only the slow path's, every row at once


def test_rows_added_or_rewritten_after_it_was_kept_are_counted(sweeps: list[Path]) -> None:
    build_report(sweeps)
    held = summary_cache.path_of(sweeps[0], "node").read_bytes()
    # A sweep still filling: a new point; and a resume's row appended to a point's rank file.
    write_rows(sweeps[0], synthetic_row(point_id="p9", point_index=9, training_time=9.5, hostname="n1"))
    write_rows(
        sweeps[0],
        synthetic_row(
            point_id="p0", point_index=0, rank=0, world_size=2, repeat=3, training_time=40.0, hostname="n1"
        ),
    )
    fast = build_report(sweeps).text
    assert fast == build_report(sweeps, consolidated=False).text
    assert "p9" in fast
    kept, whole = summarized(sweeps, "node")
    assert exact_frame.same(kept, whole)
    assert summary_cache.path_of(sweeps[0], "node").read_bytes() != held  # made again, for the new rows
    p0 = kept[(kept["point_id"] == "p0") & (kept["sweep_dir"] == str(sweeps[0]))]
    assert p0["runs"].tolist() == [4] and min(p0["run_samples_per_s"].iloc[0]) == pytest.approx(80 / 40.0)


def test_another_code_version_or_a_torn_file_makes_it_again(
    sweeps: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = build_report(sweeps).text
    calls = counted(monkeypatch)
    monkeypatch.setattr(summary_cache, "code_version", lambda: "another version of the analysis")
    assert build_report(sweeps).text == text and len(calls) == 2  # each sweep made again
    summary_cache.path_of(sweeps[1], "node").write_bytes(b"torn")
    assert build_report(sweeps).text == text and len(calls) == 3
    assert summary_cache.path_of(sweeps[1], "node").read_bytes() != b"torn"


def test_a_summary_that_would_not_read_back_exactly_is_not_kept(tmp_path: Path) -> None:
    frame = pd.DataFrame({"ci95": [0.1, float("nan")], "steady": [True, float("nan")]})
    assert exact_frame.same(frame, frame.copy())
    assert not exact_frame.same(frame, frame.assign(steady=[True, None]))  # pandas takes None for NaN
    assert not exact_frame.same(frame.assign(ci95=[0.0, 1.0]), frame.assign(ci95=[-0.0, 1.0]))
    odd = frame.assign(steady=pd.Series([np.float64(1.0), 2.0], dtype=object))  # a numpy scalar: not JSON's
    said = [summary_cache.Said("n1", str(tmp_path), "recommendation for n1", ("best: ...",))]
    assert not summary_cache._write(str(tmp_path), "node", "key", odd, said)
    assert not summary_cache.path_of(tmp_path, "node").exists()
    assert summary_cache._write(str(tmp_path), "node", "key", frame, said)
    kept = summary_cache._read(str(tmp_path), "node", "key")
    assert kept is not None and exact_frame.same(kept[0], frame) and kept[1] == said
    assert summary_cache._read(str(tmp_path), "node", "another key") is None


@pytest.mark.parametrize("by", ["node", "gpu"])
def test_the_recommendations_kept_say_what_those_made_say(sweeps: list[Path], by: str) -> None:
    """In the report's order (group, then sweep), with their titles and lines."""
    loaded = load_results(sweeps, refresh=True)
    meta = load_meta(loaded.rows, [], consolidated=True) if by == "gpu" else None
    rows = aggregate.add_nodes(loaded.rows, meta)
    made = summary_cache.recommendations(summary_cache.summarize(rows, by, meta, keys=loaded.file_keys))
    said = summary_cache.recommendations(summary_cache.summarize(rows, by, meta, keys=loaded.file_keys))
    assert all(isinstance(r, summary_cache.Said) for r in said) and len(said) == len(made) >= 2
    assert [(r.group, r.sweep_dir, r.title(), r.lines()) for r in said] == [
        (r.group, r.sweep_dir, r.title(), r.lines()) for r in made
    ]
