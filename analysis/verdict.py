"""The caching ladder's verdict: per point and node, the rung table and one sentence saying
whether the input pipeline keeps up with the device, and if not, which stage costs the most
(000_*, 001_* in shared/reference).

With parallel workers a step takes about max(device step, loader work ÷ workers). A drop in
steps/s between two rungs therefore lands on whichever stage brings the loader under the
device's demand: when reading costs 27 % of the loader's work and the transforms 73 %, caching
the read is enough to keep up, the drop lands on reading and the transforms are never named
(001_* warns of exactly this). So where the loader's capacity was measured (`loader_capacity`:
batches/s the same loader delivers with no train step), the verdict is read from capacities:

- the device's demand is the bound rung's steps/s (host_batch when measured: it includes the
  copy a fresh batch also pays; else device_batch);
- the pipeline keeps up when full's capacity is not below the demand and full's steps/s are
  not below the bound, both beyond the noise;
- loader time per batch is 1/capacity and adds up along the ladder: a stage costs
  1/cap(rung below) − 1/cap(rung above), named with its share of the loader's time at full;
- the stage that brings the loader from keeping up to not keeping up is named as having only
  tipped it over, when it is not the costliest.

Without capacities the verdict falls back on the drops in steps/s, and says the costliest stage
may be hidden. Every difference is judged by analysis.noise on the per-repeat figures of two
rungs measured in turn (ABC ABC): a paired ratio, never the difference of two medians.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

import pandas as pd
from tabulate import tabulate

from analysis import noise
from harness.config import rungs as rung_names

SATURATED = 0.90  # busy cores / allotted cores at which the CPU counts as saturated
STEP_ON_CPU = 0.5  # cores the training process keeps busy on the bound rung: a step on the CPU
FORMATS = {"terminal": "simple", "markdown": "github", "latex": "latex_booktabs", "csv": "tsv"}
NO_CAPACITY = (
    "the loader's capacity was not measured (measure.loader_capacity, or rows of an older "
    "harness): a stage named by its drop may only have tipped the loader over, and the "
    "costliest stage may be hidden (001_*)"
)


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
    """The stage that costs the most loader time (or steps/s, without capacities)."""
    tipped_by: str | None = None
    """A cheaper stage whose addition only brought the loader under the demand."""
    repeats: int = 0
    unmeasured: dict[str, str] = field(default_factory=dict)
    """Rung -> why it (or some of its repeats) has no figures: status and error."""


@dataclass
class _Stage:
    """What one rung pays beyond the rung above it, in seconds per step or per loader batch."""

    label: str
    above: str | None  # None: above is a cached batch, which costs the loader nothing
    below: str
    ratio: noise.Ratio | None  # below's rate over above's, paired per repeat
    cost: float
    named: bool
    faster: bool = False  # below beyond the noise faster than above
    worst: _Stage | None = None  # for a group: its costliest member


@dataclass
class _Ladder:
    """One point on one node: the table, and the per-repeat figures the decisions use."""

    table: pd.DataFrame
    steps: pd.DataFrame  # repeat x rung: the slowest rank's steps/s
    capacity: pd.DataFrame  # repeat x rung: the slowest rank's loader capacity
    names: list[str]
    on_cpu: bool
    bound: str
    unmeasured: dict[str, str]

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


def ladder_verdicts(rows: pd.DataFrame) -> list[Verdict]:
    """One verdict per (node, sweep, point) that measured at least two rungs, one of them ok;
    failed and skipped rungs are listed in it."""
    if rows.empty:
        return []
    rows = rows.copy()
    for column in ("training_time", "samples", "steps", "input_shapes", "loader_capacity"):
        if column in rows:
            rows[column] = pd.to_numeric(rows[column], errors="coerce")
    out = []
    for (host, sweep, point), group in rows.groupby(["hostname", "sweep_id", "point_id"], sort=True):
        if group["rung"].nunique() < 2 or not (group["status"] == "ok").any():
            continue
        verdict = _verdict(str(host), str(sweep), str(point), group)
        if verdict is not None:
            out.append(verdict)
    return out


def _ladder(group: pd.DataFrame) -> _Ladder | None:
    """None when no repeat of any rung was measured by every rank."""
    unmeasured = _unmeasured(group)
    # A repeat of a rung counts only when every rank measured it: under DDP, the ranks that
    # went on alone measured another thing.
    bad = group[group["status"] != "ok"][["rung", "repeat"]].drop_duplicates()
    keys = pd.MultiIndex.from_frame(group[["rung", "repeat"]])
    ok = group[(group["status"] == "ok") & ~keys.isin(pd.MultiIndex.from_frame(bad))]
    if ok.empty:
        return None
    per_repeat = _per_repeat(ok)
    table = _per_rung(per_repeat)
    measured = list(table["rung"])
    bound = next((r for r in rung_names.BOUND_RUNGS if r in measured), measured[0])
    return _Ladder(
        table=table,
        steps=per_repeat["steps_per_s"].unstack("rung")[measured],
        capacity=per_repeat["capacity"].unstack("rung")[measured],
        names=[n for n in str(group["transform_names"].iloc[0] or "").split(",") if n],
        on_cpu=bool((ok["device"] == "cpu").all()),
        bound=bound,
        unmeasured=unmeasured,
    )


def _per_repeat(ok: pd.DataFrame) -> pd.DataFrame:
    """Per (rung, repeat): the slowest rank's figures (it holds the others back at every
    step), the samples of all ranks, and the lowest loader capacity of the ranks."""
    keys = ["rung", "repeat"]
    slowest = ok.loc[ok.groupby(keys)["training_time"].idxmax()].set_index(keys)
    by = ok.groupby(keys)

    def number(column: str) -> pd.Series:
        if column not in slowest:
            return pd.Series(float("nan"), index=slowest.index)
        return pd.to_numeric(slowest[column], errors="coerce")

    capacity = (
        pd.to_numeric(ok["loader_capacity"], errors="coerce").groupby([ok["rung"], ok["repeat"]]).min()
        if "loader_capacity" in ok
        else number("loader_capacity")
    )
    return pd.DataFrame(
        {
            "steps_per_s": slowest["steps"] / slowest["training_time"],
            "samples_per_s": by["samples"].sum() / slowest["training_time"],
            "capacity": capacity,
            "gpu_util": number("gpu_util"),
            "busy_cores": number("loader_cores") + number("main_cores"),
            "main_cores": number("main_cores"),
            "cpus_allotted": number("cpus_allotted"),
            "input_shapes": by["input_shapes"].max() if "input_shapes" in ok else number("input_shapes"),
        }
    )


def _per_rung(per_repeat: pd.DataFrame) -> pd.DataFrame:
    """Medians over repeats, ladder order; `spread` is the robust relative spread of steps/s."""
    by_rung = per_repeat.reset_index().groupby("rung")
    table = by_rung[
        ["steps_per_s", "samples_per_s", "capacity", "gpu_util", "busy_cores", "main_cores", "cpus_allotted"]
    ].median()
    table["spread"] = by_rung["steps_per_s"].agg(lambda s: noise.relative_spread(list(s)))
    table["input_shapes"] = by_rung["input_shapes"].max()
    table = table.reset_index()
    table["position"] = table["rung"].map(rung_names.ladder_position)
    return table.sort_values("position").reset_index(drop=True)


def _unmeasured(group: pd.DataFrame) -> dict[str, str]:
    """Failed or skipped rungs, with their error: never dropped silently."""
    out: dict[str, str] = {}
    repeats = group["repeat"].nunique()
    bad = group[group["status"] != "ok"]
    for rung, rows in bad.groupby("rung", sort=False):
        parts = []
        for (status, error), cells in rows.groupby(["status", "error"], sort=True):
            which = sorted({int(r) for r in cells["repeat"]})
            where = "" if repeats == 1 else f" in repeat {', '.join(map(str, which))} of {repeats}"
            parts.append(f"{status}{where}: {error or 'no error recorded'}")
        out[str(rung)] = "; ".join(parts)
    return out


def _paired(above: pd.Series, below: pd.Series) -> noise.Ratio | None:
    """Below over above, from the repeats in which both were measured."""
    both = pd.concat([above, below], axis=1, keys=["a", "b"]).dropna()
    both = both[(both["a"] > 0) & (both["b"] > 0)]
    if both.empty:
        return None
    return noise.paired_ratio(list(both["a"]), list(both["b"]))


def _lower(ratio: noise.Ratio | None) -> bool:
    """Below beyond the noise: called, or with one run, lower by more than UNTESTED_FLOOR."""
    if ratio is None:
        return False
    if ratio.tested:
        return ratio.called() and ratio.estimate < 1
    return ratio.estimate < 1 - noise.UNTESTED_FLOOR


def _higher(ratio: noise.Ratio | None) -> bool:
    if ratio is None:
        return False
    if ratio.tested:
        return ratio.called() and ratio.estimate > 1
    return ratio.estimate > 1 + noise.UNTESTED_FLOOR


def _walk(
    rates: pd.DataFrame, names: list[str], *, top: str | None = None, on_cpu: bool = False
) -> list[_Stage]:
    """The stages between neighbouring rungs (columns of `rates`, top first). With `top`, the
    first rung's whole time is a stage too (loader time: a cached batch costs none); it is
    named when its share of the last rung's time is one a user would act on."""
    rungs = list(rates.columns)
    median = {r: float(rates[r].median()) for r in rungs}
    stages = []
    if top is not None and rungs:
        first, tested = rungs[0], int(rates[rungs[0]].notna().sum()) > 1
        cost = 1 / median[first]
        floor = noise.PRACTICAL if tested else noise.UNTESTED_FLOOR
        named = cost * median[rungs[-1]] >= floor
        stages.append(_Stage(stage_between(top, first, names), None, first, None, cost, named))
    for above, below in pairwise(rungs):
        ratio = _paired(rates[above], rates[below])
        judged = not (on_cpu and below == "host_batch")  # no copy on a CPU device: noise only
        stages.append(
            _Stage(
                stage_between(above, below, names),
                above,
                below,
                ratio,
                1 / median[below] - 1 / median[above],
                named=judged and _lower(ratio),
                faster=judged and _higher(ratio),
            )
        )
    return stages


