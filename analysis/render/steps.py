"""How a step is timed, drawn from a real run's steps one by one: what the training thread does
in each step (waits in `next()`, the copy call, the train step) above the loader's queue (the
batches its workers have made and the step has not taken yet).

The harness keeps no per-step record in its results (harness/execution/loop.py says why: nothing
kept per step), so the steps drawn here come from a run that noted them as it went
(scripts/make_figures.py wraps the harness's own timed loop, `loop.window`). The table it
hands over has one row per step and the columns of STEP_COLUMNS; each run is one `run` label,
drawn side by side, so that a starved loader and a fed one can be looked at together.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from analysis.render.plots import _png

STEP_COLUMNS: tuple[str, ...] = ("run", "step", "phase", "start", "next_s", "copy_s", "end", "ready", "stock")
"""run: the run's label; phase: "warmup" or "measure"; start, end: seconds (the step's start
to the next step's, as the loop times it); next_s, copy_s: seconds in next() and in the copy
call; ready: batches ready in the loader just before next() (empty where it cannot say);
stock: num_workers x prefetch_factor, the most it can hold ready."""

PARTS = (("next()", "tab:red"), ("copy", "tab:orange"), ("train step", "tab:blue"))


def steps_png(steps: pd.DataFrame, title: str) -> bytes | None:
    fig = steps_figure(steps, title)
    return None if fig is None else _png(fig)


def steps_figure(steps: pd.DataFrame, title: str) -> Figure | None:
    """Per run, a column of two plots sharing the time axis (seconds from the measured window's
    start; the warmup's last steps lighter, before 0): the thread's steps as bars cut into
    next(), the copy and the train step, and under them the batches ready in the loader's queue
    at each next(). None without steps."""
    if steps.empty:
        return None
    runs = list(dict.fromkeys(steps["run"]))
    fig = Figure(figsize=(4.6 * len(runs) + 0.6, 4.4))
    grid = fig.add_gridspec(2, len(runs), height_ratios=[1, 1.3], hspace=0.08)
    for n, run in enumerate(runs):
        rows = steps[steps["run"] == run].sort_values("step")
        top = fig.add_subplot(grid[0, n])
        queue = fig.add_subplot(grid[1, n], sharex=top)
        origin = float(rows.loc[rows["phase"] == "measure", "start"].min())
        _thread(top, rows, origin)
        _queue(queue, rows, origin)
        measured = rows[rows["phase"] == "measure"]
        waited = measured["next_s"].sum() / (measured["end"] - measured["start"]).sum()
        top.set_title(f"{run}: next() {waited:.0%} of the window", fontsize=9)
        top.tick_params(labelbottom=False)
        queue.set_xlabel("s from the measured window's start")
        if n == 0:
            top.set_ylabel("training\nthread")
            queue.set_ylabel("batches ready\nat each next()")
    fig.suptitle(title, fontsize=10)
    handles = [Patch(color=c, label=label) for label, c in PARTS]
    handles.append(Patch(color="0.5", alpha=0.35, label="lighter: warmup (not measured)"))
    fig.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=8, frameon=False
    )
    return fig


def _thread(ax: Axes, rows: pd.DataFrame, origin: float) -> None:
    """Each step as one bar of three parts, from its start to the next step's."""
    for row in rows.itertuples():
        start = float(row.start) - origin
        copy_at = start + float(row.next_s)
        step_at = copy_at + float(row.copy_s)
        end = float(row.end) - origin
        alpha = 1.0 if row.phase == "measure" else 0.35
        spans = [(start, copy_at - start), (copy_at, step_at - copy_at), (step_at, end - step_at)]
        for (left, width), (_, color) in zip(spans, PARTS, strict=True):
            ax.broken_barh([(left, width)], (0.15, 0.7), color=color, alpha=alpha, lw=0)
        ax.axvline(start, color="white", lw=0.6)  # a step's edge, so that neighbours stay apart
    ax.set_ylim(0, 1)
    ax.set_yticks([])


def _queue(ax: Axes, rows: pd.DataFrame, origin: float) -> None:
    """The batches ready at each next(), held until the next one; the stock as a dashed line."""
    ready = rows.dropna(subset=["ready"])
    if not ready.empty:
        ax.step(ready["start"] - origin, ready["ready"], where="post", color="tab:green", lw=1.5)
        ax.plot(ready["start"] - origin, ready["ready"], "o", color="tab:green", ms=3)
    stock = rows["stock"].max()
    if pd.notna(stock) and stock > 0:
        ax.axhline(stock, color="0.4", ls="--", lw=0.8)
        ax.annotate(
            "stock (num_workers × prefetch_factor)",
            (ax.get_xlim()[0], stock),
            xytext=(4, -10),
            textcoords="offset points",
            fontsize=7,
            color="0.3",
        )
        ax.set_ylim(-0.3, stock + 0.8)
    ax.axvline(0, color="0.3", lw=0.8, ls=":")
    ax.grid(alpha=0.3)
