"""What deciding a recommendation left open would cost, and the command that does it.

Where the runs leave the answer open (a cheaper configuration within the margin of the best
but not proven tied, the *candidate*, or a dearer one that may beat the best by more than the
margin, a *challenger*), the recommendation says, on one `to decide:` line: the cheapest of
these contenders, the repeats per point that would likely decide (analysis.noise's formula,
from the spread observed so far), how many points, how long that is at the pace of their runs
so far (each run's started_at..finished_at: warmup and loader start included), and the
command that measures them: `harness resume SWEEP --more-repeats N` (harness/sweeps.py), which
adds N repeats to exactly the points named here, in turn with each other (ABC ABC). No line
where more than analysis.noise.MAX_RUNS runs would be needed: the candidate's or the
undecided line says so.

Torch-free, as all of analysis/.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis.grid.choices import Choice, Undecided


@dataclass(frozen=True, slots=True)
class ToDecide:
    """The points whose repeats would decide the open question, and what that costs."""

    cheapest: Choice | None
    """The cheapest contender, cheaper than the answer: the answer if the runs come out tied;
    None where only challengers are open (dearer points that may beat the best)."""
    points: tuple[Choice, ...]
    """The contenders and the best: the points to measure again."""
    more: int
    """Repeats to add to each point."""
    sweep_dir: str

    @property
    def point_ids(self) -> tuple[str, ...]:
        return tuple(c.point_id for c in self.points)

    @property
    def seconds(self) -> float | None:
        """At the pace of each point's runs so far; None where a point's pace is unknown."""
        paces = [c.run_seconds for c in self.points]
        if any(math.isnan(p) for p in paces):
            return None
        return self.more * sum(paces)

    def line(self) -> str:
        c = self.cheapest
        if c is not None:
            head = f"to decide: the cheapest contender is {c.name} {c.settings_text()}"
        else:
            dearer = " or ".join(f"{p.name} {p.settings_text()}" for p in self.points[:-1])
            head = f"to decide: whether {dearer} beats the best by more than the margin"
        names = ", ".join(p.name for p in self.points)
        took = self.seconds
        cost = f", {_duration(took)}" if took is not None else ""
        return (
            f"{head}; about {self.more} more repeats of {len(self.points)} points ({names}){cost}: "
            f"harness resume {self.sweep_dir} --more-repeats {self.more}"
        )


def to_decide(
    best: Choice | None, candidate: Undecided | None, challengers: Sequence[Undecided], sweep_dir: str
) -> ToDecide | None:
    """What would decide a recommendation, where it is open: its candidate (the cheapest
    cheaper configuration within the margin, not proven tied) and its challengers, each with
    the best; None where nothing is open."""
    open_ = [u for u in (candidate, *challengers) if u is not None]
    if best is None or not open_:
        return None
    if any(u.runs is None for u in open_):
        return None  # its own line says more than noise.MAX_RUNS would be needed: no offer
    # Each side of each comparison brought to the runs that would decide it.
    need = max(u.runs or 0 for u in open_)
    more = max(1, max(need - p.runs for p in (best, *(u.choice for u in open_))))
    return ToDecide(
        cheapest=candidate.choice if candidate is not None else None,
        points=(*(u.choice for u in open_), best),
        more=more,
        sweep_dir=sweep_dir,
    )


def _duration(seconds: float) -> str:
    """40 s, 6 min, 1.5 h: what a follow-up costs, roughly."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
