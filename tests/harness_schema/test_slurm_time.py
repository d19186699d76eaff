"""Slurm's time formats: what a spec may give and the seconds it means."""

from __future__ import annotations

import pytest

from harness_schema.slurm_time import SLURM_TIME, time_seconds


def test_time_formats() -> None:
    assert time_seconds(20) == 1200
    assert time_seconds("20") == 1200
    assert time_seconds("05:30") == 330
    assert time_seconds("01:02:03") == 3723
    assert time_seconds("1-00") == 86400
    assert time_seconds("2-01:30:00") == 2 * 86400 + 5400


@pytest.mark.parametrize("text", ["1:2", "1-", "-3", "01:02:03:04", "1h"])
def test_what_slurm_does_not_take_is_not_a_slurm_time(text: str) -> None:
    assert SLURM_TIME.match(text) is None
