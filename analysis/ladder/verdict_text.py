"""The caching ladder's verdict in words: the stages' names, the sentence, the caveats and the
rung table, from what analysis.ladder.verdict decided. Nothing here decides: every branch follows a
state or a figure that the judgement set (`Verdict.state`, the stages it named, the ratios it
judged), so that a change of wording never changes a verdict, and the reverse.

The states (analysis.ladder.verdict): the loader's capacity against the step's demand, by the three-way
judgement of analysis.noise with its ±5 % margin: *does not keep up* (wholly below the margin),
*at the edge* (inside it), *keeps up* (beyond it, and full's steps/s not below the bound's),
*the loss is outside the loader* (it keeps up, yet full's steps/s are below the bound's), or
*undecided* (an interval across an edge of the margin: the sentence gives the repeats that
would likely decide).

The stages are named by what each rung caches (stage_between), except where full is a loader
the harness did not build (the rows' loader_given): that stage is the loader as given, never a
split into collation, transforms and reading the harness cannot see.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from tabulate import tabulate

from analysis import noise
from analysis.ladder import caching, headline
from analysis.ladder.figures import Capacity, Ladder, Stage, Verdict

KEEPS_UP, AT_THE_EDGE, SHORT = "keeps up", "at the edge", "does not keep up"
LOSS_OUTSIDE, UNDECIDED = "loss outside the loader", "undecided"
"""The verdict's states (Verdict.state), named here, where they are words."""
FORMATS = {"terminal": "simple", "markdown": "github", "latex": "latex_booktabs", "csv": "tsv"}
MARGIN = f"±{noise.MARGIN:.0%}"
NO_CAPACITY = (
    "the loader's capacity was not measured (measure.loader_capacity, or rows of an older "
    "harness): a stage named by its drop may only have tipped the loader over, and the "
    "costliest stage may be hidden (Rand's caching article)"
)
NO_DEMAND = (
    "loader capacities were measured but no device_batch or host_batch rung gives the step's "
    "demand to compare them with: a stage named by its drop may only have tipped the loader over"
)
CPU_COPY = "device cpu: device_batch and host_batch measure the same thing; no copy is assessed"


def capacity_sentence(v: Verdict, lad: Ladder, cap: Capacity, named_steps: list[Stage]) -> str:
    """The sentence of a ladder whose loader capacities were measured, for v.state."""
    reach = f"{cap.ref} reaches {lad.rate(cap.ref) / lad.rate(lad.bound):.0%} of the bound"
    delivers = (
        f"{cap.ref} delivers {cap.capacity:.1f} batches/s against the step's demand of "
        f"{cap.demand:.1f} ({lad.bound}): {times(cap.capacity / cap.demand)}"
    )
    missing = full_missing(lad, cap.ref)
    costs_ = costs(cap, cap.named())
    keeps = "keeps up"
    if v.room is not None:
        # The interval could not say it (two repeats: Student's t of 12.7); every repeat did.
        keeps = "keeps up with room to spare"
        delivers += f", at least {times(v.room)} in each of its {lad.repeats} repeats ({_ci(cap.vs_demand)})"
    if v.state == SHORT:
        text = f"the input pipeline does not keep up: {delivers}; {reach}. {costs_}"
        if v.tipped_by is not None and cap.tip is not None:
            above = str(cap.tip.above)
            text += (
                f"; {cap.tip.label} ({cap.share(cap.tip):.0%} of the loader's time) only tipped it "
                f"over: {above} keeps up ({float(lad.capacity[above].median()):.1f} batches/s)"
            )
        return text + missing
    if v.state == AT_THE_EDGE:
        return (
            f"the input pipeline is at the edge: {delivers}, within {MARGIN} of it "
            f"({_ci(cap.vs_demand)}); {reach}. {costs_}{missing}"
        )
    if v.state == UNDECIDED and v.undecided_on == "demand":
        return (
            f"whether the input pipeline keeps up is undecided: {delivers} ({_ci(cap.vs_demand)}: "
            f"across an edge of the {MARGIN} margin){_runs(v)}; {reach}. {costs_}{missing}"
        )
    if v.state == UNDECIDED:
        return (
            f"the loader {keeps} ({delivers}); whether {cap.ref} keeps up with the bound is "
            f"undecided: {reach} ({_ci(cap.reach)}){_runs(v)}{missing}"
        )
    if v.state == LOSS_OUTSIDE:
        clauses = "; ".join(drop_clause(s) for s in named_steps) or "no single stage stands out"
        return (
            f"the loader {keeps} ({delivers}) but {reach}: the loss is outside the loader's "
            f"throughput (the copy of fresh batches, or the CPU shared with the step); {clauses}{missing}"
        )
    who = f"the input pipeline {keeps}" if cap.ref == "full" else f"down to {cap.ref}, the loader {keeps}"
    return f"{who}: {delivers}; {reach}{missing}"