def _transform_group(rates: pd.DataFrame, stages: list[_Stage]) -> _Stage | None:
    """With transform:<k> cuts, each cut may sit under the noise while the transforms together
    clearly do not: then name them together, with their costliest step."""
    rungs = list(rates.columns)
    if "processed_sample" not in rungs or "raw_sample" not in rungs:
        return None
    top, bottom = rungs.index("processed_sample"), rungs.index("raw_sample")
    if bottom - top < 2 or any(s.named and s.label.startswith("transform") for s in stages):
        return None  # no cuts between them, or a single transform already named
    ratio = _paired(rates["processed_sample"], rates["raw_sample"])
    if not _lower(ratio):
        return None
    cuts = [s for s in stages if s.above in rungs[top:bottom]]
    cost = 1 / float(rates["raw_sample"].median()) - 1 / float(rates["processed_sample"].median())
    worst = max(cuts, key=lambda s: s.cost)
    return _Stage("transforms", "processed_sample", "raw_sample", ratio, cost, True, worst=worst)


@dataclass
class _Capacity:
    """The loader's side: capacities against the device's demand."""

    stages: list[_Stage]  # loader seconds per batch each stage adds
    ref: str  # the lowest rung with a capacity (full when measured)
    demand: float
    capacity: float
    short: dict[str, bool]  # capacity below the demand beyond the noise, per rung
    vs_demand: noise.Ratio | None  # ref's capacity over the demand
    near: bool  # ref's steps/s not below the bound beyond the noise
    tip: _Stage | None  # from the last rung that keeps up to the first that does not

    def share(self, stage: _Stage) -> float:
        """The stage's share of the loader's time per batch at ref."""
        return stage.cost * self.capacity

    def named(self) -> list[_Stage]:
        return sorted((s for s in self.stages if s.named), key=lambda s: -s.cost)

    def costliest(self) -> _Stage:
        return (self.named() or sorted(self.stages, key=lambda s: -s.cost))[0]


