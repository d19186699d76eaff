"""The caching ladder's rung names and order, as a spec, the table and the verdict use them."""

from __future__ import annotations

import pytest

from harness.config.plan import expand
from harness.config.spec import SpecError, parse_spec
from harness_schema import rungs
from tests.conftest import TINY_WORKLOAD


def test_the_ladder_runs_from_the_bound_to_the_full_pipeline() -> None:
    shuffled = ["full", "transform:1", "raw_bytes", "device_batch", "raw_sample", "transform:3"]
    shuffled += ["processed_sample", "host_batch"]
    # transform:k caches the first k transforms: the more it caches, the nearer the bound.
    assert sorted(shuffled, key=rungs.ladder_position) == [
        "device_batch",
        "host_batch",
        "processed_sample",
        "transform:3",
        "transform:1",
        "raw_sample",
        "raw_bytes",
        "full",
    ]


@pytest.mark.parametrize(
    ("name", "rung", "cut", "sample_level"),
    [
        ("device_batch", True, None, False),
        ("host_batch", True, None, False),
        ("processed_sample", True, None, True),
        ("transform:2", True, 2, True),
        ("transform:12", True, 12, True),
        ("full", True, None, True),
        ("transform:", False, None, False),
        ("transform:k", False, None, False),
        ("Full", False, None, False),
        ("fast", False, None, False),
    ],
)
def test_names_their_cut_and_whether_they_go_through_the_dataloader(
    name: str, rung: bool, cut: int | None, sample_level: bool
) -> None:
    assert rungs.is_rung(name) is rung
    assert rungs.transform_cut(name) == cut
    assert rungs.is_sample_level(name) is sample_level


def test_a_spec_with_an_unknown_rung_is_refused_with_the_allowed_names() -> None:
    with pytest.raises(
        SpecError,
        match=r"^<spec>:9: rungs\[1\]: 'fast' is not a rung; expected device_batch, host_batch, "
        r"processed_sample, raw_sample, raw_bytes, full, transform:<k>$",
    ):
        parse_spec("name: t\n" + TINY_WORKLOAD + "rungs: [full, fast]\n")


def test_a_point_measures_its_rungs_from_the_bound_down_whatever_the_specs_order() -> None:
    (point,) = expand(
        parse_spec("name: t\n" + TINY_WORKLOAD + "rungs: [full, transform:1, device_batch]\n")
    ).points
    assert point.rungs == ("device_batch", "transform:1", "full")
