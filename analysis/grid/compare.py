"""Compare two sets of results (before and after a change; two node types), configuration by
configuration.

A configuration is matched on its settings (the workload and loader columns of the rows, plus
dataset_args and model_args from plan.json, and the rung), never on point ids. A setting that
is constant in A and in B but differs between them (the change itself: batch_size 32 in A, 64
in B) is left out of the match and named under "what changed".

Judgements, by analysis.noise (the one noise model): the runs of a configuration on each side
(its repeats, and every point that measured it) are independent runs, unless the two sides'
runs took turns in the passes of one sweep (`run_pass`: two selections of one sweep run
here): then they are paired by pass, and the drift each pass shares cancels. Throughput: B over A is
*faster* or *slower* when its whole 95 % interval lies beyond the ±5 % margin, *same* when it
lies inside it, *undecided* otherwise (with the runs per side that would likely decide).
The wait for data (loading_time) is judged by what it costs a step: B − A as a share of A's
step time, against the same margin (5 % of a step). A wait of 2 ms that becomes 3 ms is +50 %
of itself and nothing to a 100 ms step; judged as a ratio of waits, an A/A comparison called
such changes "longer". With one run on a side there is no interval: the change is shown,
marked untested, and never called.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from analysis import noise
from analysis.aggregate import LOADER_COLUMNS, WORKLOAD_COLUMNS, summarize, type_label
from analysis.load import Loaded, load_results
from analysis.meta import load_meta
from analysis.render.tables import FORMATS
from analysis.sweep_plan import SweepPlan, load_plan
from harness_schema.settings import WORKER_ONLY

MATCH_COLUMNS = [*WORKLOAD_COLUMNS, *LOADER_COLUMNS, "rung"]  # dataset_args, model_args included
# Constant per side and different between them: named as what changed, not matched on.
# Not warmup_steps: the rows hold the effective warmup, which the runner lengthens until the
# loader's stock is drained, so it varies run to run; the spec's own value shows in its diff.
CONTEXT_COLUMNS = ["device", "world_size", "steps"]
# The size of a point (its ranks): where a side holds several (slurm.nodes as an axis, issue #40),
# a configuration is matched size by size, never pooled across sizes; one size a side stays
# context (named under "what changed" where the sides differ).
SIZE_COLUMNS = ["world_size"]
SOFTWARE = {
    "torch_version": "torch",
    "cuda_version": "CUDA",
    "python_version": "Python",
    "git_commit": "harness commit",
}
MAX_SPEC_DIFF_LINES = 30


@dataclass
class Side:
    name: str
    paths: list[str]
    loaded: Loaded
    summary: pd.DataFrame
    meta: pd.DataFrame
    plans: list[SweepPlan]


@dataclass
class Comparison:
    a: Side
    b: Side
    key: list[str]
    changed: list[str]
    table: pd.DataFrame
    only_a: int
    only_b: int
    notes: list[str] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return len(self.table)


def load_side(name: str, paths: Sequence[str | Path]) -> Side:
    loaded = load_results(paths)
    meta = load_meta(loaded.rows, loaded.problems)
    plans = [p for d in loaded.sweep_dirs() if (p := load_plan(d, loaded.problems)) is not None]
    summary = summarize(loaded.rows, by="all")  # rows carry dataset_args and model_args
    return Side(
        name=name, paths=[str(p) for p in paths], loaded=loaded, summary=summary, meta=meta, plans=plans
    )


def _key_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def compare(a_paths: Sequence[str | Path], b_paths: Sequence[str | Path]) -> Comparison:
    a, b = load_side("A", a_paths), load_side("B", b_paths)
    if a.summary.empty or b.summary.empty:
        empty = [s.name for s in (a, b) if s.summary.empty]
        return Comparison(
            a, b, [], [], pd.DataFrame(), 0, 0, notes=[f"{' and '.join(empty)}: no ok rows to compare"]
        )
    keyed = {}
    for side in (a, b):
        frame = side.summary.copy()
        for column in [*MATCH_COLUMNS, *SIZE_COLUMNS]:
            frame[column] = [_key_text(v) for v in frame[column]]
        keyed[side.name] = frame
    key, changed = [], []
    for column in MATCH_COLUMNS:
        va, vb = set(keyed["A"][column]), set(keyed["B"][column])
        if column != "rung" and len(va) == 1 and len(vb) == 1 and va != vb:
            changed.append(f"{column}: {va.pop()} → {vb.pop()}")
        else:
            key.append(column)
    key += [c for c in SIZE_COLUMNS if max(keyed["A"][c].nunique(), keyed["B"][c].nunique()) > 1]
    changed += _context_changes(a, b) + _spec_diff(a, b)
    per_side = {name: _per_config(frame, key) for name, frame in keyed.items()}
    merged = per_side["A"].merge(per_side["B"], on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    only_a = int((merged["_merge"] == "left_only").sum())
    only_b = int((merged["_merge"] == "right_only").sum())
    table = merged[merged["_merge"] == "both"].drop(columns="_merge").reset_index(drop=True)
    table = _judge_changes(table)
    notes = []
    if table.empty:
        notes.append(_no_match(keyed["A"], keyed["B"], key))
    return Comparison(a, b, key, changed, table, only_a, only_b, notes)


def _per_config(frame: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """One row per configuration: the median over the points (sweeps, nodes) that measured it,
    and the runs of all those points, for the test."""
    grouped = frame.groupby(key, sort=False)
    out = grouped.agg(
        samples_per_s=("samples_per_s", "median"),
        loading_time=("loading_time", "median"),
        step_time=("step_time", "median"),
        runs=("runs", "sum"),
        points=("point_id", lambda s: ",".join(sorted(set(s)))),
        run_samples_per_s=("run_samples_per_s", _pooled),
        run_loading_time=("run_loading_time", _pooled),
        run_passes=("run_passes", _pooled),
    )
    return out.reset_index()


def _pooled(runs: pd.Series) -> tuple[float, ...]:
    return tuple(v for point in runs for v in point)


def _judge_changes(table: pd.DataFrame) -> pd.DataFrame:
    """Per matched configuration: the change of B over A, its interval and what it is called,
    for throughput (a ratio) and for the wait for data (a share of A's step)."""
    if table.empty:
        return table
    table = table.copy()
    table["change"] = table["samples_per_s_b"] / table["samples_per_s_a"] - 1
    passes = list(zip(table["run_passes_a"], table["run_passes_b"], strict=True))
    judged = [
        _judge(a, b, "faster", "slower", passes=ab)
        for a, b, ab in zip(table["run_samples_per_s_a"], table["run_samples_per_s_b"], passes, strict=True)
    ]
    table["interval"] = [interval for interval, _ in judged]
    table["judgement"] = [word for _, word in judged]
    table["tested"] = table["interval"] != ""
    table["loading_change"] = table["loading_time_b"] / table["loading_time_a"] - 1
    waits = [
        _judge(a, b, "longer", "shorter", step=step, passes=ab)
        for a, b, step, ab in zip(
            table["run_loading_time_a"],
            table["run_loading_time_b"],
            table["step_time_a"],
            passes,
            strict=True,
        )
    ]
    table["loading_interval"] = [interval for interval, _ in waits]
    table["loading_judgement"] = [word for _, word in waits]
    return table.sort_values("change", ascending=False, kind="stable").reset_index(drop=True)


def _judge(
    a: tuple[float, ...],
    b: tuple[float, ...],
    up: str,
    down: str,
    *,
    step: float | None = None,
    passes: tuple[tuple[noise.Pass, ...], tuple[noise.Pass, ...]] = ((), ()),
) -> tuple[str, str]:
    """(the interval of B against A, or "" when untested; the word for the change). With
    `step`, B − A as a share of that step time; else B over A. Paired by pass where A's and
    B's runs took turns in the passes of one sweep (analysis.noise.ratio_by_pass)."""
    try:
        if step is None:
            estimate = noise.ratio_by_pass(a, b, *passes)
        else:
            estimate = noise.shift_by_pass(a, b, step, *passes)
    except ValueError:  # a side without a figure (or no step time): nothing to compare
        return "", ""
    judgement = estimate.judge()
    if judgement == noise.NOT_TESTED or estimate.low is None or estimate.high is None:
        return "", "untested"
    zero = 0 if estimate.shift else 1
    interval = f"{estimate.low - zero:+.1%} .. {estimate.high - zero:+.1%}"
    if judgement == noise.WITHIN:
        return interval, f"same (within ±{noise.MARGIN:.0%})"
    if judgement == noise.UNDECIDED:
        runs = estimate.runs_needed()
        more = f"{runs} runs would decide" if runs else f"over {noise.MAX_RUNS} runs would decide"
        return interval, f"undecided ({more})"
    return interval, up if judgement == noise.HIGHER else down


def _no_match(a: pd.DataFrame, b: pd.DataFrame, key: list[str]) -> str:
    differing = [c for c in key if not set(a[c]) & set(b[c])]
    if differing:
        details = "; ".join(
            f"{c}: A has {', '.join(sorted(set(a[c])))}, B has {', '.join(sorted(set(b[c])))}"
            for c in differing
        )
        return f"no configuration of A matches one of B: no value in common in {details}"
    return "no configuration of A matches one of B (every combination of settings differs)"


def _sets(values: pd.Series) -> str:
    shown = sorted({_key_text(v) for v in values if _key_text(v) not in ("", "-")})
    if len(shown) > 4:
        shown = [*shown[:4], f"… ({len(shown)} in all)"]
    return ", ".join(shown) or "-"


def _context_changes(a: Side, b: Side) -> list[str]:
    out = []
    ra, rb = a.loaded.rows, b.loaded.rows
    for column in CONTEXT_COLUMNS:
        sa, sb = _sets(ra[column]), _sets(rb[column])
        if sa != sb:
            out.append(f"{column}: {sa} → {sb}")
    hosts_a, hosts_b = _sets(ra["hostname"]), _sets(rb["hostname"])
    if hosts_a != hosts_b:
        out.append(f"nodes: {hosts_a} → {hosts_b}")
    types = [
        _sets(
            pd.Series(
                [type_label(d, c) for d, c in zip(s.meta["device_name"], s.meta["gpu_count"], strict=True)]
            )
        )
        for s in (a, b)
    ]
    if types[0] != types[1]:
        out.append(f"node type: {types[0]} → {types[1]}")
    for column, label in SOFTWARE.items():
        sa = _sets(a.meta[column].str[:10] if column == "git_commit" else a.meta[column])
        sb = _sets(b.meta[column].str[:10] if column == "git_commit" else b.meta[column])
        if sa != sb:
            out.append(f"{label}: {sa} → {sb}")
    return out


def _spec_diff(a: Side, b: Side) -> list[str]:
    if len(a.plans) != 1 or len(b.plans) != 1:
        return []
    ta, tb = a.plans[0].spec_text, b.plans[0].spec_text
    if not ta or not tb or ta == tb:
        return []
    lines = [
        line
        for line in difflib.unified_diff(ta.splitlines(), tb.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    if len(lines) > MAX_SPEC_DIFF_LINES:
        lines = [*lines[:MAX_SPEC_DIFF_LINES], f"… {len(lines) - MAX_SPEC_DIFF_LINES} more lines"]
    return ["spec.yaml (- A, + B):", *(f"  {line}" for line in lines)]


def _side_line(side: Side) -> str:
    rows = side.loaded.rows
    sweeps = rows["sweep_dir"].nunique() if not rows.empty else 0
    points = rows[["sweep_dir", "point_id"]].drop_duplicates().shape[0] if not rows.empty else 0
    return f"{side.name}: {' '.join(side.paths)} ({sweeps} sweep(s), {points} point(s))"


def comparison_table(c: Comparison) -> pd.DataFrame:
    if c.table.empty:
        return pd.DataFrame()
    t = c.table
    # The worker-only settings do not apply to num_workers=0: no variation there.
    workers = t[t["num_workers"] != "0"] if "num_workers" in t else t
    shown = [k for k in c.key if k == "num_workers" or (workers if k in WORKER_ONLY else t)[k].nunique() > 1]
    out = t[shown].copy()
    out["A samples/s"] = t["samples_per_s_a"]
    out["B samples/s"] = t["samples_per_s_b"]
    out["change"] = t["change"]
    out["interval"] = t["interval"]
    out["judgement"] = t["judgement"]
    out["A loading_time"] = t["loading_time_a"]
    out["B loading_time"] = t["loading_time_b"]
    out["loading change"] = t["loading_change"]
    out["loading interval"] = t["loading_interval"]
    out["loading"] = t["loading_judgement"]
    return out


def render_comparison(c: Comparison, fmt: str = "terminal") -> str:
    table = comparison_table(c)
    if fmt == "csv":
        return str(table.to_csv(index=False)).rstrip("\n")
    bullet = "- " if fmt == "markdown" else "  "
    parts = [_side_line(c.a) + "\n" + _side_line(c.b)]
    changed = c.changed or [
        "nothing in settings, nodes, node type, software or spec: differences are run-to-run variation "
        "unless a judgement says otherwise"
    ]
    parts.append("what changed from A to B:\n" + "\n".join(bullet + line for line in changed))
    if not table.empty:
        shown = table.copy()
        for column in ("A samples/s", "B samples/s"):
            shown[column] = ["" if pd.isna(v) else f"{v:.2f}" for v in shown[column]]
        for column in ("A loading_time", "B loading_time"):
            shown[column] = ["" if pd.isna(v) else f"{v:.6f}" for v in shown[column]]
        for column in ("change", "loading change"):
            shown[column] = ["" if pd.isna(v) else f"{v:+.1%}" for v in shown[column]]
        parts.append(
            tabulate(shown, headers="keys", tablefmt=FORMATS[fmt], showindex=False, disable_numparse=True)
        )
        words = c.table["judgement"].str.replace(r" \((over )?\d+ runs would decide\)", "", regex=True)
        counts = words.value_counts()
        judgements = ", ".join(f"{v} {n}" for v, n in counts.items())
        varying = [k for k in table.columns if k in c.key]
        fixed = len(c.key) - len(varying)
        matched_on = ", ".join(varying) + (f" (and {fixed} settings equal throughout)" if fixed else "")
        lines = [
            f"{c.matched} configuration(s) in both, matched on {matched_on}; throughput of B: {judgements}"
        ]
        parts.append("\n".join(lines))
    margin = f"{noise.MARGIN:.0%}"
    legend = [
        "interval: 95% interval of the change of B over A from the runs of each side (Yuen's trimmed t on "
        f"the logs; Welch's t under 5 runs): faster or slower where it lies wholly beyond ±{margin}, same "
        f"where it lies inside, undecided otherwise (the runs per side that would likely decide). "
        f"loading interval: B's wait for data minus A's, as a share of A's step time, judged against "
        f"±{margin} of a step. untested: one run on a side, no interval, never called; to know, "
        "run both sweeps with measure.repeats set to 3 or more (by default a sweep measures again "
        "only the contenders of its own best)."
    ]
    if c.only_a or c.only_b:
        legend.append(f"not matched: {c.only_a} configuration(s) only in A, {c.only_b} only in B")
    for side in (c.a, c.b):
        legend += [f"{side.name}: {p}" for p in side.loaded.problems]
    legend += c.notes
    parts.append("\n".join(legend))
    if fmt == "latex":
        return "\n\n".join(
            p if p.startswith("\\begin") else "\n".join(f"% {x}" for x in p.splitlines()) for p in parts
        )
    return "\n\n".join(parts)
