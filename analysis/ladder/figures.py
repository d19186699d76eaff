"""One point's caching ladder on one node, as the verdict judges it (analysis/ladder/verdict.py) and
its words describe it (analysis/ladder/verdict_text.py): the verdict itself, the ladder's per-repeat
figures, what each stage costs and the loader's capacity against the device's demand. A module
of its own so that the judgement and the words both import it and neither the other's
internals."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis import noise
from analysis.ladder import caching
from harness_schema import rungs as rung_names


@dataclass
class Verdict:
    hostname: str
    sweep_id: str
    point_id: str
    table: pd.DataFrame
    sentence: str
    stages: list[str] = field(default_factory=list)
    """The stages named, costliest first (what tests and notebooks read)."""
    caveats: list[str] = field(default_factory=list)
    keeps_up: bool | None = None
    """None where it cannot be told (full not measured, or no bound rung)."""
    demand: float | None = None
    """Steps/s of the bound rung: what the device asks of the loader."""
    bound: str = ""
    capacity_full: float | None = None
    """Batches/s full's loader delivers alone (slowest rank's, median over repeats)."""
    costliest: str | None = None
    """The stage that costs the most loader time, estimated (or steps/s, without capacities):
    the headline's."""
    costliest_settled: bool | None = None
    """Whether the repeats settle the costliest stage's cost (False: the headline says it is not
    yet settled, and the repeats that would settle it); None where no stage is headlined."""
    room: float | None = None
    """Where the repeats' interval left undecided whether full's loader keeps up with the step's
    demand, yet it delivered at least analysis.ladder.headline.ROOM times the demand in every
    repeat: the least of those ratios (the loader keeps up with room to spare). None elsewhere."""
    tipped_by: str | None = None
    """A cheaper stage whose addition only brought the loader under the demand."""
    repeats: int = 0
    unmeasured: dict[str, str] = field(default_factory=dict)
    """Rung -> why it (or some of its repeats) has no figures: status and error."""
    state: str = ""
    """KEEPS_UP, AT_THE_EDGE, SHORT, LOSS_OUTSIDE or UNDECIDED ("" with nothing to compare)."""
    undecided_on: str = ""
    """Where UNDECIDED: "demand" (the loader against the step) or "bound" (full's steps/s)."""
    runs_needed: int | None = None
    """Where UNDECIDED: the repeats that would likely decide (analysis.noise)."""
    what_if: caching.CachingWhatIf | None = None
    """Where full is not shown to keep up and a cached rung does: what caching that stage would
    give (analysis/ladder/caching.py)."""
    idle: str | None = None
    """Where DataLoader workers delivered no batch (the rows' idle_workers): what that means and
    the fix (more shards, not more workers), in words; None where every worker delivered."""


@dataclass
class Stage:
    """What one rung pays beyond the rung above it, in seconds per step or per loader batch."""

    label: str
    above: str | None  # None: above is a cached batch, which costs the loader nothing
    below: str
    ratio: noise.Estimate | None  # below's rate over above's, paired per repeat
    cost: float
    named: bool
    faster: bool = False  # below beyond the noise faster than above
    worst: Stage | None = None  # for a group: its costliest member

    @property
    def unsettled(self) -> bool:
        """Not named because its repeats disagree: its paired ratio's interval reaches across an
        edge of the ±5 % margin (analysis.noise), not because it was shown small."""
        return not self.named and self.ratio is not None and self.ratio.judge() == noise.UNDECIDED


@dataclass(frozen=True)
class Sizes:
    """What the caching what-if needs from one node's rows (analysis/ladder/caching.py)."""

    sample_bytes: dict[str, float]  # cached rung -> bytes of its cached value
    samples: int | None
    limit_gb: float | None  # the job's memory limit on the node (the least of its ranks')
    in_use_gb: float  # the node's ranks' memory at full (each rank's median over repeats)


@dataclass
class Ladder:
    """One point on one node: the table, and the per-repeat figures the decisions use."""

    table: pd.DataFrame
    steps: pd.DataFrame  # repeat x rung: the slowest rank's steps/s
    capacity: pd.DataFrame  # repeat x rung: the slowest rank's loader capacity
    names: list[str]
    on_cpu: bool
    bound: str
    unmeasured: dict[str, str]
    sizes: Sizes | None = None
    given: bool = False
    """full is a loader the harness did not build (the rows' loader_given): its stage is named
    as the loader as given, not split into stages the harness cannot see."""

    @property
    def has_bound(self) -> bool:
        """A batch-level rung was measured: the step's demand is known."""
        return self.bound in rung_names.BOUND_RUNGS

    @property
    def has_capacity(self) -> bool:
        """Some rung's loader capacity was measured."""
        return bool(self.capacity.notna().any().any())

    @property
    def repeats(self) -> int:
        return len(self.steps.index)

    @property
    def rungs(self) -> list[str]:
        return list(self.table["rung"])

    def rate(self, rung: str) -> float:
        return float(self.steps[rung].median())


@dataclass
class Capacity:
    """The loader's side: capacities against the device's demand."""

    stages: list[Stage]  # loader seconds per batch each stage adds
    ref: str  # the lowest rung with a capacity (full when measured)
    demand: float
    capacity: float
    short: dict[str, bool]  # capacity below the demand beyond the margin, per rung
    vs_demand: noise.Estimate | None  # ref's capacity over the demand
    reach: noise.Estimate | None  # ref's steps/s over the bound's
    tip: Stage | None  # from the last rung that keeps up to the first that does not
    room: float | None = None
    """ref's capacity over the demand in the repeat where it was least (paired, repeat by
    repeat); None without a repeat in common."""

    def share(self, stage: Stage) -> float:
        """The stage's share of the loader's time per batch at ref."""
        return stage.cost * self.capacity

    def named(self) -> list[Stage]:
        return sorted((s for s in self.stages if s.named), key=lambda s: -s.cost)

    def costliest(self) -> Stage:
        """The stage of the largest estimated cost, settled by its repeats or not: a smaller
        stage whose interval is tighter is never promoted over it (issue 42)."""
        return max(self.stages, key=lambda s: s.cost)
