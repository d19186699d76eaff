"""Plots of a sweep, as PNG: throughput against num_workers, the caching ladder, a point's timeline,
the scaling of a workload across sizes; and of what reads several sweeps: tune's model against
its measured points, a comparison of two.

Figures are made with matplotlib's object API on the Agg canvas (no pyplot, no display, no
global state), so a login node without X, or a test, draws them the same way. Each plot is
kept as PNG bytes: written next to the results (<sweep dir>/plots/<name>.png) on request, and
embedded in the HTML report.
"""

from __future__ import annotations

import io
import itertools
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from analysis.aggregate import WORKLOAD_COLUMNS, table_rows
from analysis.grid.compare import Comparison, comparison_table
from analysis.grid.recommend import Recommendation
from analysis.samples import SAMPLES_FILE, load_samples
from analysis.scaling import Scaling
from analysis.tune.model import COPY, Config
from harness_schema import rungs as rung_names
from harness_schema.atomic import atomic_write_bytes
from harness_schema.settings import WORKER_ONLY

log = logging.getLogger(__name__)

MAX_LADDER_POINTS = 6
DPI = 100


@dataclass(frozen=True, slots=True)
class Plot:
    name: str
    """File name, unique within its sweep's plots/ folder."""
    title: str
    sweep_dir: str
    png: bytes
    group: str = ""
    """The table group (node or node type) it belongs to; "" for a point's timeline."""
    path: Path | None = None
    """Where it was written, once it is."""


def make_plots(
    summary: pd.DataFrame,
    recommendations: Sequence[Recommendation] = (),
    timeline_points: Iterable[str] = (),
) -> list[Plot]:
    """Per sweep and group: throughput against num_workers and the caching ladder; the
    timelines of the baseline and best point of each recommendation, and of `timeline_points`."""
    plots: list[Plot] = []
    if summary.empty:
        return plots
    chosen = table_rows(summary)
    for (sweep_dir, group), rows in chosen.groupby(["sweep_dir", "group"], sort=True):
        png = throughput_png(rows, title=f"{group} · {rows['sweep'].iloc[0]} · rung {rows['rung'].iloc[0]}")
        if png is not None:
            name = f"throughput-{_slug(group)}.png"
            plots.append(Plot(name, f"throughput, {group}", str(sweep_dir), png, str(group)))
    for (sweep_dir, group), rows in summary.groupby(["sweep_dir", "group"], sort=True):
        png = ladder_png(rows, title=f"caching ladder · {group} · {rows['sweep'].iloc[0]}")
        if png is not None:
            name = f"ladder-{_slug(group)}.png"
            plots.append(Plot(name, f"caching ladder, {group}", str(sweep_dir), png, str(group)))

    wanted: list[tuple[str, str, int | None]] = []
    for rec in recommendations:
        if rec.best is None:  # nothing ranked: no best to draw
            continue
        rank = _waiting_rank(summary, rec.sweep_dir, rec.best.point_id)
        if rec.baseline is not None:
            wanted.append(
                (
                    rec.sweep_dir,
                    rec.baseline.point_id,
                    _waiting_rank(summary, rec.sweep_dir, rec.baseline.point_id),
                )
            )
        wanted.append((rec.sweep_dir, rec.best.point_id, rank))
    points = list(timeline_points)
    if "all" in points:  # `--timeline all`: every point that has a timeline
        points = sorted(summary["point_id"].unique())
    for point_id in points:
        for sweep_dir in summary.loc[summary["point_id"] == point_id, "sweep_dir"].unique():
            wanted.append((str(sweep_dir), point_id, _waiting_rank(summary, str(sweep_dir), point_id)))
    seen: set[tuple[str, str]] = set()
    for sweep_dir, point_id, rank in wanted:
        if (sweep_dir, point_id) in seen:
            continue
        seen.add((sweep_dir, point_id))
        found = _samples(Path(sweep_dir) / "points" / point_id, rank)
        if found is None:
            continue
        samples, rank = found
        png = timeline_png(samples, title=f"{point_id} rank {rank} · {Path(sweep_dir).name}")
        if png is not None:
            name = f"timeline-{point_id}-rank{rank}.png"
            plots.append(Plot(name, f"timeline of point {point_id}, rank {rank}", sweep_dir, png))
    return plots


