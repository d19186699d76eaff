"""Per node and sweep: the best configuration, and the cheapest one tied with it.

The best is the highest median samples/s; a configuration is *tied* with it when analysis.noise
does not call the difference (independent runs: each point's per-run samples/s). The cheapest of
the tied is recommended. Cheapest means, in this order: fewest workers, no persistent workers,
least host memory (the rank's process tree, workers included). With one run on a side there is
nothing to test: the old rule stands in, labelled untested: within 5 % of the best counts as
tied. Both are given with their speedup over the sweep's baseline, its first point
(point_index 0): the spec's first values are the user's starting point; the same test says
whether the speedup is a measurable change.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis import noise
from analysis.aggregate import LOADER_COLUMNS, WORKLOAD_COLUMNS, table_rows

WITHIN = 0.05
"""With one run, configurations within 5 % of the best count as tied (untested)."""
REPEATS_HINT = "set measure.repeats to 3 or more to know"
CHEAPNESS = ["num_workers", "persistent_workers", "cpu_memory_gb"]


@dataclass(frozen=True, slots=True)
class Choice:
    point_id: str
    jobid: str
    point_index: int
    settings: dict[str, Any]
    samples_per_s: float
    run_samples_per_s: tuple[float, ...]
    """samples/s of each run (repeats; nodes of one type with --by gpu)."""
    cpu_memory_gb: float

    @property
    def runs(self) -> int:
        return len(self.run_samples_per_s)

    def settings_text(self) -> str:
        return " ".join(f"{k}={_value(v)}" for k, v in self.settings.items())

    def against(self, other: Choice) -> noise.Ratio:
        """This one's samples/s over the other's, from their runs."""
        return noise.independent_ratio(other.run_samples_per_s, self.run_samples_per_s)


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
    tied: int = 1
    """Configurations tied with the best, the best included."""
    tested: bool = False
    """Every tie was decided by a test (no point with one run)."""

    def speedup(self, choice: Choice) -> float | None:
        if self.baseline is None or not self.baseline.samples_per_s:
            return None
        return choice.samples_per_s / self.baseline.samples_per_s

    def against_baseline(self, choice: Choice) -> str:
        """The speedup and whether the runs call it a change."""
        base = self.baseline
        if base is None:
            return "no baseline (point 0 has no ok rows)"
        if choice.point_id == base.point_id:
            return "the baseline itself"
        text = f"{self.speedup(choice):.2f}× the baseline"
        ratio = choice.against(base)
        if not ratio.tested:
            return f"{text} ({noise.UNTESTED})"
        if ratio.called():
            return f"{text} ({ratio.interval_text()})"
        return f"{text}, not a measurable change ({ratio.interval_text()})"

    def lines(self) -> list[str]:
        best, base = self.best, self.baseline
        out = [f"best: {best.jobid} {best.settings_text()}: {best.samples_per_s:.2f} samples/s, "]
        out[0] += self.against_baseline(best)
        out.append(self._cheapest_line())
        if base is not None:
            where = " (measured on another node or node type)" if self.baseline_elsewhere else ""
            out.append(
                f"baseline (point 0){where}: {base.jobid} {base.settings_text()}: "
                f"{base.samples_per_s:.2f} samples/s"
            )
        if best.runs < 2 and (base is None or base.runs < 2):
            out.append(f"one run per point: nothing is tested, ties are within {WITHIN:.0%}; {REPEATS_HINT}")
        return out

    def _cheapest_line(self) -> str:
        best, cheap = self.best, self.cheapest
        label = "cheapest tied with the best" if self.tested else f"cheapest within {WITHIN:.0%} of the best"
        if not self.tested:
            label += f" ({noise.UNTESTED})" if best.runs < 2 else " (untested where a point has 1 run)"
        if cheap.point_id == best.point_id:
            others = f" ({self.tied - 1} other(s) tied)" if self.tied > 1 else ""
            return f"{label}: the best itself{others}"
        ratio = cheap.against(best)
        interval = f", {ratio.interval_text()}" if ratio.tested else ""
        return (
            f"{label}: {cheap.jobid} {cheap.settings_text()}: {cheap.samples_per_s:.2f} samples/s "
            f"({ratio.estimate - 1:+.1%}{interval}), {_memory(cheap)}{self.against_baseline(cheap)}"
        )

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
        best = _choice(rows.loc[rows["samples_per_s"].idxmax()], shown)
        tied, tested = _tied_with(best, rows)
        cheapest = rows[rows["point_id"].isin(tied)].sort_values(
            [*CHEAPNESS, "samples_per_s"],
            ascending=[True, True, True, False],
            na_position="last",
            kind="stable",
        )
        baseline, elsewhere = _baseline(rows, chosen, sweep_dir)
        out.append(
            Recommendation(
                group=str(group),
                sweep=str(rows["sweep"].iloc[0]),
                sweep_dir=str(sweep_dir),
                rung=str(rows["rung"].iloc[0]),
                best=best,
                cheapest=_choice(cheapest.iloc[0], shown),
                baseline=None if baseline is None else _choice(baseline, shown),
                baseline_elsewhere=elsewhere,
                tied=len(tied),
                tested=tested,
            )
        )
    return out


def _tied_with(best: Choice, rows: pd.DataFrame) -> tuple[set[str], bool]:
    """The points the runs do not tell apart from the best (the best included), and whether
    every one was tested; with one run on a side, within WITHIN of the best stands in."""
    tied, tested = {best.point_id}, best.runs > 1
    for point_id, runs, rate in zip(
        rows["point_id"], rows["run_samples_per_s"], rows["samples_per_s"], strict=True
    ):
        if point_id == best.point_id:
            continue
        ratio = noise.independent_ratio(best.run_samples_per_s, runs)
        if ratio.tested:
            if not ratio.called():
                tied.add(str(point_id))
        else:
            tested = False
            if rate >= (1 - WITHIN) * best.samples_per_s:
                tied.add(str(point_id))
    return tied, tested


def _baseline(rows: pd.DataFrame, chosen: pd.DataFrame, sweep_dir: str) -> tuple[pd.Series | None, bool]:
    here = rows[rows["point_index"] == 0]
    if not here.empty:
        return here.iloc[0], False
    there = chosen[(chosen["point_index"] == 0) & (chosen["sweep_dir"] == sweep_dir)]
    if there.empty:
        return None, False
    row = there.iloc[0].copy()
    row["samples_per_s"] = there["samples_per_s"].median()
    # Every run of point 0 in the other groups: the runs the speedup is tested against.
    row["run_samples_per_s"] = tuple(v for runs in there["run_samples_per_s"] for v in runs)
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
        run_samples_per_s=tuple(float(v) for v in row["run_samples_per_s"]),
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
