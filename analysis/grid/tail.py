"""The tail of the wait for data: when it is heavy, and which loader setting absorbs it.

A mean `loading_time` hides a read that stalls now and then (a busy shared file system: "IOs on Jean
Zay are erratic", the IDRIS course, https://github.com/IDRIS-CNRS/DLO-JZ). The rows keep the
per-step percentiles (`loading_time_p50`, `_p95`, `_p99`) and `waited_share`, the share of steps
that waited longer than they computed.

A point's wait is **heavy-tailed** when its p99 is at least TAIL_RATIO times its p50 *and* the
difference is worth TAIL_FLOOR of a step: a 2 ms p99 over a 0.1 ms p50 is IPC jitter of a loader
that keeps up, not a stall anyone would pay for. A window of fewer than MIN_STEPS steps is not
judged: its p99 is its longest step. A window that crosses an epoch end has a tail of its own
(the new iterator's start, new workers unless persistent_workers): the caveat says so.

A **periodic** wait is not a tail: workers of equal per-batch cost stay in step and deliver
in bursts of num_workers, and a step faster than the loader waits once a burst, every
`delivery_period` steps (harness/execution/steady.py). Its p99 is many times its p50 too, but
nothing is erratic: the loader is short on average, and a row whose rank saw the period
(`delivery_period`) is never called heavy-tailed; its note says what the wait is instead, and
where the window covers fewer than MIN_PERIODS periods, that it is too short and what to set.

Which setting absorbs it is read off the measurements, not assumed: among the points that differ
only in `prefetch_factor` (or only in `num_workers`), the p99 wait at the axis's largest value
over that at its smallest, the median over such families. The course says prefetch_factor "prevents
GPU inactivity if the CPU occasionally struggles"; more workers also hold more batches ready
(num_workers × prefetch_factor) and refill the stock faster after a stall. The data decides.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pandas as pd

from analysis.aggregate import LOADER_COLUMNS, WORKLOAD_COLUMNS
from harness_schema.settings import MIN_PERIODS

TAIL_RATIO = 5.0
"""p99 at least this many times p50: the slow steps are not the typical step."""
TAIL_FLOOR = 0.25
"""... and p99 − p50 at least this share of the median step: a stall worth a quarter step."""
MIN_STEPS = 20
"""Fewer measured steps: p95 and p99 are the longest step or two, no tail to speak of."""
ABSORBS = 0.5
"""An axis absorbs the tail when its largest value at least halves the p99 wait."""
AXES = ("prefetch_factor", "num_workers")


def heavy_tailed(rows: pd.DataFrame) -> pd.Series:
    """Per summary row: is its wait for data heavy-tailed (see the module)? False where unknown."""
    p50, p99 = rows["loading_time_p50"].astype(float), rows["loading_time_p99"].astype(float)
    step = rows["step_time"].astype(float)
    steps = pd.to_numeric(rows["steps"], errors="coerce")
    heavy = (p99 >= TAIL_RATIO * p50) & (p99 - p50 >= TAIL_FLOOR * step) & (steps >= MIN_STEPS)
    return (heavy & ~periodic(rows)).fillna(False).astype(bool)


def periodic(rows: pd.DataFrame) -> pd.Series:
    """Per summary row: did the loader deliver in bursts (a wait every `delivery_period` steps)?"""
    if "delivery_period" not in rows:
        return pd.Series(False, index=rows.index)
    return (pd.to_numeric(rows["delivery_period"], errors="coerce") >= 2).fillna(False).astype(bool)


def periodic_notes(shown: pd.DataFrame) -> list[str]:
    """What a periodic wait is (not a tail), and the rows whose window is too short for it."""
    bursty = shown[periodic(shown)]
    if bursty.empty:
        return []
    periods = sorted({int(p) for p in bursty["delivery_period"]})
    listed = ", ".join(str(r.jobid) for r in bursty.head(3).itertuples())
    more = f" and {len(bursty) - 3} more" if len(bursty) > 3 else ""
    notes = [
        f"the wait for data is periodic in {len(bursty)} of {len(shown)} row(s) ({listed}{more}): the "
        f"loader delivers in bursts of {_counts(periods)} batches (workers of equal cost in step), and "
        "the step waits between bursts: the loader's rhythm, not a tail; it is short on average "
        "(more workers or cheaper batches raise its rate), and each window covers whole periods"
    ]
    steps = pd.to_numeric(bursty["steps"], errors="coerce")
    short = bursty[steps < MIN_PERIODS * bursty["delivery_period"]]
    for r in short.head(3).itertuples():
        period = int(r.delivery_period)
        notes.append(
            f"{r.jobid}: the window of {r.steps:g} steps covers {int(r.steps) // period} period(s) of "
            f"the loader's bursts of {period}: too short to read its steady rate; set measure.steps: "
            f"{MIN_PERIODS * period} or more, or measure.seconds"
        )
    return notes


def _counts(values: list[int]) -> str:
    return " or ".join(str(v) for v in values) if len(values) <= 3 else f"{values[0]} to {values[-1]}"


@dataclass(frozen=True, slots=True)
class AxisEffect:
    """What raising one axis did to the p99 wait, over the families that differ only in it."""

    axis: str
    low: float
    high: float
    p99_low: float
    """Median p99 wait (seconds) at the axis's smallest value, over the families."""
    p99_high: float
    families: int

    @property
    def ratio(self) -> float:
        return self.p99_high / self.p99_low if self.p99_low > 0 else 1.0

    def text(self) -> str:
        return (
            f"{self.axis} {_num(self.low)} -> {_num(self.high)}: p99 wait {_ms(self.p99_low)} -> "
            f"{_ms(self.p99_high)} (median of {self.families} comparison(s) of points that differ only in it)"
        )