def drop_sentence(v: Verdict, lad: Ladder, named: list[Stage], reach: noise.Estimate | None) -> str:
    """The sentence of a ladder without loader capacities: the drops in steps/s, for v.state."""
    bottom = lad.rungs[-1]
    if len(lad.rungs) < 2:
        return f"only {bottom} was measured: nothing to compare it with"
    reached = f"{bottom} reaches {lad.rate(bottom) / lad.rate(lad.bound):.0%} of the bound ({lad.bound})"
    if named:
        return "; ".join(drop_clause(s) for s in named) + f". {reached}"
    if v.state == KEEPS_UP:
        who = f"down to {bottom}, the pipeline" if bottom != "full" else "the input pipeline"
        return f"{who} keeps up: {reached}{full_missing(lad, bottom)}"
    if v.state == UNDECIDED:
        return (
            f"no stage's drop stands out, and whether {bottom} keeps up with the bound is undecided: "
            f"{reached} ({_ci(reach)}){_runs(v)}{full_missing(lad, bottom)}"
        )
    return f"no single stage stands out above the noise; {reached}"


def _ci(estimate: noise.Estimate | None) -> str:
    return "no repeat in common" if estimate is None else estimate.interval_text()


def _runs(v: Verdict) -> str:
    if v.runs_needed is None:
        return f"; more than {noise.MAX_RUNS} repeats would be needed"
    return f"; about {v.runs_needed} repeats would decide"


def times(ratio: float) -> str:
    """53%, or 12.3× where a percentage would run to thousands."""
    return f"{ratio:.0%}" if ratio < 2 else f"{ratio:.1f}×"


def costs(cap: Capacity, named: list[Stage]) -> str:
    """The headline: the stage of the largest estimated cost, said as not yet settled where its
    repeats disagree (never a smaller stage promoted for its tighter interval), then the
    settled ones (analysis.ladder.headline)."""
    top = cap.costliest()
    if not top.named and not top.unsettled:
        return (
            f"no stage's cost stands out above the noise; the most is {top.label} "
            f"({cap.share(top):.0%} of the loader's time at {cap.ref})"
        )
    if top.named:
        text = f"costliest: {top.label} ({cap.share(top):.0%} of the loader's time at {cap.ref})"
        rest = [s for s in named if s is not top]
        if rest:
            text += ", then " + ", ".join(f"{s.label} ({cap.share(s):.0%})" for s in rest)
        return text
    text = (
        f"costliest, not yet settled: {top.label} ({cap.share(top):.0%} of the loader's time at "
        f"{cap.ref}, estimated; its repeats disagree ({_ci(top.ratio)}){_settle(top)})"
    )
    if not named:
        return text
    # Other stages larger than the first settled one, unsettled too, are said, not dropped.
    unsure = [s for s in cap.stages if s.unsettled and s is not top and s.cost > named[0].cost]
    for s in sorted(unsure, key=lambda s: -s.cost):
        text += f"; {s.label} may cost more too ({cap.share(s):.0%} estimated, {_ci(s.ratio)})"
    return text + "; settled: " + ", ".join(f"{s.label} ({cap.share(s):.0%})" for s in named)


def _settle(stage: Stage) -> str:
    """The repeats that would settle an unsettled stage's cost, in words ("" where settled)."""
    if not stage.unsettled:
        return ""
    runs = headline.repeats_to_settle(stage)
    if runs is None:
        return f": more than {noise.MAX_RUNS} repeats would be needed to settle it"
    return f": about {runs} repeats would settle it"


def full_missing(lad: Ladder, ref: str) -> str:
    """Where the figures stop above full: why, since the whole pipeline is then not judged."""
    if ref == "full":
        return ""
    why = "not in the ladder" if "full" not in lad.unmeasured else lad.unmeasured["full"].split()[0]
    if "full" in lad.rungs:
        why = "measured without a loader capacity"
    return f"; full {why}: whether the whole pipeline keeps up is not known"


def drop_clause(s: Stage) -> str:
    assert s.ratio is not None
    ci = f", {s.ratio.interval_text()}" if s.ratio.tested else ""
    text = f"{s.label}: −{1 - s.ratio.estimate:.0%} ({s.below} vs {s.above}{ci})"
    if s.worst is not None and s.worst.ratio is not None:
        text += f", the most in {s.worst.label} (−{1 - s.worst.ratio.estimate:.0%})"
    return text


def saturated(s: Stage, busy: float, allotted: float) -> str:
    return (
        f"the CPU was saturated on {s.below} ({busy:.1f} of {allotted:.0f} cores busy): {s.label} "
        "may only have tipped it over; another stage may be the one to optimise (Rand's caching article)"
    )


def faster(s: Stage) -> str:
    assert s.ratio is not None
    return (
        f"{s.below} is {s.ratio.change:.0%} faster than {s.above} above it: noise, or caching "
        "changed the work (a cached sample of another size or content)"
    )


def step_on_cpu(cores: float, bound: str) -> str:
    return (
        f"the step computes on the CPU ({cores:.1f} cores busy on {bound}): in training it shares "
        "the cores with the loader's workers, so the loader capacities, measured without it, are "
        "upper bounds; on a GPU node it leaves them the cores (model: emulated stands in for such a step)"
    )