def write_plots(plots: Iterable[Plot]) -> list[Plot]:
    """Write each plot to <sweep dir>/plots/<name>; return them with their paths."""
    written = []
    for plot in plots:
        path = Path(plot.sweep_dir) / "plots" / plot.name
        atomic_write_bytes(path, plot.png)
        written.append(replace(plot, path=path))
    return written


def _waiting_rank(summary: pd.DataFrame, sweep_dir: str, point_id: str) -> int | None:
    """The rank that waited most for data (loading_rank): its timeline shows the loader's trouble."""
    rows = summary[(summary["sweep_dir"] == sweep_dir) & (summary["point_id"] == point_id)]
    if rows.empty or pd.isna(rows["loading_rank"].iloc[0]):
        return None
    return int(rows["loading_rank"].iloc[0])


def _samples(point_path: Path, rank: int | None) -> tuple[pd.DataFrame, int] | None:
    """The timeline of the rank that waited most, else the lowest rank's that has one."""
    ranks = [] if rank is None else [rank]
    pattern = re.compile(SAMPLES_FILE.replace("{rank}", r"(\d+)").replace(".", r"\."))
    if point_path.is_dir():
        ranks += sorted(int(m.group(1)) for p in point_path.iterdir() if (m := pattern.fullmatch(p.name)))
    for k in ranks:
        samples = load_samples(point_path, k)
        if samples is not None:
            return samples, k
    return None


def _slug(text: object) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "all"


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


def _text(v: object) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


# Settings a line of the throughput plot keeps fixed, besides pin_memory and non_blocking.
# The worker-only settings (WORKER_ONLY) do not apply to num_workers=0 (PyTorch refuses them):
# that point starts every line with its pin_memory and non_blocking.
OTHER_LINE_SETTINGS = ["drop_last", *WORKLOAD_COLUMNS]