def axis_effect(rows: pd.DataFrame, axis: str) -> AxisEffect | None:
    """The axis's smallest against its largest value, in each family of points that differ only
    in it (same sweep, same other settings); None where no family has two values of it."""
    others = ["sweep_dir", "rung", "sequence_step", *WORKLOAD_COLUMNS, *LOADER_COLUMNS]
    others = [c for c in others if c != axis and c in rows]
    with_value = rows[rows[axis].notna() & rows["loading_time_p99"].notna()]
    if axis == "num_workers":
        with_value = with_value[with_value["num_workers"] > 0]  # no workers: no stock to compare
    lows, highs, low_values, high_values = [], [], [], []
    keys = [with_value[c].astype(str) for c in others]
    for _, family in with_value.groupby(keys, sort=False, dropna=False):
        if family[axis].nunique() < 2:
            continue
        ordered = family.sort_values(axis, kind="stable")
        lows.append(float(ordered["loading_time_p99"].iloc[0]))
        highs.append(float(ordered["loading_time_p99"].iloc[-1]))
        low_values.append(float(ordered[axis].iloc[0]))
        high_values.append(float(ordered[axis].iloc[-1]))
    if not lows:
        return None
    return AxisEffect(
        axis=axis,
        low=min(low_values),
        high=max(high_values),
        p99_low=statistics.median(lows),
        p99_high=statistics.median(highs),
        families=len(lows),
    )


def tail_notes(shown: pd.DataFrame) -> list[str]:
    """The caveat of a table whose rows include heavy-tailed waits: which ones, and which of
    prefetch_factor or num_workers absorbs the tail in these measurements."""
    if "loading_time_p99" not in shown or shown.empty:
        return []
    heavy = shown[heavy_tailed(shown)]
    if heavy.empty:
        return periodic_notes(shown)
    worst = heavy.sort_values("loading_time_p99", ascending=False, kind="stable")
    listed = ", ".join(
        f"{r.jobid} (p50 {_ms(r.loading_time_p50)}, p99 {_ms(r.loading_time_p99)}, mean {_ms(r.loading_time)}"
        + (f"; {r.epoch_restarts:g} epoch end(s) in the window" if r.epoch_restarts > 0 else "")
        + ")"
        for r in worst.head(3).itertuples()
    )
    more = f" and {len(heavy) - 3} more" if len(heavy) > 3 else ""
    restarts = ""
    if (heavy["epoch_restarts"] > 0).any():
        restarts = ", epoch ends (a new iterator, new workers unless persistent_workers)"
    notes = [
        f"the wait for data is heavy-tailed in {len(heavy)} of {len(shown)} row(s): {listed}{more}; "
        f"steps that wait far longer than most now and then: erratic storage, a machine busy with other "
        f"work{restarts}; the mean loading_time hides them"
    ]
    effects = [e for e in (axis_effect(shown, axis) for axis in AXES) if e is not None]
    notes.append(_absorbs(effects))
    return notes + periodic_notes(shown)


def _absorbs(effects: list[AxisEffect]) -> str:
    """The sentence on which axis absorbs the tail, with the figures of each axis measured."""
    untried = [a for a in AXES if a not in {e.axis for e in effects}]
    absorbing = sorted((e for e in effects if e.ratio <= ABSORBS), key=lambda e: e.ratio)
    if absorbing:
        best = absorbing[0]
        head = f"in these runs {best.axis} absorbs it (p99 wait ×{best.ratio:.2f} at its largest value)"
    elif len(effects) == 2:
        head = "in these runs neither prefetch_factor nor num_workers absorbs it"
    elif effects:
        head = f"in these runs {effects[0].axis} does not absorb it"
    else:
        head = "no two points differ only in prefetch_factor or num_workers"
    parts = [head, *(e.text() for e in effects)]
    if untried:
        parts.append(
            f"vary {' and '.join(untried)} to see whether it absorbs the stalls "
            "(prefetch_factor: the batches each worker prepares ahead)"
        )
    return "; ".join(parts)


def _ms(seconds: float) -> str:
    return "-" if pd.isna(seconds) else f"{seconds * 1000:.1f} ms"


def _num(value: float) -> str:
    return f"{value:g}"
