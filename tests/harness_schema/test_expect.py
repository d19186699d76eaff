"""The spec's `expect:` section as harness_schema/expect.py declares it: what each entry reads as,
the filters it takes, and the figures the analysis can check. The errors a spec's author sees
are in test_spec.py; the checks against results in tests/analysis/test_expect.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis.aggregate import summarize
from analysis.load import load_results
from harness_schema.expect import FIGURES, PLACES, Expectation, parse_expect
from tests.analysis.conftest import synthetic_row, write_rows


class Refused(Exception):
    pass


def fail(dotted: str, message: str) -> Exception:
    """spec.py's `fail`, without the file and line: the dotted field, then the message."""
    return Refused(f"{dotted}: {message}")


def parsed(*entries: dict[str, Any]) -> tuple[Expectation, ...]:
    return parse_expect(list(entries), fail, rungs=("device_batch", "full"), steps=())


def test_each_entry_reads_as_its_bound_and_where_it_holds() -> None:
    labels = [
        e.label()
        for e in parsed(
            {"max_loading_time": 0.010, "rung": "full"},
            {"min_samples_per_s": 500, "loader.num_workers": 8},
            {"min_gpu_util": 90.5, "node": "gpu12", "batch_size": 64},
        )
    ]
    assert labels == [
        "max_loading_time <= 0.01 (rung=full)",
        "min_samples_per_s >= 500 (num_workers=8)",
        "min_gpu_util >= 90.5 (node=gpu12, batch_size=64)",
    ]


def test_a_setting_filter_by_its_short_or_dotted_name_is_the_same_filter() -> None:
    (short,) = parsed({"min_samples_per_s": 500, "num_workers": 8})
    (dotted,) = parsed({"min_samples_per_s": 500, "loader.num_workers": 8})
    assert short == dotted and short.filters == {"num_workers": 8}
    assert short.bound == 500.0 and isinstance(short.bound, float)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"max_loading_time": 0.01, "point": 12345678},
            "expect[0].point: 12345678 is not allowed; expected a string (quote an id of digits)",
        ),
        (
            {"min_samples_per_s": True},
            "expect[0].min_samples_per_s: True is not allowed; expected a number",
        ),
        (
            {"min_samples_per_s": 1, "pin_memory": "yes"},
            "expect[0].pin_memory: 'yes' is not allowed; expected true or false",
        ),
    ],
)
def test_a_bad_entry_names_its_field(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(Refused) as refused:
        parsed(entry)
    assert str(refused.value) == message


def test_no_expect_section_is_no_expectation() -> None:
    assert parse_expect(None, fail) == ()


def test_every_figure_and_place_is_a_column_the_analysis_gives(tmp_path: Path) -> None:
    """An expectation on a column the summary lacks could never be checked."""
    write_rows(tmp_path, synthetic_row())
    columns = set(summarize(load_results([tmp_path]).rows).columns)
    figures = {f.column for f in FIGURES.values()} - {"of_bound"}  # full over the bound: computed
    assert figures <= columns
    assert set(PLACES.values()) <= columns
