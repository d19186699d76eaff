"""The caching ladder's verdict, the judgement: per point and node, the rung table and whether
the input pipeline keeps up with the device, and if not, which stage costs the most (C. Rand,
the caching article, Towards Data Science 2025, listed at
https://towardsdatascience.com/author/chaimrand/).
Its words are analysis.ladder.verdict_text's.

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

from itertools import pairwise

import pandas as pd

from analysis import noise
from analysis.ladder import caching, headline
from analysis.ladder import verdict_text as text
from analysis.ladder.figures import Capacity, Ladder, Sizes, Stage, Verdict
from analysis.ladder.verdict_text import AT_THE_EDGE, KEEPS_UP, LOSS_OUTSIDE, SHORT, UNDECIDED, stage_between
from harness_schema import rungs as rung_names

SATURATED = 0.90  # busy cores / allotted cores at which the CPU counts as saturated
STEP_ON_CPU = 0.5  # cores the training process keeps busy on the bound rung: a step on the CPU


def _sizes(ok: pd.DataFrame) -> Sizes | None:
    """None for rows written before the columns existed."""
    if "cached_sample_bytes" not in ok:
        return None
    number = {c: pd.to_numeric(ok[c], errors="coerce") for c in ("cached_sample_bytes", "dataset_samples")}
    per_rung = number["cached_sample_bytes"].groupby(ok["rung"]).median().dropna()
    samples = number["dataset_samples"].max()
    limit = pd.to_numeric(ok.get("memory_limit_gb"), errors="coerce").min()
    full = ok[ok["rung"] == "full"]
    in_use = pd.to_numeric(full.get("cpu_memory_gb"), errors="coerce").groupby(full["rank"]).median().sum()
    return Sizes(
        sample_bytes={str(r): float(v) for r, v in per_rung.items()},
        samples=int(samples) if pd.notna(samples) else None,
        limit_gb=float(limit) if pd.notna(limit) else None,
        in_use_gb=float(in_use) if pd.notna(in_use) else 0.0,
    )


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


def _ladder(group: pd.DataFrame) -> Ladder | None:
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
    return Ladder(
        table=table,
        steps=per_repeat["steps_per_s"].unstack("rung")[measured],
        capacity=per_repeat["capacity"].unstack("rung")[measured],
        names=caching.transform_names(group["transform_names"].iloc[0]),
        on_cpu=bool((ok["device"] == "cpu").all()),
        bound=bound,
        unmeasured=unmeasured,
        sizes=_sizes(ok),
        given=_given(group),
    )


def _given(group: pd.DataFrame) -> bool:
    """The rows are of a loader the harness was given (loader_given names its class)."""
    if "loader_given" not in group:
        return False
    return bool(group["loader_given"].fillna("").astype(str).str.strip().ne("").any())


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
    """Medians over repeats, ladder order; `ci95` is the half-width of steps/s's 95 % interval
    over its estimate (analysis.noise.relative_half_width, the table's figure of the grid)."""
    by_rung = per_repeat.reset_index().groupby("rung")
    table = by_rung[
        ["steps_per_s", "samples_per_s", "capacity", "gpu_util", "busy_cores", "main_cores", "cpus_allotted"]
    ].median()
    table["ci95"] = by_rung["steps_per_s"].agg(lambda s: noise.relative_half_width(list(s)))
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


def _paired(above: pd.Series, below: pd.Series) -> noise.Estimate | None:
    """Below over above, from the repeats in which both were measured."""
    both = pd.concat([above, below], axis=1, keys=["a", "b"]).dropna()
    both = both[(both["a"] > 0) & (both["b"] > 0)]
    if both.empty:
        return None
    return noise.paired_ratio(list(both["a"]), list(both["b"]))


def _judge(ratio: noise.Estimate | None) -> str:
    """The three-way judgement of a paired ratio; with one repeat (no interval), beyond
    UNTESTED_FLOOR stands in for beyond the margin."""
    if ratio is None:
        return noise.UNDECIDED
    if ratio.tested:
        return ratio.judge()
    if ratio.estimate < 1 - noise.UNTESTED_FLOOR:
        return noise.LOWER
    return noise.HIGHER if ratio.estimate > 1 + noise.UNTESTED_FLOOR else noise.WITHIN


def _lower(ratio: noise.Estimate | None) -> bool:
    """Below by more than the margin, interval and all (one repeat: by UNTESTED_FLOOR)."""
    return ratio is not None and _judge(ratio) == noise.LOWER


def _higher(ratio: noise.Estimate | None) -> bool:
    return ratio is not None and _judge(ratio) == noise.HIGHER


def _walk(
    rates: pd.DataFrame,
    names: list[str],
    *,
    top: str | None = None,
    on_cpu: bool = False,
    given: bool = False,
) -> list[Stage]:
    """The stages between neighbouring rungs (columns of `rates`, top first). With `top`, the
    first rung's whole time is a stage too (loader time: a cached batch costs none); it is
    named when its share of the last rung's time is one a user would act on."""
    rungs = list(rates.columns)
    median = {r: float(rates[r].median()) for r in rungs}
    stages = []
    if top is not None and rungs:
        first, tested = rungs[0], int(rates[rungs[0]].notna().sum()) > 1
        cost = 1 / median[first]
        floor = noise.MARGIN if tested else noise.UNTESTED_FLOOR
        named = cost * median[rungs[-1]] >= floor
        stages.append(Stage(stage_between(top, first, names, given=given), None, first, None, cost, named))
    for above, below in pairwise(rungs):
        ratio = _paired(rates[above], rates[below])
        judged = not (on_cpu and below == "host_batch")  # no copy on a CPU device: noise only
        stages.append(
            Stage(
                stage_between(above, below, names, given=given),
                above,
                below,
                ratio,
                1 / median[below] - 1 / median[above],
                named=judged and _lower(ratio),
                faster=judged and _higher(ratio),
            )
        )
    return stages


def _transform_group(rates: pd.DataFrame, stages: list[Stage]) -> Stage | None:
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
    return Stage("transforms", "processed_sample", "raw_sample", ratio, cost, True, worst=worst)


def _capacity(lad: Ladder) -> Capacity | None:
    """None where there is nothing to compare: no capacity, or no bound rung for the demand."""
    rungs = [r for r in lad.rungs if rung_names.is_sample_level(r) and lad.capacity[r].notna().any()]
    if not rungs or not lad.has_bound:
        return None
    rates = lad.capacity[rungs]
    stages = _walk(rates, lad.names, top="host_batch", given=lad.given)
    group = _transform_group(rates, stages)
    if group is not None:
        stages.append(group)  # its cuts stay: each has a row in the table
    ref = rungs[-1]
    floor = noise.MARGIN if lad.repeats > 1 else noise.UNTESTED_FLOOR
    for stage in stages:
        # High up the ladder (thousands of batches/s) a drop can be large as a ratio and
        # nothing in seconds: a stage is named only at a share of the loader's time at ref
        # that a user would act on.
        stage.named = stage.named and stage.cost * float(rates[ref].median()) >= floor
    demand = lad.steps[lad.bound]
    vs = {r: _paired(demand, rates[r]) for r in rungs}
    short = {r: _lower(vs[r]) for r in rungs}
    tip = None
    first_short = next((i for i, r in enumerate(rungs) if short[r]), None)
    if first_short:  # not None and not the top rung: the rung above it keeps up
        tip = next(s for s in stages if s.below == rungs[first_short] and s.above == rungs[first_short - 1])
    return Capacity(
        stages=stages,
        ref=ref,
        demand=float(demand.median()),
        capacity=float(rates[ref].median()),
        short=short,
        vs_demand=vs[ref],
        reach=_paired(demand, lad.steps[ref]),
        tip=tip,
        room=headline.room(demand, rates[ref]),
    )


def _verdict(host: str, sweep: str, point: str, group: pd.DataFrame) -> Verdict | None:
    lad = _ladder(group)
    if lad is None:
        return None
    steps = _walk(lad.steps, lad.names, on_cpu=lad.on_cpu, given=lad.given)
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
    loader = _judge(cap.vs_demand)
    if loader == noise.LOWER:
        return SHORT, "", cap.vs_demand
    if loader == noise.UNDECIDED and not headline.has_room(cap):
        return UNDECIDED, "demand", cap.vs_demand
    if loader == noise.WITHIN:
        return AT_THE_EDGE, "", cap.vs_demand
    # The loader alone keeps up; steps may still be lost, to the copy of fresh batches or to
    # the workers competing with the step for the CPU.
    steps = _judge(cap.reach)
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
    if _judge(cap.vs_demand) == noise.UNDECIDED and headline.has_room(cap):
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
        keeps_up={r: _higher(_paired(demand, lad.capacity[r])) for r in rates},
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
    group = _transform_group(lad.steps, steps)
    named = [s for s in steps if s.named] + ([group] if group is not None else [])
    named.sort(key=lambda s: -s.cost)
    v.stages = [s.label for s in named]
    v.costliest = v.stages[0] if v.stages else None
    reach = _paired(lad.steps[lad.bound], lad.steps[lad.rungs[-1]]) if len(lad.rungs) > 1 else None
    if len(lad.rungs) > 1:
        near = _judge(reach)
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
        text.faster(s) for s in _walk(lad.steps, lad.names, on_cpu=lad.on_cpu, given=lad.given) if s.faster
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
