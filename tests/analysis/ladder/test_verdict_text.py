from __future__ import annotations

from pathlib import Path

from analysis.ladder.verdict_text import render_verdict, stage_between, times
from tests.analysis.ladder.test_verdict import STARVED, TWO, ladder


def test_stage_names_between_rungs() -> None:
    assert stage_between("device_batch", "host_batch", STARVED) == "host-to-device copy"
    assert stage_between("processed_sample", "raw_sample", STARVED) == "transforms"
    assert stage_between("processed_sample", "raw_sample", []) == "transforms"
    assert stage_between("transform:3", "transform:2", STARVED) == "transform 3/5 (RandomMask)"
    assert (
        stage_between("processed_sample", "transform:3", STARVED)
        == "transforms 4/5 (ConvertColor), 5/5 (Scale)"
    )
    assert stage_between("raw_sample", "full", STARVED) == "raw data loading"
    assert stage_between("raw_bytes", "full", STARVED) == "reading the stored bytes"
    assert stage_between("raw_sample", "raw_bytes", STARVED) == "decoding"
    assert (
        stage_between("host_batch", "full", []) == "collation and worker IPC + transforms + raw data loading"
    )


def test_a_given_loaders_stage_is_named_as_the_loader_as_given_not_a_split_it_cannot_see() -> None:
    whole = (
        "the loader as given (its reading, transforms, collation and hand-off: not split, the "
        "harness did not build it)"
    )
    assert stage_between("host_batch", "full", [], given=True) == whole
    assert stage_between("device_batch", "full", TWO, given=True) == whole
    # From a sample-level rung (a DataLoader the harness built over the loader's dataset): the
    # stages between, and whatever else the loader does.
    assert stage_between("raw_sample", "full", TWO, given=True) == (
        "raw data loading + the loader's own work (the loader as given, not split)"
    )
    # The rungs the harness built are split as ever.
    assert stage_between("host_batch", "processed_sample", TWO, given=True) == "collation and worker IPC"


def test_a_ratio_beyond_twice_is_written_as_a_multiple() -> None:
    assert [times(0.53), times(1.994), times(12.34)] == ["53%", "199%", "12.3×"]


def test_the_rung_table_shows_intervals_only_with_repeats(tmp_path: Path) -> None:
    rates = {"host_batch": 10.0, "processed_sample": 9.9, "full": 5.0}
    capacity = {"processed_sample": 500.0, "full": 5.1}
    once = render_verdict(ladder(tmp_path / "once", rates, capacity, names=TWO), wide=True).splitlines()
    assert once[1].split() == [
        "rung",
        "adds",
        "steps/s",
        "samples/s",
        "%",
        "of",
        "bound",
        "drop",
        "loader",
        "b/s",
        "loader",
        "share",
    ]
    thrice = render_verdict(
        ladder(tmp_path / "thrice", rates, capacity, repeats=3, names=TWO), "markdown", wide=True
    )
    header = [c.strip() for c in thrice.splitlines()[1].strip("|").split("|")]
    assert header == [
        "rung",
        "adds",
        "steps/s",
        "samples/s",
        "% of bound",
        "drop",
        "95% CI",
        "loader b/s",
        "loader share",
        "loader CI",
    ]
    assert thrice.splitlines()[-1].startswith(
        "the input pipeline does not keep up: full delivers 5.1 batches/s"
    )
    # By default: the stage, the rate and what the stage costs; the rest with --wide.
    readable = render_verdict(ladder(tmp_path / "thrice", rates, capacity, repeats=3, names=TWO))
    header = readable.splitlines()[1]
    assert header.split() == ["rung", "adds", "samples/s", "drop", "95%", "CI", "loader", "share"]
