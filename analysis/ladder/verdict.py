"""The caching ladder's verdict, the judgement: per point and node, the rung table and whether
the input pipeline keeps up with the device, and if not, which stage costs the most (C. Rand,
the caching article, Towards Data Science 2025, listed at
https://towardsdatascience.com/author/chaimrand/).
Its words are analysis.ladder.verdict_text's; the ladder it judges is read from the rows by
analysis.ladder.measured, and each stage's cost and the capacity against the demand are
analysis.ladder.stages'.

With parallel workers a step takes about max(device step, loader work ÷ workers). A drop in
steps/s between two rungs therefore lands on whichever stage brings the loader under the
device's demand: when reading costs 27 % of the loader's work and the transforms 73 %, caching
the read is enough to keep up, the drop lands on reading and the transforms are never named
(the article warns of exactly this). So where the loader's capacity was measured (`loader_capacity`:
batches/s the same loader delivers with no train step), the verdict is read from capacities:

- the device's demand is the bound rung's steps/s (host_batch when measured: it includes the
  copy a fresh batch also pays; else device_batch);
- full's capacity over the demand is judged three ways (analysis.noise, ±5 % margin): below
  the margin, the pipeline *does not keep up*; inside it, it is *at the edge*; beyond it, it
  *keeps up* when full's steps/s are not below the bound's either, else the loss is *outside
  the loader*; an interval across an edge of the margin is *undecided*, with the repeats that
  would likely decide;
- loader time per batch is 1/capacity and adds up along the ladder: a stage costs
  1/cap(rung below) − 1/cap(rung above), named when its drop lies wholly beyond the margin,
  with its share of the loader's time at full;
- the stage that brings the loader from keeping up to not keeping up is named as having only
  tipped it over, when it is not the costliest;
- the headline is the stage of the largest estimated cost, said as not yet settled where its
  repeats disagree, and nothing where the loader delivered at least twice the demand in every
  repeat: it keeps up with room to spare, even where two repeats' interval cannot say it
  (analysis.ladder.headline).

Without capacities the verdict falls back on the drops in steps/s, and says the costliest stage
may be hidden. Every difference is judged by analysis.noise on the per-repeat figures of two
rungs measured in turn (ABC ABC): a paired ratio, never the difference of two medians. With one
repeat there is no interval: a drop beyond UNTESTED_FLOOR (10 %) stands in, and the sentence
says it is untested.
"""

from __future__ import annotations

import pandas as pd

from analysis import noise
from analysis.ladder import caching, headline, stages
from analysis.ladder import verdict_text as text
from analysis.ladder.figures import Capacity, Ladder, Stage, Verdict
from analysis.ladder.measured import ladder
from analysis.ladder.verdict_text import AT_THE_EDGE, KEEPS_UP, LOSS_OUTSIDE, SHORT, UNDECIDED
from harness_schema import rungs as rung_names

SATURATED = 0.90  # busy cores / allotted cores at which the CPU counts as saturated
STEP_ON_CPU = 0.5  # cores the training process keeps busy on the bound rung: a step on the CPU


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


def _verdict(host: str, sweep: str, point: str, group: pd.DataFrame) -> Verdict | None:
    lad = ladder(group)
    if lad is None:
        return None
    steps = stages.walk(lad.steps, lad.names, on_cpu=lad.on_cpu, given=lad.given)
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
    cap = stages.capacity(lad)
    if cap is not None:
        _fill_capacity(lad, cap)
        verdict.capacity_full = cap.capacity if cap.ref == "full" else None
        _capacity_verdict(verdict, lad, cap, steps)
        _keeps_up(verdict, cap.ref)
        # Wherever full is not shown to keep up: short, at the edge (a stall away from waiting),
        # or undecided against the demand.
        unsure = verdict.state in (SHORT, AT_THE_EDGE) or verdict.undecided_on == "demand"
        verdict.what_if = _caching(lad, cap) if unsure else None
    else:
        _drop_verdict(verdict, lad, steps)
        _keeps_up(verdict, lad.rungs[-1])
    if lad.repeats == 1:
        verdict.sentence += f" ({noise.UNTESTED})"
    verdict.caveats = [f"{rung} {why}" for rung, why in lad.unmeasured.items()] + verdict.caveats
    verdict.caveats += _caveats(lad)
    verdict.idle = _idle(group)
    return verdict


