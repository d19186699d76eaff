"""A configuration as the recommendation names it (`Choice`: its settings shown, its figures and
runs), one the runs leave undecided against the best (`Undecided`), and one left out of the
ranking (`Unranked`), each with the line that says it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import pandas as pd

from analysis import noise


@dataclass(frozen=True, slots=True)
class Choice:
    point_id: str
    jobid: str
    point_index: int
    settings: dict[str, Any]
    samples_per_s: float
    run_samples_per_s: tuple[float, ...]
    """samples/s of each run (repeats; nodes of one type with --by gpu)."""
    cpu_memory_gb: float
    run_passes: tuple[noise.Pass, ...] = ()
    """The pass of each run (analysis.aggregate's labels), for the paired judgement."""
    pooled: tuple[str, ...] = ()
    """The points measured as the same configuration on this device (NO_EFFECT_OFF_CUDA), whose
    runs are pooled with this one's."""
    run_seconds: float = float("nan")
    """What measuring one run took (median; NaN where the rows do not say): the pace of more."""

    @property
    def runs(self) -> int:
        return len(self.run_samples_per_s)

    @property
    def name(self) -> str:
        return f"{self.jobid} (pooled with {', '.join(self.pooled)})" if self.pooled else self.jobid

    def settings_text(self) -> str:
        return " ".join(f"{k}={_value(v)}" for k, v in self.settings.items())

    def against(self, other: Choice) -> noise.Estimate:
        """This one's samples/s over the other's, from their runs (paired by pass where they
        took turns on one machine)."""
        return noise.ratio_by_pass(
            other.run_samples_per_s, self.run_samples_per_s, other.run_passes, self.run_passes
        )


@dataclass(frozen=True, slots=True)
class Undecided:
    """A configuration whose difference from the best the runs leave undecided (its interval
    straddles an edge of the margin): cheaper than the recommended one, or possibly faster
    than the best by more than the margin (a challenger)."""

    choice: Choice
    ratio: noise.Estimate
    """Its samples/s over the best's."""
    runs: int | None
    """Runs per point (it and the best) that would likely decide; None: more than MAX_RUNS."""

    cheaper: bool = True
    """Cheaper than the recommended one (else a dearer one that may be faster than the best)."""

    @property
    def challenges(self) -> bool:
        """Its interval reaches beyond +margin: it may be the real best."""
        return self.ratio.high is not None and self.ratio.high > 1 + noise.MARGIN

    @property
    def close(self) -> bool:
        """Cheaper, and its estimate lies within the margin of the best: the runs point to a
        tie they cannot prove yet (a candidate, where it is the cheapest such)."""
        return self.cheaper and abs(self.ratio.change) <= noise.MARGIN

    def candidate_line(self) -> str:
        """What the evidence supports, said as such: its figures, how close, and that it is
        not proven tied."""
        c, r = self.choice, self.ratio
        if self.runs is None:
            more = f"more than {noise.MAX_RUNS} runs per point would be needed to decide"
        else:
            more = f"{self.runs - c.runs} more runs per point would decide (about {self.runs} in all)"
        return (
            f"candidate, cheaper: {c.name} {c.settings_text()}: {c.samples_per_s:.2f} samples/s, "
            f"within {abs(r.change):.1%} of the best ({r.interval_text()}), not proven tied: {more}"
        )

    def line(self) -> str:
        c, r = self.choice, self.ratio
        what = "cheaper" if self.cheaper else "could be faster than the best"
        if self.runs is None:
            more = f"more than {noise.MAX_RUNS} runs per point would be needed"
        else:
            more = f"about {self.runs} runs per point would decide ({self.runs - c.runs} more)"
        return (
            f"undecided, {what}: {c.name} {c.settings_text()}: {c.samples_per_s:.2f} samples/s "
            f"({r.change:+.1%}, {r.interval_text()}): {more}"
        )


@dataclass(frozen=True, slots=True)
class Unranked:
    """A point left out of the ranking, and why (failed runs, missing ranks)."""

    choice: Choice
    reason: str

    def line(self) -> str:
        c = self.choice
        return (
            f"not ranked: {c.name} {c.settings_text()}: {c.samples_per_s:.2f} samples/s "
            f"from {c.runs} run(s): {self.reason}"
        )


def _value(v: Any) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


Row: TypeAlias = pd.Series | dict[str, Any]
"""A summary row: a Series, or one of Records' dicts."""


def choice_of(row: Row, shown: list[str]) -> Choice:
    return Choice(
        point_id=str(row["point_id"]),
        jobid=str(row["jobid"]),
        point_index=int(row["point_index"]),
        settings={c: row[c] for c in shown},
        samples_per_s=float(row["samples_per_s"]),
        run_samples_per_s=tuple(float(v) for v in row["run_samples_per_s"]),
        run_passes=passes_of(row),
        cpu_memory_gb=float(row["cpu_memory_gb"]),
        pooled=pooled if isinstance(pooled := row.get("pooled"), tuple) else (),
        run_seconds=float(row.get("run_seconds", float("nan"))),
    )


def passes_of(row: Row) -> tuple[noise.Pass, ...]:
    """The row's run_passes (none in a frame made before passes: then nothing is paired)."""
    return as_passes(row.get("run_passes"))


def as_passes(passes: Any) -> tuple[noise.Pass, ...]:
    return tuple(passes) if isinstance(passes, tuple) else ()
