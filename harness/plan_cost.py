"""What each point of a plan costs, known before it runs: its warmup, its window, its time.

**Warmup.** The timed loop (harness/execution/loop.py) runs at least `warmup_steps` steps
before a sample-level rung's window, and at least the workers' stock (num_workers ×
prefetch_factor batches made before the step asks for them), then on, up to DRAIN_FACTOR ×
stock more, until the stock is used up. A batch-level rung (device_batch, host_batch) repeats
one batch: its warmup is `warmup_steps`. So `prefetch_factor: 1000000` is a warmup of
millions of steps, which the spec's `2+15 steps` never said.

**Time.** Only where the spec gives a train step's time (model `emulated`: `step_ms`, a
sleep the loader can only lengthen) is a point's least duration known; elsewhere the plan says
the per-step time is unknown, and what per-step time the point's limit would need.

**Auto windows** (`measure.steps: auto`) last at least `measure.seconds` and at most
`measure.max_seconds` each (the loop stops at the first block's end past it), and so does each
loader-capacity pass (as long as its window): their steps are not known before they run, their
duration is bounded, and the plan says both bounds.

**Refused or warned** (the refusals are certain, the warnings are not):

- A point whose least duration is past its limit (`limits.point_minutes`, else `slurm.time`)
  is refused: the emulated step is a lower bound and the steps are counted, so the point
  would be killed before it ends. So is a point whose auto windows' least seconds are.
  Auto windows whose most seconds are past it are warned about: they stop before their most
  where the rate is steady.
  With no per-step time, a point that fits its limit only at under FAST_STEP_S a step is
  warned about: that is implausible for a train step, but not known.
- `num_workers` past REFUSE_WORKERS_PER_CORE × the rank's cores is refused: 512 workers on a
  2-core node took 9 GB in 40 s (each worker a process with its copy of the dataset and its
  batches) and measure only the time-sharing. Past WARN_WORKERS_PER_CORE × the cores, a
  warning: labs measure oversubscription on purpose (jobs/dlojz_dataloader.yaml: 40 on 8).
- `measure.budget_minutes` bounds the repeats after the first round, never a window: a first
  round known to outlast it is refused (the budget cannot hold); with no per-step time, one
  that fits only at under FAST_STEP_S a step is warned about.

Torch-free, as `harness plan` must answer at once on a login node.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from harness.config.plan import Plan, Point
from harness.config.spec import Spec, SpecError
from harness.workloads.registry import EMULATED_STEP_MS
from harness_schema import rungs as rung_names
from harness_schema.settings import DRAIN_FACTOR, Scale
from harness_schema.slurm_time import time_seconds
from harness_schema.yaml_lines import load_yaml_with_lines

WARN_WORKERS_PER_CORE = 2
REFUSE_WORKERS_PER_CORE = 16
FAST_STEP_S = 1e-3
"""A train step (forward, backward, optimizer step: tens of kernels of ~10 µs each on a GPU, a
Python loop around them) under a millisecond is not to be expected: below it, a warning."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PointCost:
    point: Point
    stock: int | None
    """Batches the workers hold ready (num_workers × prefetch_factor); None where a script
    workload keeps its own loader settings."""
    warmup: tuple[int, int | None]
    """Steps before a sample-level rung's window: at least, at most (None: not known)."""
    steps: tuple[int, int | None]
    """Train steps of all its rungs and repeats (the first round): at least, at most."""
    step_s: float | None
    """The train step's least time where the spec gives it (emulated step_ms), else None."""
    seconds: float | None
    """Least duration: its train steps, and the loader-capacity passes (each at least its
    window's time), at step_s a step."""
    window_s: tuple[float, float] | None = None
    """With steps: auto, its windows' and capacity passes' seconds in all: at least, at most."""