def _idle(group: pd.DataFrame) -> str | None:
    """The DataLoader workers that delivered no batch in the ok rows (idle_workers), in words;
    None where every worker delivered, or the rows do not say (older rows, no workers, a loader
    the harness did not build). Without a length (dataset_samples empty) the data is a stream
    short of shards; with one, an epoch short of batches."""
    if "idle_workers" not in group:
        return None
    ok = group[group["status"] == "ok"]
    idle = pd.to_numeric(ok["idle_workers"], errors="coerce")
    if not (idle > 0).any():
        return None
    per_rank = idle.groupby(ok["rank"]).max().fillna(0)
    workers = int(pd.to_numeric(ok.loc[idle > 0, "num_workers"], errors="coerce").max())
    rungs = sorted({str(r) for r in ok.loc[idle > 0, "rung"]}, key=rung_names.ladder_position)
    lengths = pd.to_numeric(ok["dataset_samples"], errors="coerce") if "dataset_samples" in ok else None
    # A stream may have a length (LitData's): the rows say which kind it is where they can.
    said = ok["dataset_stream"].astype(str).str.lower() if "dataset_stream" in ok else pd.Series(dtype=str)
    told = bool(said.isin(["true", "false"]).any())
    return text.idle_workers(
        int(per_rank.min()),
        int(per_rank.max()),
        workers,
        int(ok["rank"].nunique()),
        rungs,
        stream=bool(said.eq("true").any()) if told else lengths is None or bool(lengths.isna().all()),
    )


def _fill_table(lad: Ladder, steps: list[Stage]) -> None:
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


def _fill_capacity(lad: Ladder, cap: Capacity) -> None:
    """The loader columns: each rung's stage share of the loader's time, and its paired ratio."""
    t = lad.table
    for stage in cap.stages:
        if stage.worst is not None:
            continue  # the group: its cuts have rows of their own
        row = t.index[t["rung"] == stage.below][0]
        t.at[row, "loader_share"] = cap.share(stage)
        t.at[row, "loader_ratio"] = stage.ratio


def _capacity_state(cap: Capacity) -> tuple[str, str, noise.Estimate | None]:
    """(the state, what an undecided one is undecided on, the ratio that decided it)."""
    loader = stages.judge(cap.vs_demand)
    if loader == noise.LOWER:
        return SHORT, "", cap.vs_demand
    if loader == noise.UNDECIDED and not headline.has_room(cap):
        return UNDECIDED, "demand", cap.vs_demand
    if loader == noise.WITHIN:
        return AT_THE_EDGE, "", cap.vs_demand
    # The loader alone keeps up; steps may still be lost, to the copy of fresh batches or to
    # the workers competing with the step for the CPU.
    steps = stages.judge(cap.reach)
    if steps == noise.LOWER:
        return LOSS_OUTSIDE, "", cap.reach
    if steps == noise.UNDECIDED:
        return UNDECIDED, "bound", cap.reach
    return KEEPS_UP, "", cap.reach


def _capacity_verdict(v: Verdict, lad: Ladder, cap: Capacity, steps: list[Stage]) -> None:
    """State, stages and sentence from the loader's capacities against the step's demand."""
    v.state, v.undecided_on, deciding = _capacity_state(cap)
    if v.state == UNDECIDED and deciding is not None:
        v.runs_needed = deciding.runs_needed()
    if stages.judge(cap.vs_demand) == noise.UNDECIDED and headline.has_room(cap):
        v.room = cap.room  # the room to spare decided it, not the interval: the sentence says so
    named_steps = sorted((s for s in steps if s.named), key=lambda s: -s.cost)
    if v.state in (SHORT, AT_THE_EDGE) or v.undecided_on == "demand":
        v.stages = [s.label for s in cap.named()]
        v.costliest, v.costliest_settled = headline.loader_headline(cap)
    elif v.state in (LOSS_OUTSIDE, UNDECIDED):
        # The loader keeps up: steps/s lost on the way to full are the copy or the CPU shared
        # with the step, named where they drop; headlined unless the loader has room to spare.
        v.stages = [s.label for s in named_steps]
        if v.stages and not headline.has_room(cap):
            v.costliest, v.costliest_settled = v.stages[0], True
    if v.state == SHORT and cap.tip is not None and cap.tip.label != v.costliest:
        v.tipped_by = cap.tip.label
    v.sentence = text.capacity_sentence(v, lad, cap, named_steps)