def _capacity(lad: _Ladder) -> _Capacity | None:
    """None where there is nothing to compare: no capacity, or no bound rung for the demand."""
    rungs = [r for r in lad.rungs if rung_names.is_sample_level(r) and lad.capacity[r].notna().any()]
    if not rungs or not lad.has_bound:
        return None
    rates = lad.capacity[rungs]
    stages = _walk(rates, lad.names, top="host_batch")
    group = _transform_group(rates, stages)
    if group is not None:
        stages.append(group)  # its cuts stay: each has a row in the table
    demand = lad.steps[lad.bound]
    vs = {r: _paired(demand, rates[r]) for r in rungs}
    short = {r: _lower(vs[r]) for r in rungs}
    ref = rungs[-1]
    tip = None
    first_short = next((i for i, r in enumerate(rungs) if short[r]), None)
    if first_short:  # not None and not the top rung: the rung above it keeps up
        tip = next(s for s in stages if s.below == rungs[first_short] and s.above == rungs[first_short - 1])
    return _Capacity(
        stages=stages,
        ref=ref,
        demand=float(demand.median()),
        capacity=float(rates[ref].median()),
        short=short,
        vs_demand=vs[ref],
        near=_near(_paired(demand, lad.steps[ref])),
        tip=tip,
    )


