"""harness/probe/loop_settings.py: the settings a loop runs with (probe.settings())."""

from __future__ import annotations

import pytest

import harness.probe as probe
from harness.probe import session
from tests.harness.probe.common import (
    script_point,
)


def test_settings_are_the_points_under_the_harness_and_the_scripts_alone(harnessed) -> None:  # type: ignore[no-untyped-def]
    mine = {"num_workers": 3, "pin_memory": True, "non_blocking": False, "batch_size": 8}
    alone = probe.settings(**mine)
    assert (alone.num_workers, alone.pin_memory, alone.non_blocking, alone.batch_size) == (3, True, False, 8)
    harnessed(script_point(loader="{num_workers: 1, prefetch_factor: 4}", rungs="[full]"))
    session.state.given = None  # a fresh process: the settings given alone are not this one's
    ran = probe.settings(**mine)
    assert (ran.num_workers, ran.prefetch_factor, ran.pin_memory, ran.non_blocking, ran.batch_size) == (
        1,
        4,
        True,
        False,
        8,
    )
    assert ran.dataloader() == {
        "num_workers": 1,
        "persistent_workers": False,
        "pin_memory": True,
        "prefetch_factor": 4,
        "drop_last": False,
    }
    with pytest.raises(
        TypeError, match=r"probe.settings: unknown setting\(s\) workers; allowed: num_workers, .*, batch_size"
    ):
        probe.settings(workers=2)