def throughput_png(rows: pd.DataFrame, title: str) -> bytes | None:
    """samples/s against num_workers, one line per pin_memory/non_blocking pair (and per other
    setting that varies); error bars span the range over repeats. None for a sequence or a
    sweep with a single num_workers."""
    if rows["num_workers"].nunique() < 2 or (rows["sequence_step"] != "").any():
        return None
    workers = rows[rows["num_workers"] > 0]
    vary = [c for c in WORKER_ONLY if workers[c].astype(str).nunique() > 1]
    vary += [c for c in OTHER_LINE_SETTINGS if rows[c].astype(str).nunique() > 1]
    key = ["pin_memory", "non_blocking", *vary]
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    for values, line in workers.groupby(key, sort=True, dropna=False):
        settings = dict(zip(key, values if isinstance(values, tuple) else (values,), strict=True))
        shared = {k: v for k, v in settings.items() if k not in WORKER_ONLY}
        zero = rows[rows["num_workers"] == 0]
        for k, v in shared.items():
            zero = zero[zero[k].astype(str) == str(v)]
        points = pd.concat([zero, line]).sort_values("num_workers")
        # One y per x: the best of points that differ only in settings not on this line.
        points = points.loc[points.groupby("num_workers")["samples_per_s"].idxmax()]
        # The 95 % interval's half-width (ci95, analysis.noise): the table's figure, drawn.
        spread = (points["ci95"] * points["samples_per_s"]).fillna(0)
        label = ", ".join(f"{k}={_text(v)}" for k, v in settings.items())
        ax.errorbar(
            points["num_workers"],
            points["samples_per_s"],
            yerr=spread if (points["runs"] > 1).any() else None,
            marker="o",
            capsize=3,
            label=label,
        )
    if not ax.lines:  # only num_workers=0 points with different pin/non_blocking
        return None
    ax.set_xticks(sorted(rows["num_workers"].unique()))
    ax.set_xlabel("num_workers")
    ax.set_ylabel("samples/s (all ranks)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def ladder_png(rows: pd.DataFrame, title: str) -> bytes | None:
    """samples/s per rung, bound first, as bars; one bar per point for the points that measured
    two rungs or more (the baseline and the best at the table's rung when there are many)."""
    per_point = rows.groupby("point_id")["rung"].nunique()
    ids = list(per_point[per_point > 1].index)
    if not ids:
        return None
    if len(ids) > MAX_LADDER_POINTS:
        top = table_rows(rows)
        keep = set(top.loc[top["point_index"] == 0, "point_id"])
        keep |= {top.loc[top["samples_per_s"].idxmax(), "point_id"]}
        ids = [i for i in ids if i in keep]
    ladder = rows[rows["point_id"].isin(ids)]
    order = sorted(ladder["rung"].unique(), key=rung_names.ladder_position)
    fig = Figure(figsize=(max(6.0, 1.2 * len(order) + 2), 4.2))
    ax = fig.add_subplot()
    width = 0.8 / len(ids)
    for n, point_id in enumerate(
        sorted(ids, key=lambda i: ladder.loc[ladder["point_id"] == i, "point_index"].iloc[0])
    ):
        bars = ladder[ladder["point_id"] == point_id].set_index("rung").reindex(order)
        x = [i + (n - (len(ids) - 1) / 2) * width for i in range(len(order))]
        first = bars.dropna(subset=["samples_per_s"]).iloc[0]
        label = f"{point_id} (num_workers={_text(first['num_workers'])}, pin_memory={first['pin_memory']})"
        spread = (bars["ci95"] * bars["samples_per_s"]).fillna(0) if (bars["runs"] > 1).any() else None
        drawn = ax.bar(x, bars["samples_per_s"], width=width, label=label, yerr=spread, capsize=3)
        ax.bar_label(
            drawn, labels=[_text(round(v)) if pd.notna(v) else "" for v in bars["samples_per_s"]], fontsize=7
        )
    ax.set_xticks(range(len(order)), order, rotation=20, ha="right")
    ax.set_ylabel("samples/s (all ranks)")
    ax.set_ylim(bottom=0)  # an interval of few runs can reach below 0; no rate does
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def phase_spans(samples: pd.DataFrame) -> list[tuple[str, float, float]]:
    """(phase, start, end) of each stretch of consecutive samples with the same non-empty phase."""
    t = samples["t"].to_numpy()
    phases = samples["phase"].to_numpy()
    spans = []
    start = 0
    for i in range(1, len(t) + 1):
        if i == len(t) or phases[i] != phases[start]:
            if phases[start]:
                end = t[i] if i < len(t) else t[i - 1]
                spans.append((str(phases[start]), float(t[start]), float(end)))
            start = i
    return spans


def timeline_png(samples: pd.DataFrame, title: str) -> bytes | None:
    fig = timeline_figure(samples, title)
    return None if fig is None else _png(fig)


def timeline_figure(samples: pd.DataFrame, title: str) -> Figure | None:
    """GPU utilization (when sampled) and the CPU of the main process and of the loader workers
    against time, each rung's phases shaded in its colour and named in a legend under the plot
    (a warmup lighter than its measured part). None without GPU or CPU samples."""
    samples = samples.sort_values("t")
    has_gpu = "gpu_util" in samples and samples["gpu_util"].notna().any()
    cpu = [c for c in ("main_cpu_percent", "loader_cpu_percent") if c in samples and samples[c].notna().any()]
    if not has_gpu and not cpu:
        return None
    fig = Figure(figsize=(9, 5.2 if has_gpu and cpu else 3.2))
    axes: list[Axes] = []
    if has_gpu:
        ax = fig.add_subplot(2 if cpu else 1, 1, 1)
        ax.plot(samples["t"], samples["gpu_util"], color="tab:green", label="gpu_util")
        if "gpu_mem_util" in samples and samples["gpu_mem_util"].notna().any():
            ax.plot(samples["t"], samples["gpu_mem_util"], color="tab:olive", lw=0.8, label="gpu_mem_util")
        ax.set_ylabel("GPU %")
        ax.set_ylim(0, 105)
        axes.append(ax)
    if cpu:
        ax = fig.add_subplot(2 if has_gpu else 1, 1, 2 if has_gpu else 1, sharex=axes[0] if axes else None)
        colors = {"main_cpu_percent": "tab:blue", "loader_cpu_percent": "tab:orange"}
        for column in cpu:
            ax.plot(samples["t"], samples[column], color=colors[column], label=column)
        ax.set_ylabel("CPU % of one core")
        ax.set_ylim(bottom=0)
        axes.append(ax)
    axes[-1].set_xlabel("t (s since the sampler started)")
    axes[0].set_title(title, fontsize=10)
    _shade_phases(fig, axes, phase_spans(samples))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


# Shades of the phases: colours apart from the lines' (green, olive, blue, orange).
PHASE_COLORS = ["tab:red", "tab:purple", "tab:brown", "tab:cyan", "tab:pink", "tab:gray", "gold", "navy"]


def _shade_phases(fig: Figure, axes: list[Axes], spans: list[tuple[str, float, float]]) -> None:
    """Each rung's phases shaded in its colour (warmup and the loader-capacity pass lighter:
    they are not the measured window) and named once, in a legend under the plot: names
    written on the spans themselves overlap into a band when a ladder has many short phases."""
    colors: dict[str, str] = {}
    palette = itertools.cycle(PHASE_COLORS)
    for phase, start, end in spans:
        rung = phase.split("/")[0]
        if rung not in colors:  # the palette moves on once a rung, not once a span
            colors[rung] = next(palette)
        color = colors[rung]
        light = phase.endswith(("/warmup", "/capacity"))
        for ax in axes:
            ax.axvspan(start, end, color=color, alpha=0.07 if light else 0.2, lw=0)
    if not colors:
        return
    handles = [Patch(color=c, alpha=0.35, label=rung) for rung, c in colors.items()]
    handles.append(Patch(color="0.5", alpha=0.1, label="lighter: warmup, loader capacity"))
    fig.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(len(handles), 4),
        fontsize=8,
        title="phases, shaded per rung",
        title_fontsize=8,
        frameon=False,
    )