def point_cost(point: Point) -> PointCost:
    m = point.measure
    loader = point.loader
    keeps = {"num_workers", "prefetch_factor"} & set(point.script_keeps)
    stock = None if keeps else (loader.num_workers * (loader.prefetch_factor or 0))
    least_warm = max(m.warmup_steps, stock or 0)
    warmup = (least_warm, None if stock is None else least_warm + DRAIN_FACTOR * stock)
    least, capacity_windows = 0, 0
    most: int | None = 0
    for rung in point.rungs:
        sample = rung_names.is_sample_level(rung)
        least += m.repeats * ((warmup[0] if sample else m.warmup_steps) + m.steps)
        high = warmup[1] if sample else m.warmup_steps
        # A window rounded up to whole periods of a bursty delivery: up to stock - 1 more steps.
        rounding = max((stock or 0) - 1, 0) if sample else 0
        most = None if most is None or high is None else most + m.repeats * (high + m.steps + rounding)
        capacity_windows += m.repeats if sample and _capacity(point) else 0
    windows = m.repeats * len(point.rungs) + capacity_windows
    window_s = (windows * (m.seconds or 0.0), windows * m.max_seconds) if m.max_seconds else None
    step_s = _step_seconds(point)
    seconds = None if step_s is None else step_s * (least + capacity_windows * m.steps)
    if step_s is not None and seconds is not None and m.seconds:
        # Each window lasts at least measure.seconds, and so does each loader-capacity pass.
        seconds += windows * max(m.seconds - step_s * m.steps, 0.0)
    return PointCost(
        point=point,
        stock=stock,
        warmup=warmup,
        # An auto window's steps are known only as it runs.
        steps=(least, None if window_s else most),
        step_s=step_s,
        seconds=seconds,
        window_s=window_s,
    )


def _capacity(point: Point) -> bool:
    """The loader alone after each sample-level rung (runner._capacity's rule)."""
    wanted = point.measure.loader_capacity
    return bool(set(rung_names.BOUND_RUNGS) & set(point.rungs)) if wanted == "auto" else bool(wanted)


def _step_seconds(point: Point) -> float | None:
    w = point.workload
    if w.script is not None or w.model != "emulated":
        return None
    return float(dict(w.model_args).get("step_ms", EMULATED_STEP_MS)) / 1000


def point_limit_s(spec: Spec) -> tuple[int, str]:
    """A point's time limit and the setting it comes from: `limits.point_minutes` where the
    spec gives it, else its job's, `slurm.time` (one array task runs all its rungs and
    repeats; harness/backends/limit.py applies the same rule to a job)."""
    if spec.limits.point_minutes is not None:
        return round(spec.limits.point_minutes * 60), "limits.point_minutes"
    return time_seconds(spec.slurm.time), "slurm.time"


