"""A script's own flags for the point's settings: each boolean style a script may use."""

from __future__ import annotations

import pytest

from harness_schema.script_flags import arguments, normalised, problem
from harness_schema.settings import FLAGGABLE, FLAGGABLE_BOOLEANS


@pytest.mark.parametrize(
    ("flag", "true", "false"),
    [
        ("--pin-memory", ["--pin-memory"], ["--no-pin-memory"]),  # argparse BooleanOptionalAction
        ("--pin-memory=", ["--pin-memory=true"], ["--pin-memory=false"]),  # type=str2bool
        ({True: "--pin-memory", False: None}, ["--pin-memory"], []),  # store_true
        ({True: None, False: "--no-pin"}, [], ["--no-pin"]),  # store_false
    ],
)
def test_each_boolean_style(flag: object, true: list[str], false: list[str]) -> None:
    flags = normalised({"pin_memory": flag})  # as the spec keeps it (JSON's "true" keys)
    assert problem(flags, FLAGGABLE, FLAGGABLE_BOOLEANS) is None
    assert arguments(flags, {"pin_memory": True}) == true
    assert arguments(flags, {"pin_memory": False}) == false


def test_numbers_nulls_and_unnamed_settings() -> None:
    flags = {"num_workers": "-j", "prefetch_factor": "--prefetch-factor=", "batch_size": "-b"}
    values = {"num_workers": 4, "prefetch_factor": None}  # batch_size: the script's own
    assert arguments(flags, values) == ["-j", "4"]
    assert arguments(flags, {"prefetch_factor": 2}) == ["--prefetch-factor=2"]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ({"num_workers": {True: "--x"}}, "a {true: ..., false: ...} mapping is for a boolean setting only"),
        (
            {"pin_memory": "-p"},
            "'-p': a boolean as --x/--no-x needs a long flag (or {true: -p, false: null})",
        ),
        (
            {"pin_memory": {"yes": "--p"}},
            "{'yes': '--p'}: expected {true: --flag or null, false: --flag or null}",
        ),
    ],
)
def test_what_is_refused(flags: dict[str, object], words: str) -> None:
    assert problem(flags, FLAGGABLE, FLAGGABLE_BOOLEANS) == (
        "num_workers" if "num" in str(flags) else "pin_memory",
        words,
    )
