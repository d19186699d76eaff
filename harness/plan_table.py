"""The plan as `harness plan` prints it (`plan_text`): a head line (points x rungs x repeats, steps), a row
per point with the settings that vary between points, its rungs, its warmup and its
adjustments, and what the sweep costs (harness/plan_cost.py).

A view of harness.config.plan.Plan for the terminal; torch-free and pandas-free, so that
`harness plan` answers at once on a login node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.config.plan import Plan, Point
from harness.execution.loop_length import batches_before_run, stock_decided_by_script
from harness.plan_cost import point_cost, scale_lines, sweep_lines, warmup_cell
from harness.text_tables import render
from harness.workloads import registry
from harness_schema.settings import AUTO_RSE, MODEL_LOSS, OWN_LOSS


def plan_text(plan: Plan, overrides: Sequence[str], results_root: Path, fmt: str = "terminal") -> str:
    """All that `harness plan` prints: the table, the plan's notes, the overrides, the
    expectations, and the sbatch script `harness submit` would send (its sweep's folder under
    `results_root`); the table in `fmt` (harness/text_tables.py)."""
    from harness.backends.slurm.sbatch import job_folder, job_name, render_sbatch, submitit_command

    lines = [plan_table(plan, fmt)]
    lines += [f"note: {note}" for note in plan.notes]
    if overrides:
        lines.append(f"overrides: {' '.join(overrides)}")
    lines += [f"expect: {expectation.label()}" for expectation in plan.spec.expect]
    folder = job_folder(results_root.resolve() / plan.spec.name / "<sweep id>")
    spec = plan.spec
    for scale in spec.scale_axis():  # one array per size (one, for a spec of integers)
        count = sum(1 for p in plan.points if p.size(spec.slurm) == scale)
        cfg = spec.slurm.at(scale)
        script = render_sbatch(cfg, job_name(spec.name), folder, submitit_command(folder), count)
        which = f" for {scale.label()}" if spec.scale_varies else ""
        lines.append(f"\nsbatch script that `harness submit` sends{which} (one array task per point):")
        lines.append(f"\n{script}")
    return "\n".join(lines)


def plan_table(plan: Plan, fmt: str = "terminal") -> str:
    """The head line, the table of points in `fmt` (harness/text_tables.py), the sweep's cost."""
    varying = plan.varying_settings()
    adjusted = any(q.adjustments for q in plan.points)
    costs = [point_cost(p) for p in plan.points]  # once: the warmup column and the sweep's lines
    rows: list[dict[str, Any]] = []
    for p, cost in zip(plan.points, costs, strict=True):
        row: dict[str, Any] = {"#": p.index, "id": p.id}
        if p.sequence_step:
            row["step"] = p.sequence_step
        if plan.spec.scale_varies:  # the size a point runs at, where it is an axis
            scale = p.size(plan.spec.slurm)
            row.update(nodes=scale.nodes, gpus_per_node=scale.gpus_per_node, ranks=scale.world_size)
        row.update({k: _setting_cell(p, k, p.setting(k)) for k in varying})
        row["rungs"] = " ".join(p.rungs)
        row["warmup"] = warmup_cell(cost)
        if p.workload.script is not None:
            row["len(loader)"] = _loop_length(p)
        if adjusted:
            row["adjusted"] = "; ".join(p.adjustments)
        rows.append(row)
    spec = plan.spec
    m = spec.measure
    repeats = f"{m.repeats} repeat(s)"
    budget = f", {m.budget_minutes:g} min" if m.budget_minutes is not None else ""
    if m.adaptive:  # repeats: auto
        repeats = f"{m.repeats} repeat(s), more where undecided (auto: at most {m.max_repeats}{budget})"
    elif m.decide is not None:  # the contenders' follow-up
        repeats = (
            f"{m.repeats} repeat(s), more for the contenders of the best (decide: at most {m.decide}{budget})"
        )
    window = f"{m.steps:,} measured steps each"
    if m.auto_window:  # steps: auto
        window = (
            f"auto windows (at least {m.steps} steps and {m.seconds:g} s, on until the step rate "
            f"is known to {AUTO_RSE:.0%}, at most {m.max_seconds:g} s)"
        )
    head = (
        f"{spec.name}: {len(plan.points)} point(s) × {len(spec.rungs)} rung(s) × "
        f"{repeats}, {window} after a warmup (its column)"
    )
    notes = [LOOP_LENGTH_NOTE] if any(" a pass " in str(r.get("len(loader)", "")) for r in rows) else []
    lines = [head, render(rows, fmt), *notes, *sweep_lines(plan, costs), *scale_lines(plan, costs)]
    return "\n".join([*lines, *_loss_lines(plan)])


def _loss_lines(plan: Plan) -> list[str]:
    """How the loss is found, where the spec leaves it to the model: `loss: model`, or no loss
    and no step with a user's model (whose output may carry its loss: settings.OWN_LOSS)."""
    own = [p for p in plan.points if p.workload.loss == MODEL_LOSS]
    default = [
        p
        for p in plan.points
        if p.workload.loss is None
        and p.workload.step is None
        and p.workload.script is None
        and p.workload.model not in registry.MODELS
    ]
    lines = []
    if own:
        lines.append(
            f"loss: the model's own (output.loss or output['loss']) in {len(own)} point(s) (loss: model)"
        )
    if default:
        lines.append(
            f"loss: none given in {len(default)} point(s): the model's own where its output carries "
            f"one ({OWN_LOSS}), else cross-entropy on (inputs, targets)"
        )
    return lines


def _setting_cell(point: Point, name: str, value: Any) -> Any:
    """A setting's cell: its value, or "the script's" where the script keeps its own (the spec
    does not name it; Point.script_keeps) and PyTorch's rules do not decide it. A setting the
    spec leaves to the script varies between points only by those rules (prefetch_factor null
    and persistent_workers false without workers): with workers, the script's value is the one,
    unknown before it runs (the rows record it)."""
    if name in point.script_keeps and point.loader.num_workers > 0:
        return "the script's"
    return value


def _loop_length(point: Point) -> str:
    """The batches each `probe.measure` loop of the script receives (its loader's len()), or
    where the script's own settings decide it, that the probe says it at the start. With
    several repeats, each run of the script receives one repeat's where they run here (passes
    of one repeat: harness/backends/here.py), every repeat's on a scheduler (one job a point):
    both are said (LOOP_LENGTH_NOTE)."""
    count = batches_before_run(point)
    if count is None:
        return f"the script's (its own {'/'.join(stock_decided_by_script(point))})"
    if point.measure.repeats == 1:
        return f"{count:,}"
    one = batches_before_run(replace(point, measure=replace(point.measure, repeats=1)))
    return f"{one:,} a pass ({count:,} in one job)"


LOOP_LENGTH_NOTE = (
    "len(loader): the batches each run of the script receives; run here (inline, local) the "
    "repeats run one a pass, so each run receives one repeat's; on slurm a point's repeats run "
    "back to back in one job, which receives them all (in brackets)"
)