def _near(reach: noise.Ratio | None) -> bool:
    """full's steps/s near the bound: not lower beyond the noise, and not lower by more than
    UNTESTED_FLOOR either (a 48 % loss that two wide repeats cannot confirm is no "keeps up")."""
    return not _lower(reach) and (reach is None or reach.estimate >= 1 - noise.UNTESTED_FLOOR)


def _verdict(host: str, sweep: str, point: str, group: pd.DataFrame) -> Verdict | None:
    lad = _ladder(group)
    if lad is None:
        return None
    steps = _walk(lad.steps, lad.names, on_cpu=lad.on_cpu)
    _fill_table(lad, steps)
    verdict = Verdict(
        hostname=host,
        sweep_id=sweep,
        point_id=point,
        table=lad.table,
        sentence="",
        bound=lad.bound,
        demand=lad.rate(lad.bound) if lad.has_bound else None,
        repeats=lad.repeats,
        unmeasured=lad.unmeasured,
    )
    cap = _capacity(lad)
    if cap is not None:
        _fill_capacity(lad, cap)
        verdict.capacity_full = cap.capacity if cap.ref == "full" else None
        _capacity_verdict(verdict, lad, cap, steps)
    else:
        _drop_verdict(verdict, lad, steps)
    if lad.repeats == 1:
        verdict.sentence += f" ({noise.UNTESTED})"
    verdict.caveats = [f"{rung} {why}" for rung, why in lad.unmeasured.items()] + verdict.caveats
    verdict.caveats += _caveats(lad)
    return verdict


def _fill_table(lad: _Ladder, steps: list[_Stage]) -> None:
    """The steps/s columns: what each rung adds, its drop from the rung above (paired ratio)
    with the interval, the seconds per step it adds, and its share of the bound."""
    t = lad.table
    by_below = {s.below: s for s in steps}
    t["adds"] = [by_below[r].label if r in by_below else "" for r in t["rung"]]
    t["ratio"] = [by_below[r].ratio if r in by_below else None for r in t["rung"]]
    t["drop"] = [float("nan") if r is None else 1 - r.estimate for r in t["ratio"]]
    t["added_s"] = [by_below[r].cost if r in by_below else float("nan") for r in t["rung"]]
    t["of_bound"] = t["steps_per_s"] / lad.rate(lad.bound)
    t["loader_s"] = 1 / t["capacity"]
    t["loader_share"] = float("nan")
    t["loader_ratio"] = None


def _fill_capacity(lad: _Ladder, cap: _Capacity) -> None:
    """The loader columns: each rung's stage share of the loader's time, and its paired ratio."""
    t = lad.table
    for stage in cap.stages:
        if stage.worst is not None:
            continue  # the group: its cuts have rows of their own
        row = t.index[t["rung"] == stage.below][0]
        t.at[row, "loader_share"] = cap.share(stage)
        t.at[row, "loader_ratio"] = stage.ratio


