"""harness/tune/verb.py: the what-if's argument."""

from __future__ import annotations

import pytest

from harness.tune.rounds import TuneError
from harness.tune.verb import parse_what_if


@pytest.mark.parametrize("text", ["gpus=0,cores=8", "cores=8", "gpus=2,cores=8,ram=4", "gpus=a,cores=2"])
def test_parse_what_if_refuses(text: str) -> None:
    with pytest.raises(TuneError, match=f"got '{text}'"):
        parse_what_if(text)
    assert parse_what_if("gpus=4,cores=40") == (4, 40)
