"""What `harness tune` prints, from its tune.json alone (a login node, a laptop): the model
fitted, the grid predicted against what was measured, the recommendation, the model's error
and what tune spent against the exhaustive grid; and the what-if for another node.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tabulate import tabulate

from analysis.grid.machine import SHARED
from analysis.ladder import caching
from analysis.noise import MARGIN
from analysis.tune.model import (
    COPY,
    Config,
    Profile,
    capacity,
    cheapest_meeting,
    core_roof,
    lightning_workers,
    predict,
    prefetch_needed,
    samples_per_s,
    what_if,
    worker_rate,
)
from harness_schema.settings import AUTO_RSE


def _config(data: Mapping[str, Any]) -> Config:
    return Config.of(data)


def _span(p: Profile, name: str, scale: float = 1e3, unit: str = " ms") -> str:
    """A quantity's interval over the profile's windows, as " (95 % CI a-b ms, 3 windows)"."""
    low, high = p.intervals.get(name, (None, None))
    if low is None or high is None or low == high:
        return ""
    return f" (95 % CI {low * scale:.1f}-{high * scale:.1f}{unit}, {p.windows} windows)"


def model_lines(p: Profile) -> list[str]:
    roof = core_roof(p)
    roof_text = "no core limit" if roof == float("inf") else f"a roof of {roof:.1f} batches/s"
    lines = [
        f"step {p.step_s * 1e3:.1f} ms a batch{_span(p, 'step_s')} (demand {1 / p.step_s:.1f} batches/s "
        f"a rank); num_workers=0 loads a batch in {p.main_load_s * 1e3:.1f} ms in the main thread"
        f"{_span(p, 'main_load_s')}",
        f"a worker: {worker_rate(p):.1f} batches/s ({p.efficiency:.0%} of the main thread's rate"
        f"{_span(p, 'efficiency', 100, ' %')}); "
        f"{p.cpu_s_per_batch * 1e3:.1f} core-ms a batch on {p.cores:.1f} cores: {roof_text}",
    ]
    for mode, (step, handoff) in p.copy_modes.items():
        lines.append(
            f"copy: {mode}: step {step * 1e3:.1f} ms a batch, hand-off {handoff * 1e3:.1f} ms "
            f"(against {p.step_s * 1e3:.1f} and {p.handoff_s * 1e3:.1f} with {p.copy_mode})"
        )
    if p.handoff_s > 0:
        lines.append(f"hand-off: {p.handoff_s * 1e3:.1f} ms a batch{_span(p, 'handoff_s')}")
    if p.stall_share > 0:
        lines.append(
            f"stalls: {p.stall_share:.1%} of batches wait {p.stall_s * 1e3:.0f} ms more; "
            f"prefetch_factor that absorbs them: {prefetch_needed(p, 1)} with 1 worker, "
            f"{prefetch_needed(p, 4)} with 4"
        )
    return lines


def grid_table(summary: Mapping[str, Any]) -> str:
    measured = {_config(m): m["runs"] for m in summary["measured"]}
    verdicts = {_config(v): v["verdict"] for v in summary["verdicts"]}
    rows = []
    for x in sorted(summary["predictions"], key=lambda x: _config(x).cost()):
        c = _config(x)
        runs = measured.get(c)
        median = statistics.median(runs) if runs else None
        rows.append(
            [
                c.text(),
                f"{x['samples_per_s']:.1f}",
                _interval(x),
                x["bound"],
                "" if median is None else f"{median:.1f}",
                "" if median is None else f"{x['samples_per_s'] / median - 1:+.1%}",
                "" if runs is None else len(runs),
                verdicts.get(c, ""),
            ]
        )
    head = ["configuration", "predicted", "95 % CI", "bound", "measured", "error", "runs", "vs best"]
    return tabulate(rows, headers=head)


def _interval(x: Mapping[str, Any]) -> str:
    low, high = x.get("low"), x.get("high")
    return "" if low is None or high is None else f"{low:.0f}-{high:.0f}"


def shared_lines(summary: Mapping[str, Any]) -> list[str]:
    """A line where other processes took SHARED or more of the CPU while the profile ran (the
    recommendation's threshold, analysis/grid/machine.shared_machine)."""
    shared = summary.get("profile_shared")
    if not shared or (shared["mean"] < SHARED and shared["max"] < 2 * SHARED):
        return []
    p = Profile.from_json(summary["profile"])
    return [
        f"the machine was shared while tune profiled: other processes used {shared['mean']:.0%} of its CPU "
        f"during the profile's windows (up to {shared['max']:.0%} in one); the model takes each figure as "
        f"the median of {p.windows} windows, and the predictions' intervals carry what they disagree on"
    ]


def window_lines(summary: Mapping[str, Any]) -> list[str]:
    """Where the windows are sized in seconds (measure.seconds, steps: auto; tune.json's
    "windows", harness/tune/summary.timed_windows): what they were and what they lasted, in
    the profile and in the confirmations. Nothing for windows of a number of steps."""
    w = summary.get("windows")
    if not w:
        return []
    if w["auto"]:
        rule = (
            f"auto windows (steps: auto): the confirmations' as the spec's, at least {w['seconds']:g} s "
            f"and on until the step rate is known to {AUTO_RSE:.0%}, at most {w['max_seconds']:g} s; "
            f"the profile's a quarter ({w['profile_seconds']:g} to {w['profile_max_seconds']:g} s)"
        )
    else:
        rule = (
            f"windows of at least {w['seconds']:g} s (measure.seconds): the confirmations' as the spec's, "
            f"the profile's a quarter ({w['profile_seconds']:g} s)"
        )
    lasted = []
    for phase in ("profile", "confirmations"):
        x = w.get(phase) or {}
        if x.get("lasted"):
            low, mid, high = x["lasted"]
            lasted.append(f"{low:.1f}-{high:.1f} s (median {mid:.1f}, {x['windows']} windows) in the {phase}")
    line = f"windows: {rule}; they lasted {' and '.join(lasted) or 'nothing: none was measured'}"
    rses = [(w[p]["rse"], w[p]["capped"]) for p in ("profile", "confirmations") if w.get(p) and w[p]["rse"]]
    if rses:
        worst = max(r[1] for r, _ in rses)
        line += f"; the step rate's relative standard error at most {worst:.1%}"
        capped = sum(c for _, c in rses)
        if capped:
            line += (
                f" ({capped} window(s) stopped at their most above {AUTO_RSE:.0%}: a noisy loader or a busy "
                "machine; raise measure.max_seconds)"
            )
    return [line]


def errors(summary: Mapping[str, Any]) -> list[float]:
    predicted = {_config(x): x["samples_per_s"] for x in summary["predictions"]}
    return [
        abs(predicted[_config(m)] / statistics.median(m["runs"]) - 1)
        for m in summary["measured"]
        if m["runs"]
    ]


def render(summary: Mapping[str, Any]) -> str:
    p = Profile.from_json(summary["profile"])
    answer, best, choice = (_config(summary[k]) for k in ("answer", "best", "model_choice"))
    runs = {_config(m): m["runs"] for m in summary["measured"]}
    verdicts = {_config(v): v["verdict"] for v in summary["verdicts"]}
    out = [f"tune {summary['spec']}: {summary['grid_points']} grid points", "model:"]
    out += [f"  {line}" for line in model_lines(p)]
    out += shared_lines(summary)
    out += window_lines(summary)
    out += ["", grid_table(summary), ""]
    predicted = {_config(x): x["samples_per_s"] for x in summary["predictions"]}
    if answer not in runs:
        out.append(
            f"unconfirmed: the model's choice, {answer.text()}: {predicted[answer]:.1f} samples/s predicted, "
            f"nothing measured (the budget allowed no confirmation: {summary['repeats']} runs of a "
            "configuration are the least the judgement takes)"
        )
        return "\n".join(out + cost_lines(summary))
    rate = statistics.median(runs[answer])
    tied = "the best itself" if answer == best else f"tied with the best, {best.text()}, within ±{MARGIN:.0%}"
    out.append(f"recommendation: {answer.text()}: {rate:.1f} samples/s measured ({tied})")
    off = rate / predicted[answer] - 1
    if answer == choice and abs(off) <= MARGIN:
        out.append("the model's choice, confirmed")
    elif answer == choice:
        out.append(
            f"the model's choice, though measured {off:+.0%} off its prediction (its neighbours measured "
            "confirm it; the model's figures there are not to be trusted)"
        )
    elif verdicts.get(choice) == "undecided":
        out.append(
            f"the model chose {choice.text()}; its runs leave it undecided against the best "
            "(below), so the best stands"
        )
    else:
        out.append(f"the model chose {choice.text()}; the measurements corrected it")
    for w in summary.get("widened", []):
        out.append(
            f"measured too: {_config(w).text()}, the cheapest configuration the profile's intervals "
            "kept within reach of the best"
        )
    for u in summary["undecided"]:
        need = u["runs_needed"]
        more = f"about {need} runs per point would decide" if need else "it sits on the margin"
        out.append(f"undecided, cheaper: {_config(u).text()}: {more}")
    out += caching_lines(summary, rate)
    err = errors(summary)
    if err:
        out.append(f"model error: median {statistics.median(err):.1%} on the {len(err)} point(s) measured")
    out += cost_lines(summary)
    return "\n".join(out)


def caching_lines(summary: Mapping[str, Any], measured: float) -> list[str]:
    """Plumber's question, one line per cached rung the profile measured: what caching that
    stage's output takes, and the grid's cheapest configuration with it, predicted (not
    measured: tune confirms the grid as it is)."""
    out = []
    profile = summary["profile"]
    for entry in summary.get("caching", []):
        rung, names = entry["rung"], entry["transform_names"]
        holds, frozen = caching.holds(rung, len(names)), caching.frozen(rung, names)
        choice = _config(entry["choice"])
        size = "its size is not known"
        if entry["sample_bytes"] and entry["samples"]:
            w = caching.CachingWhatIf(
                rung=rung,
                holds=holds,
                sample_bytes=entry["sample_bytes"],
                samples=int(entry["samples"]),
                capacity=entry["capacity"],
                demand=1 / profile["step_s"],
                limit_gb=entry["limit_gb"],
                in_use_gb=entry["memory_gb"],
                frozen=frozen,
            )
            size = caching.size_text(w, held_at="there")
        out.append(
            f"what if: caching {holds}, as {rung} measured it ({entry['capacity']:.1f} batches/s from "
            f"{profile.get('profiled_workers', 1)} worker(s)): the model predicts "
            f"{choice.text()} at {entry['samples_per_s']:.1f} samples/s from the second epoch on "
            f"(the recommendation measured {measured:.1f}); the cache: {size}" + caching.replayed(frozen)
        )
    return out


def cost_lines(summary: Mapping[str, Any]) -> list[str]:
    runs, secs = summary["point_runs"], summary["device_seconds"]
    ranks = int(summary["profile"].get("ranks", 1))
    # Every rank of a point holds a device for the point's wall time: the hours to defend.
    hours = {k: v * ranks / 3600 for k, v in secs.items()}
    lines = [
        f"cost: {runs['tune']} point-runs against {runs['exhaustive']} for the exhaustive grid "
        f"({runs['tune'] / runs['exhaustive']:.0%}; {summary['repeats']} runs a point); "
        f"{secs['tune']:.0f} device-seconds against about {secs['exhaustive_estimate']:.0f} "
        f"({secs['tune'] / secs['exhaustive_estimate']:.0%}, the grid priced from the profile); "
        f"with {ranks} device(s) a point: {hours['tune']:.3f} device-hours against about "
        f"{hours['exhaustive_estimate']:.3f}"
    ]
    if summary["budget_spent"]:
        lines.append(
            "the budget ran out before the answer's neighbourhood was measured: a provisional answer"
        )
    return lines


def render_what_if(summary: Mapping[str, Any], *, gpus: int, cores: int, workers: Sequence[int] = ()) -> str:
    """The workers per rank for a node of `gpus` GPUs and `cores` cores, from the profile."""
    answer = _config(summary["answer"])
    # In the answer's copy mode: the step and hand-off it was measured with.
    p = Profile.from_json(summary["profile"]).in_mode(answer)
    node = what_if(p, gpus=gpus, cores=cores)
    counts = list(workers) if workers else list(range(0, max(cores // gpus, 1) + 3))
    copy = {k: getattr(answer, k) for k in COPY}
    grid = [
        Config(num_workers=n, prefetch_factor=(prefetch_needed(node, n) if n else None), **copy)
        for n in counts
    ]
    predictions = predict(node, grid)
    choice = cheapest_meeting(predictions)
    rows = [
        [x.config.num_workers, x.config.prefetch_factor or "-", f"{x.samples_per_s:.0f}", x.bound]
        for x in predictions
    ]
    suggested = lightning_workers(cores, gpus)
    lines = [
        f"what if: {gpus} GPU(s) and {cores} cores: {cores // gpus} cores a rank "
        f"({node.cores:.1f} for its workers); the step's demand {1 / p.step_s:.1f} batches/s a rank",
        tabulate(rows, headers=["num_workers", "prefetch_factor", "samples/s (node)", "bound"]),
        f"predicted: num_workers={choice.config.num_workers} per rank "
        f"(prefetch_factor={choice.config.prefetch_factor or '-'}), "
        f"{choice.samples_per_s:.0f} samples/s on the node; --cpus-per-task={cores // gpus}",
        f"Lightning's suggestion (cpus // ranks - 1): num_workers={suggested}, "
        f"{_at(node, suggested, copy):.0f} samples/s predicted",
    ]
    if capacity(node, max(counts)) < 1 / node.step_s:
        lines.append("even the most workers shown do not meet the step's demand: the cores are the bound")
    return "\n".join(lines)


def _at(p: Profile, workers: int, copy: Mapping[str, bool]) -> float:
    prefetch = prefetch_needed(p, workers) if workers else None
    return samples_per_s(p, Config(num_workers=workers, prefetch_factor=prefetch, **copy))