def _capacity_verdict(v: Verdict, lad: _Ladder, cap: _Capacity, steps: list[_Stage]) -> None:
    reach = f"{cap.ref} reaches {lad.rate(cap.ref) / lad.rate(lad.bound):.0%} of the bound"
    delivers = (
        f"{cap.ref} delivers {cap.capacity:.1f} batches/s against the step's demand of "
        f"{cap.demand:.1f} ({lad.bound}): {_times(cap.capacity / cap.demand)}"
    )
    missing = _full_missing(lad, cap.ref)
    if cap.short[cap.ref]:
        v.keeps_up = False
        named = cap.named()
        costliest = cap.costliest()
        v.stages, v.costliest = [s.label for s in named], costliest.label
        v.sentence = f"the input pipeline does not keep up: {delivers}; {reach}. {_costs(cap, named)}"
        if cap.tip is not None and cap.tip.label != costliest.label:
            v.tipped_by = cap.tip.label
            above = str(cap.tip.above)
            v.sentence += (
                f"; {cap.tip.label} ({cap.share(cap.tip):.0%} of the loader's time) only tipped it "
                f"over: {above} keeps up ({float(lad.capacity[above].median()):.1f} batches/s)"
            )
        v.sentence += missing
    elif cap.vs_demand is not None and cap.vs_demand.estimate < 1:
        # Below the demand, but not beyond the noise: neither "keeps up" nor "does not".
        v.keeps_up = None
        named = cap.named()
        v.stages, v.costliest = [s.label for s in named], cap.costliest().label
        v.sentence = (
            f"the input pipeline is at the edge: {delivers}, short of it within the noise "
            f"({cap.vs_demand.interval_text()}); {reach}. {_costs(cap, named)}{missing}"
        )
    elif not cap.near:
        # The loader alone keeps up, yet steps are lost: to the copy of fresh batches, or to the
        # workers competing with the step for the CPU. The drops say where it shows.
        v.keeps_up = False if cap.ref == "full" else None
        named_steps = sorted((s for s in steps if s.named), key=lambda s: -s.cost)
        v.stages = [s.label for s in named_steps]
        v.costliest = v.stages[0] if v.stages else None
        clauses = "; ".join(_drop_clause(s) for s in named_steps) or "no single stage stands out"
        v.sentence = (
            f"the loader keeps up ({delivers}) but {reach}: the loss is outside the loader's "
            f"throughput (the copy of fresh batches, or the CPU shared with the step); {clauses}{missing}"
        )
    else:
        v.keeps_up = True if cap.ref == "full" else None
        who = (
            "the input pipeline keeps up" if cap.ref == "full" else f"down to {cap.ref}, the loader keeps up"
        )
        v.sentence = f"{who}: {delivers}; {reach}{missing}"


def _times(ratio: float) -> str:
    """53%, or 12.3× where a percentage would run to thousands."""
    return f"{ratio:.0%}" if ratio < 2 else f"{ratio:.1f}×"


def _costs(cap: _Capacity, named: list[_Stage]) -> str:
    if not named:
        worst = cap.costliest()
        return (
            f"no stage's cost stands out above the noise; the most is {worst.label} "
            f"({cap.share(worst):.0%} of the loader's time at {cap.ref})"
        )
    first, rest = named[0], named[1:]
    text = f"costliest: {first.label} ({cap.share(first):.0%} of the loader's time at {cap.ref})"
    if rest:
        text += ", then " + ", ".join(f"{s.label} ({cap.share(s):.0%})" for s in rest)
    return text


def _full_missing(lad: _Ladder, ref: str) -> str:
    """Where the figures stop above full: why, since the whole pipeline is then not judged."""
    if ref == "full":
        return ""
    why = "not in the ladder" if "full" not in lad.unmeasured else lad.unmeasured["full"].split()[0]
    if "full" in lad.rungs:
        why = "measured without a loader capacity"
    return f"; full {why}: whether the whole pipeline keeps up is not known"