# tune.json's settings of a configuration besides num_workers (analysis/tune/model.Config).
TUNE_LINE_SETTINGS = [*WORKER_ONLY, *COPY]


def tune_png(summary: Mapping[str, Any], title: str) -> bytes | None:
    """tune's model against what it measured (tune.json, harness/tune/summary.py): samples/s
    against num_workers, one line per setting that varies besides it (prefetch_factor...), the
    prediction's 95 % interval as a band, each measured run as a circle of its line's colour,
    and the recommendation starred. num_workers=0 (no prefetch) starts every line; its runs are
    drawn once, in the first line's colour. None without predictions."""
    predicted = _configs(summary.get("predictions") or [])
    if predicted.empty:
        return None
    runs = _configs([{**m, "rate": v} for m in summary.get("measured") or [] for v in m["runs"]])
    workers = predicted[predicted["num_workers"] > 0]
    vary = [k for k in TUNE_LINE_SETTINGS if workers[k].nunique(dropna=False) > 1]
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    lines = list(workers.groupby(vary, sort=True, dropna=False)) if vary else [((), workers)]
    for n, (values, line) in enumerate(lines):
        settings = dict(zip(vary, values if isinstance(values, tuple) else (values,), strict=True))
        copy = {k: v for k, v in settings.items() if k in COPY}
        points = pd.concat([_matching(predicted[predicted["num_workers"] == 0], copy), line])
        points = points.sort_values("num_workers")
        label = ", ".join(f"{k}={_text(v)}" for k, v in settings.items()) or "predicted"
        (drawn,) = ax.plot(points["num_workers"], points["samples_per_s"], marker=".", label=label)
        if points[["low", "high"]].notna().all().all():
            ax.fill_between(
                points["num_workers"],
                points["low"],
                points["high"],
                color=drawn.get_color(),
                alpha=0.12,
                lw=0,
            )
        mine = _matching(runs[runs["num_workers"] > 0], settings) if not runs.empty else runs
        if n == 0 and not runs.empty:
            mine = pd.concat([mine, _matching(runs[runs["num_workers"] == 0], copy)])
        # Side by side within a num_workers, so that the lines' runs do not hide each other.
        shift = (n - (len(lines) - 1) / 2) * 0.06
        if not mine.empty:
            ax.plot(mine["num_workers"] + shift, mine["rate"], "o", color=drawn.get_color(), mfc="none", ms=6)
    answer = summary.get("answer")
    chosen = _matching(runs, _configs([answer]).iloc[0].to_dict()) if answer and not runs.empty else runs
    if answer and not chosen.empty:
        ax.plot(
            [answer["num_workers"]],
            [chosen["rate"].median()],
            "*",
            color="black",
            ms=13,
            label="recommendation (median of its runs)",
        )
    ax.plot([], [], "o", color="0.4", mfc="none", label="runs measured")
    ax.set_xticks(sorted(predicted["num_workers"].unique()))
    ax.set_xlabel("num_workers")
    ax.set_ylabel("samples/s (lines: predicted, 95 % band)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _png(fig)


def _configs(entries: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """tune.json's configurations, their settings as analysis.tune.model.Config reads them (no
    prefetch at num_workers=0), with the entries' figures."""
    rows = []
    for entry in entries:
        c = Config.of(entry)
        settings = {k: getattr(c, k) for k in ("num_workers", *TUNE_LINE_SETTINGS)}
        rows.append({**entry, **settings, "prefetch_factor": c.prefetch_factor or 0})
    return pd.DataFrame(rows)


def _matching(frame: pd.DataFrame, settings: Mapping[str, Any]) -> pd.DataFrame:
    for k, v in settings.items():
        if k in TUNE_LINE_SETTINGS or k == "num_workers":
            frame = frame[frame[k] == v]
    return frame


def comparison_png(c: Comparison, title: str) -> bytes | None:
    """`harness compare`, drawn: per matched configuration, A's and B's samples/s as bars (the
    median over their runs), each run as a dot, and the comparison's word over the pair
    (faster, slower, same, undecided, untested). None with nothing matched."""
    if c.table.empty:
        return None
    shown = comparison_table(c).columns
    key = list(shown[: list(shown).index("A samples/s")])
    table = c.table
    if "num_workers" in table:
        table = table.assign(_order=pd.to_numeric(table["num_workers"], errors="coerce")).sort_values(
            "_order"
        )
    fig = Figure(figsize=(max(5.0, 1.3 * len(table) + 2), 4.2))
    ax = fig.add_subplot()
    for side, offset, color in (("a", -0.2, "tab:gray"), ("b", 0.2, "tab:blue")):
        x = [i + offset for i in range(len(table))]
        ax.bar(x, table[f"samples_per_s_{side}"], width=0.38, color=color, alpha=0.6, label=side.upper())
        for xi, runs in zip(x, table[f"run_samples_per_s_{side}"], strict=True):
            ax.plot([xi] * len(runs), runs, "o", color=color, ms=4, mfc="none")
    top = [
        max(row.samples_per_s_a, row.samples_per_s_b, *row.run_samples_per_s_a, *row.run_samples_per_s_b)
        for row in table.itertuples()
    ]
    for i, (word, high) in enumerate(zip(table["judgement"], top, strict=True)):
        ax.annotate(
            word or "-", (i, high), xytext=(0, 6), textcoords="offset points", ha="center", fontsize=8
        )
    labels = [", ".join(f"{k}={row[k]}" for k in key) for _, row in table.iterrows()]
    ax.set_xticks(range(len(table)), labels, fontsize=8)
    ax.set_ylabel("samples/s (bars: median; circles: runs)")
    ax.set_ylim(0, max(top) * 1.18)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _png(fig)


def scaling_plot(found: Scaling) -> Plot:
    """A series of sizes (analysis/scaling.py) as a Plot: scaling-<first point id>.png."""
    first = str(found.table["point_id"].iloc[0])
    png = scaling_png(found.table, title=f"scaling · {found.label}", knee=found.knee)
    return Plot(f"scaling-{first}.png", f"scaling, {found.label}", found.sweep_dir, png)


def scaling_png(table: pd.DataFrame, title: str, knee: tuple[int, int] | None = None) -> bytes:
    """Per-GPU samples/s (left) and AU (right) against the ranks, each size a dot; the step where
    per-GPU throughput falls shaded, and the AU threshold drawn."""
    from analysis.scaling import AU_THRESHOLD

    fig = Figure(figsize=(9, 3.8))
    rate, au = fig.subplots(1, 2)
    ranks = table["ranks"].astype(int)
    rate.plot(ranks, table["per_gpu_samples_per_s"], marker="o")
    rate.set_ylabel("samples/s per GPU (rank)")
    rate.set_ylim(bottom=0)
    au.plot(ranks, table["au"] * 100, marker="o", color="tab:green")
    au.axhline(AU_THRESHOLD * 100, color="gray", linestyle="--", linewidth=1, label=f"{AU_THRESHOLD:.0%}")
    au.legend(fontsize=8, loc="lower left")
    au.set_ylabel("AU: time computing / wall time (%)")
    au.set_ylim(0, 105)
    labels = [f"{r}\n({n} node{'s' if n != 1 else ''})" for r, n in zip(ranks, table["nodes"], strict=True)]
    for ax in (rate, au):
        ax.set_xscale("log", base=2)
        ax.set_xlim(ranks.min() / 1.5, ranks.max() * 1.5)  # room around the first and last size
        ax.set_xticks(list(ranks), labels, fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("ranks (GPUs)")
        ax.grid(alpha=0.3)
        if knee is not None:  # the step where per-GPU throughput falls
            ax.axvspan(*knee, color="tab:red", alpha=0.12)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)