def _caching(lad: Ladder, cap: Capacity) -> caching.CachingWhatIf | None:
    """Plumber's what-if, from the cached rungs that keep up with the demand (caching.py)."""
    if lad.sizes is None or cap.ref != "full":
        return None
    rates = {str(r): float(v) for r, v in lad.capacity.median().items() if pd.notna(v)}
    demand = lad.steps[lad.bound]
    return caching.what_if(
        lad.rungs,
        capacity=rates,
        # Above the demand beyond the margin, interval and all (as "keeps up" is judged): a
        # cache that only may keep up would leave the step a stall away from waiting again.
        keeps_up={r: stages.higher(stages.paired(demand, lad.capacity[r])) for r in rates},
        demand=cap.demand,
        sample_bytes=lad.sizes.sample_bytes,
        samples=lad.sizes.samples,
        limit_gb=lad.sizes.limit_gb,
        in_use_gb=lad.sizes.in_use_gb,
        transform_names=lad.names,
    )


def _keeps_up(v: Verdict, ref: str) -> None:
    """True or False only where full was judged; at the edge and undecided say neither."""
    whole = ref == "full"
    v.keeps_up = {
        KEEPS_UP: True if whole else None,
        SHORT: False,
        LOSS_OUTSIDE: False if whole else None,
    }.get(v.state)


def _drop_verdict(v: Verdict, lad: Ladder, steps: list[Stage]) -> None:
    """No capacity to compare: name the stages whose drop in steps/s is beyond the margin."""
    group = stages.transform_group(lad.steps, steps)
    named = [s for s in steps if s.named] + ([group] if group is not None else [])
    named.sort(key=lambda s: -s.cost)
    v.stages = [s.label for s in named]
    v.costliest = v.stages[0] if v.stages else None
    reach = stages.paired(lad.steps[lad.bound], lad.steps[lad.rungs[-1]]) if len(lad.rungs) > 1 else None
    if len(lad.rungs) > 1:
        near = stages.judge(reach)
        if named or near == noise.LOWER:
            v.state = SHORT
        elif near == noise.UNDECIDED:
            v.state, v.undecided_on = UNDECIDED, "bound"
            v.runs_needed = None if reach is None else reach.runs_needed()
        else:
            v.state = KEEPS_UP
    v.sentence = text.drop_sentence(v, lad, named, reach)
    if v.state == SHORT:
        v.caveats.append(text.NO_DEMAND if lad.has_capacity else text.NO_CAPACITY)
    v.caveats += _cpu_saturated(lad, named)


def _cpu_saturated(lad: Ladder, named: list[Stage]) -> list[str]:
    out = []
    t = lad.table.set_index("rung")
    for s in named:
        below = t.loc[s.below]
        if below["busy_cores"] >= SATURATED * below["cpus_allotted"]:
            out.append(text.saturated(s, below["busy_cores"], below["cpus_allotted"]))
    return out


def _caveats(lad: Ladder) -> list[str]:
    t = lad.table
    out = [
        text.faster(s)
        for s in stages.walk(lad.steps, lad.names, on_cpu=lad.on_cpu, given=lad.given)
        if s.faster
    ]
    if lad.on_cpu and set(rung_names.BOUND_RUNGS) <= set(t["rung"]):
        out.append(text.CPU_COPY)
    out += _step_on_the_cpu(lad)
    shapes = t["input_shapes"].max()
    if pd.notna(shapes) and shapes > 1:
        # The batch dimension is not counted (train_step.py): a partial last batch is no
        # variation; several shapes mean the samples themselves differ.
        out.append(text.shapes(int(shapes)))
    return out


def _step_on_the_cpu(lad: Ladder) -> list[str]:
    """A step that computes on the CPU shares the cores with the loader's workers in training,
    not while the capacity is measured (the loader alone): the capacities are then upper
    bounds. A GPU step, or the emulated one, leaves the cores to the loader."""
    if not (lad.on_cpu and lad.has_bound and lad.has_capacity):
        return []
    bound = lad.table.set_index("rung").loc[lad.bound]
    if not bound["main_cores"] >= STEP_ON_CPU:  # NaN (not sampled) too
        return []
    return [text.step_on_cpu(bound["main_cores"], lad.bound)]
