"""The judgement of measured runs (analysis/tune/judge.py), as the recommendation judges them."""

from __future__ import annotations

from analysis import noise
from analysis.tune.judge import judge
from analysis.tune.model import Config


def w(n: int, prefetch: int = 2, persistent: bool = False) -> Config:
    return Config(num_workers=n, prefetch_factor=prefetch if n else None, persistent_workers=persistent)


def test_undecided_cheaper_configurations_are_named_with_the_runs_that_decide() -> None:
    # Three workers 4 % below four, runs ±10 %: neither tied nor slower at n=3.
    truth = {w(2): 50.0, w(3): 96.0, w(4): 100.0, w(6): 100.0}
    wide = (0.9, 1.0, 1.1)
    judged = judge({c: [v * s for s in wide] for c, v in truth.items()})
    assert judged.verdicts[w(2)] == noise.LOWER
    assert judged.verdicts[w(3)] == noise.UNDECIDED
    assert w(3) in judged.undecided
    runs = judged.undecided[w(3)]
    assert runs is None or runs > 3