def _drop_verdict(v: Verdict, lad: _Ladder, steps: list[_Stage]) -> None:
    """No capacity to compare: name the stages whose drop in steps/s is beyond the noise."""
    group = _transform_group(lad.steps, steps)
    named = [s for s in steps if s.named] + ([group] if group is not None else [])
    named.sort(key=lambda s: -s.cost)
    bottom = lad.rungs[-1]
    if len(lad.rungs) < 2:
        v.sentence = f"only {bottom} was measured: nothing to compare it with"
        return
    reach = f"{bottom} reaches {lad.rate(bottom) / lad.rate(lad.bound):.0%} of the bound ({lad.bound})"
    near = not _lower(_paired(lad.steps[lad.bound], lad.steps[bottom]))
    v.stages = [s.label for s in named]
    v.costliest = v.stages[0] if v.stages else None
    if not named and near:
        v.keeps_up = True if bottom == "full" else None
        who = (
            "the input pipeline keeps up" if bottom == "full" else f"down to {bottom}, the pipeline keeps up"
        )
        v.sentence = f"{who}: {reach}{_full_missing(lad, bottom)}"
    elif not named:
        v.keeps_up = False
        v.sentence = f"no single stage stands out above the noise; {reach}"
    else:
        v.keeps_up = False
        v.sentence = "; ".join(_drop_clause(s) for s in named) + f". {reach}"
    if v.keeps_up is False:
        v.caveats.append(_no_demand(lad) if lad.has_capacity else NO_CAPACITY)
    v.caveats += _cpu_saturated(lad, named)


def _drop_clause(s: _Stage) -> str:
    assert s.ratio is not None
    ci = f", {s.ratio.interval_text()}" if s.ratio.tested else ""
    text = f"{s.label}: −{1 - s.ratio.estimate:.0%} ({s.below} vs {s.above}{ci})"
    if s.worst is not None and s.worst.ratio is not None:
        text += f", the most in {s.worst.label} (−{1 - s.worst.ratio.estimate:.0%})"
    return text


def _no_demand(lad: _Ladder) -> str:
    return (
        "loader capacities were measured but no device_batch or host_batch rung gives the step's "
        "demand to compare them with: a stage named by its drop may only have tipped the loader over"
    )


def _cpu_saturated(lad: _Ladder, named: list[_Stage]) -> list[str]:
    out = []
    t = lad.table.set_index("rung")
    for s in named:
        below = t.loc[s.below]
        if below["busy_cores"] >= SATURATED * below["cpus_allotted"]:
            out.append(
                f"the CPU was saturated on {s.below} ({below['busy_cores']:.1f} of "
                f"{below['cpus_allotted']:.0f} cores busy): {s.label} may only have tipped it "
                "over; another stage may be the one to optimise (001_*)"
            )
    return out


def _caveats(lad: _Ladder) -> list[str]:
    t = lad.table
    out = []
    for stage in _walk(lad.steps, lad.names, on_cpu=lad.on_cpu):
        if stage.faster and stage.ratio is not None:
            out.append(
                f"{stage.below} is {stage.ratio.change:.0%} faster than {stage.above} above it: "
                "noise, or caching changed the work (a cached sample of another size or content)"
            )
    if lad.on_cpu and set(rung_names.BOUND_RUNGS) <= set(t["rung"]):
        out.append("device cpu: device_batch and host_batch measure the same thing; no copy is assessed")
    out += _step_on_the_cpu(lad)
    shapes = t["input_shapes"].max()
    if pd.notna(shapes) and shapes > 1:
        # The batch dimension is not counted (train_step.py): a partial last batch is no
        # variation; several shapes mean the samples themselves differ.
        out.append(
            f"inputs vary in size ({int(shapes)} sample shapes seen): a single cached sample or "
            "batch may not reflect real steps (001_*)"
        )
    return out


def _step_on_the_cpu(lad: _Ladder) -> list[str]:
    """A step that computes on the CPU shares the cores with the loader's workers in training,
    not while the capacity is measured (the loader alone): the capacities are then upper
    bounds. A GPU step, or the emulated one, leaves the cores to the loader."""
    if not (lad.on_cpu and lad.has_bound and lad.has_capacity):
        return []
    bound = lad.table.set_index("rung").loc[lad.bound]
    if not bound["main_cores"] >= STEP_ON_CPU:  # NaN (not sampled) too
        return []
    return [
        f"the step computes on the CPU ({bound['main_cores']:.1f} cores busy on {lad.bound}): in "
        "training it shares the cores with the loader's workers, so the loader capacities, "
        "measured without it, are upper bounds; on a GPU node it leaves them the cores "
        "(model: emulated stands in for such a step)"
    ]


