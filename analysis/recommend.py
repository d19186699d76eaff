"""Per node and sweep: the best configuration, and the cheapest one within 5 % of it.

Cheapest means, in this order: fewest workers, no persistent workers, least host memory (the
rank's process tree, workers included). Both are given with their speedup over the sweep's
baseline, its first point (point_index 0): the spec's first values are the user's starting
point. A speedup smaller than the spread over repeats is not called a win.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.tables import LOADER_COLUMNS, WORKLOAD_COLUMNS, table_rows

WITHIN = 0.05
REPEATS_HINT = "set measure.repeats to 3 or more to know"


@dataclass(frozen=True, slots=True)
class Choice:
    point_id: str
    jobid: str
    point_index: int
    settings: dict[str, Any]
    samples_per_s: float
    throughput_spread: float
    runs: int
    cpu_memory_gb: float

    def settings_text(self) -> str:
        return " ".join(f"{k}={_value(v)}" for k, v in self.settings.items())


@dataclass(frozen=True, slots=True)
class Recommendation:
    group: str
    sweep: str
    sweep_dir: str
    rung: str
    best: Choice
    cheapest: Choice
    baseline: Choice | None
    baseline_elsewhere: bool = False
    """Point 0 was not measured in this group: its median over the other groups is used."""

    def speedup(self, choice: Choice) -> float | None:
        if self.baseline is None or not self.baseline.samples_per_s:
            return None
        return choice.samples_per_s / self.baseline.samples_per_s

    def against_baseline(self, choice: Choice) -> str:
        """The speedup and whether it stands out of the spread over repeats."""
        base = self.baseline
        if base is None:
            return "no baseline (point 0 has no ok rows)"
        if choice.point_id == base.point_id:
            return "the baseline itself"
        speedup = self.speedup(choice)
        text = f"{speedup:.2f}× the baseline"
        gain = choice.samples_per_s - base.samples_per_s
        if choice.runs < 2 and base.runs < 2:
            return f"{text} (untested: 1 run each)"
        noise = max(choice.throughput_spread, base.throughput_spread)
        if abs(gain) <= noise:
            return f"{text}, within the spread over repeats (±{noise:.2f} samples/s): not a measurable change"
        return f"{text}, beyond the spread over repeats (±{noise:.2f} samples/s)"

    def lines(self) -> list[str]:
        best, cheap, base = self.best, self.cheapest, self.baseline
        out = [f"best: {best.jobid} {best.settings_text()}: {best.samples_per_s:.2f} samples/s, "]
        out[0] += self.against_baseline(best)
        if cheap.point_id == best.point_id:
            out.append(f"cheapest within {WITHIN:.0%} of the best: the best itself")
        else:
            out.append(
                f"cheapest within {WITHIN:.0%} of the best: {cheap.jobid} {cheap.settings_text()}: "
                f"{cheap.samples_per_s:.2f} samples/s ({cheap.samples_per_s / best.samples_per_s - 1:+.1%}), "
                f"{_memory(cheap)}{self.against_baseline(cheap)}"
            )
        if base is not None:
            where = " (measured on another node or node type)" if self.baseline_elsewhere else ""
            out.append(
                f"baseline (point 0){where}: {base.jobid} {base.settings_text()}: "
                f"{base.samples_per_s:.2f} samples/s"
            )
        if best.runs < 2 and (base is None or base.runs < 2):
            out.append(f"one run per point: no spread to judge a difference against; {REPEATS_HINT}")
        return out

    def title(self) -> str:
        rung = f", rung {self.rung}" if self.rung != "full" else ""
        return f"recommendation for {self.group} ({self.sweep}{rung})"


def _memory(choice: Choice) -> str:
    return "" if pd.isna(choice.cpu_memory_gb) else f"{choice.cpu_memory_gb:.2f} GB host memory, "


def _value(v: Any) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "-"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def recommend(summary: pd.DataFrame) -> list[Recommendation]:
    chosen = table_rows(summary)
    if chosen.empty:
        return []
    out = []
    shown_by_sweep = {s: _shown_settings(rows) for s, rows in chosen.groupby("sweep_dir")}
    for (group, sweep_dir), rows in chosen.groupby(["group", "sweep_dir"], sort=True):
        shown = shown_by_sweep[sweep_dir]
        best = rows.loc[rows["samples_per_s"].idxmax()]
        near = rows[rows["samples_per_s"] >= (1 - WITHIN) * best["samples_per_s"]]
        cheapest = near.sort_values(
            ["num_workers", "persistent_workers", "cpu_memory_gb", "samples_per_s"],
            ascending=[True, True, True, False],
            na_position="last",
            kind="stable",
        ).iloc[0]
        baseline, elsewhere = _baseline(rows, chosen, sweep_dir)
        out.append(
            Recommendation(
                group=str(group),
                sweep=str(rows["sweep"].iloc[0]),
                sweep_dir=str(sweep_dir),
                rung=str(rows["rung"].iloc[0]),
                best=_choice(best, shown),
                cheapest=_choice(cheapest, shown),
                baseline=None if baseline is None else _choice(baseline, shown),
                baseline_elsewhere=elsewhere,
            )
        )
    return out


def _baseline(rows: pd.DataFrame, chosen: pd.DataFrame, sweep_dir: str) -> tuple[pd.Series | None, bool]:
    here = rows[rows["point_index"] == 0]
    if not here.empty:
        return here.iloc[0], False
    there = chosen[(chosen["point_index"] == 0) & (chosen["sweep_dir"] == sweep_dir)]
    if there.empty:
        return None, False
    row = there.iloc[0].copy()
    row["samples_per_s"] = there["samples_per_s"].median()
    row["throughput_spread"] = there["samples_per_s"].max() - there["samples_per_s"].min()
    row["runs"] = there["runs"].sum()
    return row, True


def _shown_settings(rows: pd.DataFrame) -> list[str]:
    """The settings that vary in the sweep (num_workers always): the rest is the spec's."""
    step = ["sequence_step"] if (rows["sequence_step"] != "").any() else []
    # With num_workers=0, PyTorch takes no prefetch_factor nor persistent workers: that is no choice.
    workers = rows[rows["num_workers"] > 0]
    varying = [
        c
        for c in [*LOADER_COLUMNS, *WORKLOAD_COLUMNS]
        if c == "num_workers"
        or (workers if c in ("prefetch_factor", "persistent_workers") else rows)[c].astype(str).nunique() > 1
    ]
    return [*step, *varying]


def _choice(row: pd.Series, shown: list[str]) -> Choice:
    return Choice(
        point_id=str(row["point_id"]),
        jobid=str(row["jobid"]),
        point_index=int(row["point_index"]),
        settings={c: row[c] for c in shown},
        samples_per_s=float(row["samples_per_s"]),
        throughput_spread=float(row["throughput_spread"]),
        runs=int(row["runs"]),
        cpu_memory_gb=float(row["cpu_memory_gb"]),
    )


def render_recommendations(recs: list[Recommendation], fmt: str) -> str:
    blocks = []
    for rec in recs:
        lines = rec.lines()
        if fmt == "markdown":
            blocks.append(f"**{rec.title()}**\n\n" + "\n".join(f"- {line}" for line in lines))
        elif fmt == "latex":
            blocks.append(f"% {rec.title()}\n" + "\n".join(f"%   {line}" for line in lines))
        elif fmt == "html":
            items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
            blocks.append(f"<p><b>{html.escape(rec.title())}</b></p><ul>{items}</ul>")
        else:
            blocks.append(f"{rec.title()}:\n" + "\n".join(f"  {line}" for line in lines))
    return "\n\n".join(blocks)