def shapes(count: int) -> str:
    return (
        f"inputs vary in size ({count} sample shapes seen): a single cached sample or batch may "
        "not reflect real steps (Rand's caching article)"
    )


SHARD_FIX = "Hugging Face: to_iterable_dataset(num_shards=...); webdataset: more tar files"
"""How the libraries people stream from are given more shards: the one wording, which the
run's log (harness.execution.runner.idle_text) and the grid's recommendation also use."""


def idle_workers(least: int, most: int, workers: int, ranks: int, rungs: list[str], *, stream: bool) -> str:
    """Workers that delivered no batch (`least` and `most` of a rank), what it means and the
    fix. Never more workers: a worker added to a stream short of shards idles too."""
    count = str(most) if least == most else f"{least} to {most}"
    whose = "" if ranks == 1 else f" of each rank ({ranks} ranks)"
    working = str(workers - most) if least == most else f"{workers - most} to {workers - least}"
    per = "" if ranks == 1 else " a rank"
    said = (
        f"idle workers: {count} of {workers} DataLoader workers{whose} delivered no batch on "
        f"{', '.join(rungs)}, so num_workers={workers} worked as {working}{per}"
    )
    if not stream:
        return f"{said}: an epoch has fewer batches than workers; more workers would idle too"
    return (
        f"{said}: the stream has fewer shards than its readers (num_workers × ranks); the fix is "
        f"more shards, at least {workers * ranks} ({SHARD_FIX}), not more workers: added ones would idle too"
    )


GIVEN_WHOLE = (
    "the loader as given (its reading, transforms, collation and hand-off: not split, the "
    "harness did not build it)"
)
"""A given loader's stage from a batch-level rung to full: its pipeline, whole. The harness
did not build the loader (workload.loader's factory, a script's loader under harness.probe:
the rows' loader_given), so it cannot say which of its parts the time went to."""


OWN_WORK, OWN_WORK_WHY = "the loader's own work", "(the loader as given, not split)"
SHORT_ADDS = {GIVEN_WHOLE: "the loader as given (not split)", f" {OWN_WORK_WHY}": ""}
"""The words the readable ladder table leaves out of its `adds` cells (the wide one keeps them):
the rows of a given loader say so once, in the row whose stage is the loader as given."""


def stage_between(above: str, below: str, transform_names: list[str], *, given: bool = False) -> str:
    """What a step on `below` pays that a step on `above` does not, in words. With `given`,
    full is a loader the harness did not build: from a batch-level rung, its pipeline whole
    (GIVEN_WHOLE); from a sample-level rung (a DataLoader the harness built over the loader's
    dataset), the stages between and whatever else the given loader does beyond that DataLoader."""
    if given and below == "full":
        if above in ("device_batch", "host_batch"):
            return GIVEN_WHOLE
        between = stage_between(above, below, transform_names)
        return f"{between} + {OWN_WORK} {OWN_WORK_WHY}"
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


def _interval(ratio: noise.Estimate | None) -> str:
    """A paired ratio's 95 % interval as a change, short enough for a table cell."""
    if ratio is None or ratio.low is None or ratio.high is None:
        return ""
    # Two repeats of a fast, jittery loader can give an interval of ×0.001..×1000: past ±999 %
    # the digits say nothing more than "anything".
    low = f"{ratio.low - 1:+.0%}"
    high = f"{ratio.high - 1:+.0%}" if ratio.high < 11 else ">+999%"
    return f"{low}..{high}"


def _short_adds(adds: str) -> str:
    for long, short in SHORT_ADDS.items():
        adds = adds.replace(long, short)
    return adds


def _cell(fmt: str) -> Callable[[float], str]:
    return lambda v: "" if pd.isna(v) else fmt.format(v)


READABLE = ["rung", "adds", "samples/s", "drop", "95% CI", "loader share"]
"""The ladder's columns a person reads (issue #38): each rung, the stage it adds, its rate, what
the stage costs in it (the drop, its interval) and in the loader's time; the rest with --wide
(steps/s, % of bound and the loader's batches/s, which the sentence says, its interval, and the
sampled figures)."""


def render_verdict(verdict: Verdict, fmt: str = "terminal", *, wide: bool = False) -> str:
    """The verdict's title, its table (with `wide`, every column; else READABLE's), its sentence
    and its caveats."""
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
    if not wide:
        shown = shown[[c for c in READABLE if c in shown]].copy()
        shown["adds"] = shown["adds"].map(_short_adds)
    body = tabulate(shown, headers="keys", tablefmt=FORMATS[fmt], showindex=False, disable_numparse=True)
    lines = [f"caching ladder, node {verdict.hostname}, point {verdict.point_id}", body, verdict.sentence]
    if verdict.idle is not None:
        lines.append(verdict.idle)
    if verdict.what_if is not None:
        lines.append(caching.sentence(verdict.what_if))
    lines += [f"caveat: {c}" for c in verdict.caveats]
    return "\n".join(lines)