def stage_between(above: str, below: str, transform_names: list[str]) -> str:
    """What a step on `below` pays that a step on `above` does not, in words."""
    stages = _elementary(transform_names)
    order = [rung for rung, _ in stages]
    start, end = order.index(above), order.index(below)
    labels = [label for _, label in stages[start + 1 : end + 1]]
    transforms = [label for label in labels if label.startswith("transform ")]
    words = [label for label in labels if not label.startswith("transform ")]
    if transforms:
        n = len(transform_names)
        if len(transforms) == n or not transform_names:
            group = "transforms"
        elif len(transforms) == 1:
            group = transforms[0]
        else:
            group = "transforms " + ", ".join(t.removeprefix("transform ") for t in reversed(transforms))
        # Transforms sit between the collation stage above them and the loading stages below.
        first = next(i for i, label in enumerate(labels) if label.startswith("transform "))
        words.insert(first, group)
    if "decoding" in words and "reading the stored bytes" in words:
        words = [w for w in words if w not in ("decoding", "reading the stored bytes")] + ["raw data loading"]
    return " + ".join(words)


def _elementary(transform_names: list[str]) -> list[tuple[str, str]]:
    """The ladder from the top, each rung with the one stage that separates it from the rung
    just above it when every rung is measured."""
    n = len(transform_names)
    stages: list[tuple[str, str]] = [
        ("device_batch", ""),
        ("host_batch", "host-to-device copy"),
        ("processed_sample", "collation and worker IPC"),
    ]
    if n:
        for k in range(n - 1, 0, -1):
            stages.append((f"transform:{k}", f"transform {k + 1}/{n} ({transform_names[k]})"))
        stages.append(("raw_sample", f"transform 1/{n} ({transform_names[0]})"))
    else:
        stages.append(("raw_sample", "transform all"))
    stages.append(("raw_bytes", "decoding"))
    stages.append(("full", "reading the stored bytes"))
    return stages


def _interval(ratio: noise.Ratio | None) -> str:
    """A paired ratio's 95 % interval as a change, short enough for a table cell."""
    if ratio is None or ratio.low is None or ratio.high is None:
        return ""
    # Two repeats of a fast, jittery loader can give an interval of ×0.001..×1000: past ±999 %
    # the digits say nothing more than "anything".
    low = f"{ratio.low - 1:+.0%}"
    high = f"{ratio.high - 1:+.0%}" if ratio.high < 11 else ">+999%"
    return f"{low}..{high}"


def _cell(fmt: str) -> Callable[[float], str]:
    return lambda v: "" if pd.isna(v) else fmt.format(v)


def render_verdict(verdict: Verdict, fmt: str = "terminal") -> str:
    t = verdict.table
    shown = pd.DataFrame(
        {
            "rung": t["rung"],
            "adds": t["adds"],
            "steps/s": t["steps_per_s"].map(_cell("{:.2f}")),
            "samples/s": t["samples_per_s"].map(_cell("{:.1f}")),
            "% of bound": t["of_bound"].map(_cell("{:.0%}")),
            "drop": t["drop"].map(lambda v: "" if pd.isna(v) else f"{-v:+.0%}"),
        }
    )
    if verdict.repeats > 1:
        shown["95% CI"] = t["ratio"].map(_interval)
    if t["capacity"].notna().any():
        shown["loader b/s"] = t["capacity"].map(_cell("{:.1f}"))
        shown["loader share"] = t["loader_share"].map(_cell("{:.0%}"))
        if verdict.repeats > 1:
            shown["loader CI"] = t["loader_ratio"].map(_interval)
    if t["gpu_util"].notna().any():
        shown["gpu_util"] = t["gpu_util"].map(_cell("{:.0f}"))
    if t["busy_cores"].notna().any():
        shown["busy cores"] = t["busy_cores"].map(_cell("{:.1f}"))
    body = tabulate(shown, headers="keys", tablefmt=FORMATS[fmt], showindex=False, disable_numparse=True)
    lines = [f"caching ladder, node {verdict.hostname}, point {verdict.point_id}", body, verdict.sentence]
    lines += [f"caveat: {c}" for c in verdict.caveats]
    return "\n".join(lines)