def rank_cores(spec: Spec) -> tuple[int, str]:
    """The cores one rank is given, and where the figure comes from."""
    cfg = spec.slurm
    if cfg.cpus_per_task is not None:
        return cfg.cpus_per_task, "slurm.cpus_per_task"
    here = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    ranks = cfg.tasks_per_node
    share = max(1, here // ranks)
    return share, f"this machine's {here} / {ranks} rank(s): slurm.cpus_per_task not given"


def judge(plan: Plan) -> list[str]:
    """The plan's warnings; raises SpecError (one line, the field's line) on a refusal."""
    costs = [point_cost(p) for p in plan.points]
    warnings = _workers(plan)
    limit, source = point_limit_s(plan.spec)
    for cost in costs:
        _auto_least_against_limit(plan.spec, cost, limit, source)
        _against_limit(plan.spec, cost, limit, source)
    warnings += _unknown_against_limit(costs, limit, source)
    warnings += _auto_most_against_limit(costs, limit, source)
    warnings += _against_budget(plan.spec, costs)
    return warnings


def _workers(plan: Plan) -> list[str]:
    cores, source = rank_cores(plan.spec)
    workers = sorted({p.loader.num_workers for p in plan.points if "num_workers" not in p.script_keeps})
    absurd = [n for n in workers if n > REFUSE_WORKERS_PER_CORE * cores]
    if absurd:
        raise _refusal(
            plan.spec,
            "loader.num_workers",
            f"{absurd[-1]} is not allowed with {cores} core(s) a rank ({source}): past "
            f"{REFUSE_WORKERS_PER_CORE} workers a core they measure only the time-sharing, and each is "
            "a process with its copy of the dataset and its batches (512 workers on 2 cores took 9 GB "
            f"in 40 s); at most {REFUSE_WORKERS_PER_CORE * cores} here, or give the rank more cores",
        )
    many = [n for n in workers if n > WARN_WORKERS_PER_CORE * cores]
    if not many:
        return []
    return [
        f"loader.num_workers {', '.join(map(str, many))}: more than {WARN_WORKERS_PER_CORE} workers "
        f"a core on {cores} core(s) a rank ({source}); they time-share the cores (more memory, "
        "rarely more batches)"
    ]


def _against_limit(spec: Spec, cost: PointCost, limit: int, source: str) -> None:
    p, least = cost.point, cost.steps[0]
    if cost.seconds is not None and cost.seconds > limit:
        field, why = _dominant(cost)
        raise _refusal(
            spec,
            field,
            f"point {p.index} ({p.id}) takes at least {duration(cost.seconds)}: {least:,} train steps "
            f"of at least {_ms(cost.step_s)} (step_ms){why}, and its limit is {duration(limit)} "
            f"({source}): it would be killed before it ends; lower {field} or raise {source}",
        )


def _auto_least_against_limit(spec: Spec, cost: PointCost, limit: int, source: str) -> None:
    if cost.window_s is None or cost.window_s[0] <= limit:
        return
    p, m = cost.point, spec.measure
    raise _refusal(
        spec,
        "measure.seconds",
        f"point {p.index} ({p.id}) takes at least {duration(cost.window_s[0])}: {_windows(cost)} auto "
        f"windows of at least {m.seconds:g} s (measure.seconds), and its limit is {duration(limit)} "
        f"({source}): it would be killed before it ends; lower measure.seconds or raise {source}",
    )


def _auto_most_against_limit(costs: Sequence[PointCost], limit: int, source: str) -> list[str]:
    """One warning for the points whose auto windows may outlast their limit at their most."""
    over = [c for c in costs if c.window_s is not None and c.window_s[1] > limit]
    if not over:
        return []
    worst = max(over, key=lambda c: c.window_s[1] if c.window_s else 0.0)
    assert worst.window_s is not None
    m = worst.point.measure
    others = f" (and {len(over) - 1} other point(s))" if len(over) > 1 else ""
    return [
        f"point {worst.point.index} ({worst.point.id}){others}: its {_windows(worst)} auto windows of at "
        f"most {m.max_seconds:g} s (measure.max_seconds) take up to {duration(worst.window_s[1])}, past "
        f"its {duration(limit)} limit ({source}); a noisy rate would have it killed: lower "
        f"measure.max_seconds or raise {source}"
    ]


def _windows(cost: PointCost) -> int:
    """The auto windows of a point, its loader-capacity passes included (each as long)."""
    m = cost.point.measure
    return round(cost.window_s[1] / m.max_seconds) if cost.window_s and m.max_seconds else 0


def _unknown_against_limit(costs: Sequence[PointCost], limit: int, source: str) -> list[str]:
    """One warning for the points of unknown step time that fit their limit only at an
    implausible pace, named by the longest."""
    fast = [c for c in costs if c.seconds is None and limit / c.steps[0] < FAST_STEP_S]
    if not fast:
        return []
    worst = max(fast, key=lambda c: c.steps[0])
    others = f" (and {len(fast) - 1} other point(s))" if len(fast) > 1 else ""
    return [
        f"point {worst.point.index} ({worst.point.id}){others}: its {worst.steps[0]:,} train steps or "
        f"more fit its {duration(limit)} limit ({source}) only at under {_ms(limit / worst.steps[0])} "
        "a step; the spec gives no per-step time to tell (model: emulated has one)"
    ]


def _dominant(cost: PointCost) -> tuple[str, str]:
    """The field to lower: the warmup's source where it outweighs the window."""
    m = cost.point.measure
    if cost.warmup[0] <= m.steps:
        return ("measure.seconds" if m.auto_window else "measure.steps"), ""
    if (cost.stock or 0) > m.warmup_steps:
        loader = cost.point.loader
        return "loader.prefetch_factor", (
            f", each warmup at least {cost.warmup[0]:,} (the workers' stock, num_workers "
            f"{loader.num_workers} × prefetch_factor {loader.prefetch_factor}, is used up before the window)"
        )
    return "measure.warmup_steps", ""


def _against_budget(spec: Spec, costs: Sequence[PointCost]) -> list[str]:
    budget = spec.measure.budget_minutes
    if budget is None or not costs:
        return []
    first = spec.measure.repeats
    known = [c for c in costs if c.seconds is not None]
    worst = max(known, key=lambda c: c.seconds or 0.0) if known else None
    if worst is not None and worst.seconds is not None and worst.seconds > budget * 60:
        p = worst.point
        raise _refusal(
            spec,
            "measure.budget_minutes",
            f"{budget:g} cannot bound point {p.index} ({p.id}): the budget only decides whether to "
            f"measure more repeats after the first {first}, never cuts a window, and the first "
            f"{first} take at least {duration(worst.seconds)} ({worst.steps[0]:,} train steps of at "
            f"least {_ms(worst.step_s)}, step_ms); lower measure.steps or raise the budget",
        )
    unknown = [c for c in costs if c.seconds is None]
    longest = max(unknown, key=lambda c: c.steps[0]) if unknown else None
    if longest is not None and budget * 60 / longest.steps[0] < FAST_STEP_S:
        return [
            f"measure.budget_minutes {budget:g} bounds the repeats after the first {first}, never "
            f"a window: point {longest.point.index}'s first {first} ({longest.steps[0]:,} train "
            f"steps) fit it only at under {_ms(budget * 60 / longest.steps[0])} a step"
        ]
    return []


def _refusal(spec: Spec, field: str, message: str) -> SpecError:
    """The field's line in the spec file, where the spec is the file as written (an override
    has no line)."""
    line = None
    if spec.path is not None and spec.path.is_file() and spec.path.read_text("utf-8-sig") == spec.text:
        line = load_yaml_with_lines(spec.text).line_of(field)
    file = str(spec.path) if spec.path is not None else None
    return SpecError(message, file=file, line=line, field=field)


def duration(seconds: float) -> str:
    """1.2 s, 5.8 min, 3 h 20 min, 12 days."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{round(seconds / 60, 1):g} min"
    if seconds < 86400 * 2:
        hours, minutes = divmod(round(seconds / 60), 60)
        return f"{hours} h {minutes} min"
    return f"{seconds / 86400:,.0f} days"


def _ms(seconds: float | None) -> str:
    """A step's time in its unit: 1.5 s, 40 ms, 0.4 µs, 2 ns."""
    if seconds is None:
        return "?"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def sweep_lines(plan: Plan, costs: Sequence[PointCost] | None = None) -> list[str]:
    """What `harness plan` says under its table: the steps in all, and the duration, known or
    not (and the per-step time a point's limit would need). `costs`: the points' costs where
    the caller has them (the plan's table), in the points' order."""
    if costs is None:
        costs = [point_cost(p) for p in plan.points]
    least = sum(c.steps[0] for c in costs)
    highs = [c.steps[1] for c in costs]
    most = None if any(h is None for h in highs) else sum(h or 0 for h in highs)
    span = f"{least:,}" if most == least else f"{least:,} to {most:,}" if most else f"{least:,} or more"
    m = plan.spec.measure
    lines = [f"steps: {span} train steps in all (warmups until the workers' stock is used up)"]
    if m.auto_window:
        lines[0] = lines[0][:-1] + "; auto windows as many as their rate needs)"
    if m.adaptive:
        lines[0] += f"; repeats: auto measures more where undecided, up to {m.max_repeats} a point"
    elif m.decide is not None:
        lines[0] += f"; decide measures more of the contenders of the best, up to {m.decide} a point"
    limit, source = point_limit_s(plan.spec)
    if m.auto_window:
        lines.append(_auto_duration(costs, limit, source))
    elif all(c.seconds is not None for c in costs):
        total = sum(c.seconds or 0.0 for c in costs)
        longest = max(c.seconds or 0.0 for c in costs)
        lines.append(
            f"duration: at least {duration(total)} one point after another (inline, local); the "
            f"longest point at least {duration(longest)} of its {duration(limit)} limit ({source}); "
            "from the emulated step (step_ms), which the loader can only lengthen"
        )
    else:
        worst = max(c.steps[0] for c in costs)
        lines.append(
            f"duration: unknown per-step time (only model: emulated gives one); the longest "
            f"point's {worst:,} train steps fit its {duration(limit)} limit ({source}) at under "
            f"{_ms(limit / worst)} a step"
        )
    if m.follows_up:
        lines.append(_most_spent(costs, limit, source))
    if m.budget_minutes is not None:
        lines.append(
            f"budget: {m.budget_minutes:g} min a point bounds the repeats after the first "
            f"{m.repeats}, never a window"
        )
    return lines


def scale_lines(plan: Plan, costs: Sequence[PointCost]) -> list[str]:
    """Where the spec's sizes are an axis, what each size holds on a cluster: its points, and
    the node-hours they reserve (each point its nodes for its limit, at most; at least its
    least duration where the emulated step gives one). Nothing for a spec of one size."""
    if not plan.spec.scale_varies:
        return []
    limit, source = point_limit_s(plan.spec)
    by_scale: dict[Scale, list[PointCost]] = {}
    for cost in costs:
        by_scale.setdefault(cost.point.size(plan.spec.slurm), []).append(cost)
    lines = [
        f"scales: {len(by_scale)} sizes, one job array each on Slurm; node-hours at most: each "
        f"point holds its nodes for its {duration(limit)} limit ({source})"
    ]
    for scale, group in by_scale.items():
        most = scale.nodes * limit * len(group) / 3600
        least = ""
        if all(c.seconds is not None for c in group):
            hours = scale.nodes * sum(c.seconds or 0.0 for c in group) / 3600
            least = f", at least {_hours(hours)} (the emulated step)" if hours >= 0.01 else ""
        lines.append(f"  {scale.label()}: {len(group)} point(s), {_hours(most)} node-hours at most{least}")
    lines.append("  on Slurm each size's array starts after the one before (--dependency=afterany)")
    parallel = plan.spec.slurm.array_parallelism
    if parallel > 1 and any(len(group) > 1 for group in by_scale.values()):
        lines.append(
            f"  slurm.array_parallelism {parallel}: up to {parallel} points of one size run at once, "
            "sharing the storage they measure; 1 measures each alone"
        )
    return lines


def _hours(hours: float) -> str:
    """Node-hours as a reader compares them: 0.33, 12.5, 1,024; under 0.01 said so."""
    return "under 0.01" if hours < 0.01 else f"{hours:,.2f}" if hours < 100 else f"{hours:,.0f}"


def _most_spent(costs: Sequence[PointCost], limit: int, source: str) -> str:
    """The most a sweep with follow-ups may spend: every point brought to its most repeats,
    none past its limit or budget (harness/backends/adaptive.py, _room)."""
    m = costs[0].point.measure
    scale = m.most_repeats / m.repeats
    cap, why = limit, source
    if m.budget_minutes is not None and m.budget_minutes * 60 < limit:
        cap, why = round(m.budget_minutes * 60), "measure.budget_minutes"
    who = "every point" if m.adaptive else "every point, were each a contender"
    least = round(scale * sum(c.steps[0] for c in costs))
    highs = [c.steps[1] for c in costs]
    most = None if any(h is None for h in highs) else round(scale * sum(h or 0 for h in highs))
    steps = f"{least:,}" if most is None else f"{least:,} to {most:,}"
    known = all(c.seconds is not None for c in costs)
    pace = ""
    if known:
        seconds = sum(min(scale * (c.seconds or 0.0), max(cap, c.seconds or 0.0)) for c in costs)
        pace = f", at least {duration(seconds)} at the emulated step"
    return (
        f"at most: {m.most_repeats} repeats of {who}: {steps} train steps{pace}; no point's "
        f"measuring past {duration(cap)} ({why}); usually far less"
    )


def _auto_duration(costs: Sequence[PointCost], limit: int, source: str) -> str:
    """The duration of a plan of auto windows: bounded by their least and most seconds."""
    m = costs[0].point.measure
    least = sum(c.window_s[0] for c in costs if c.window_s)
    most = sum(c.window_s[1] for c in costs if c.window_s)
    longest = max(costs, key=lambda c: c.window_s[1] if c.window_s else 0.0)
    low, high = longest.window_s or (0.0, 0.0)
    return (
        f"duration: auto windows of {m.seconds:g} to {m.max_seconds:g} s each (measure.seconds, "
        f"measure.max_seconds), loader-capacity passes as long: {duration(least)} to "
        f"{duration(most)} one point after another (inline, local), warmups besides; the longest "
        f"point's {_windows(longest)} windows take {duration(low)} to {duration(high)} of its "
        f"{duration(limit)} limit ({source})"
    )


def warmup_cell(cost: PointCost) -> str:
    """The sample-level rungs' warmup (a batch-level rung's is warmup_steps): 5, 5-13, 5+."""
    if not any(rung_names.is_sample_level(r) for r in cost.point.rungs):
        return str(cost.point.measure.warmup_steps)
    low, high = cost.warmup
    return str(low) if high == low else f"{low}-{high}" if high is not None else f"{low}+"
