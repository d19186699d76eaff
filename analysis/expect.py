"""Expectations checked against results: each figure, its bound, pass or fail.

The spec's `expect:` section (declared and validated in harness_schema/expect.py) is read from
each sweep's saved spec.yaml, so `harness report` checks an old sweep as `harness run` did. An
entry is checked on every point it matches, on the figures the tables show (per point and
node, the median over its runs, i.e. its repeats): its worst point decides. An entry that
matches no figure (no point, or a figure not measured) is "no data", and fails: a gate that
cannot see must not pass.

Where the figure has runs to judge by (samples_per_s, loading_time), each point is judged by
analysis.noise's model, one-sided against the bound less (or, for a max_, plus) the ±5 %
margin: *pass* when the point's whole 95 % interval lies on the right side of it, *FAIL* when
it lies wholly on the wrong side, *undecided* otherwise (and an undecided gate fails too, with
the runs that would likely decide). A figure within the margin of its bound meets it, as a tie
does in every other judgement of the harness. Figures without runs (of_bound, gpu_util) and
points with one run are judged on the median alone, as written.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import noise
from analysis.aggregate import add_nodes, summarize, table_rows
from analysis.meta import load_meta
from harness_schema.expect import Expectation, parse_expect
from harness_schema.rungs import BOUND_RUNGS
from harness_schema.yaml_lines import YamlSyntaxError, load_yaml_with_lines

"""The rung whose steps/s is the device's demand, as analysis/ladder/verdict.py picks it."""


@dataclass(frozen=True, slots=True)
class Outcome:
    sweep_dir: str
    expectation: Expectation | None
    """None when the sweep's expectations could not be read (`problem` says why)."""
    figure: float | None = None
    """The worst matching figure; None: no data."""
    points: int = 0
    where: str = ""
    """The point (and node) of the worst figure."""
    runs: int = 0
    problem: str = ""
    judgement: str = ""
    """PASS, FAIL or UNDECIDED for the worst point ("" where there is nothing to judge)."""
    interval: noise.Estimate | None = None
    """The worst point's figure over the bound, with its interval (None: judged on the median)."""

    @property
    def passed(self) -> bool:
        return self.judgement == PASS


PASS, FAIL, UNDECIDED = "pass", "FAIL", "undecided"
RUNS = {"samples_per_s": "run_samples_per_s", "loading_time": "run_loading_time"}
"""The figures whose runs the summary keeps, to judge a point by its interval."""


def judge(e: Expectation, figure: float, runs: tuple[float, ...] = ()) -> tuple[str, noise.Estimate | None]:
    """One point's figure against the bound: by its runs' interval where it has two or more
    (one-sided, with the margin), else by the figure alone."""
    estimate = None
    if len(runs) > 1 and e.bound > 0:
        try:
            estimate = noise.location([r / e.bound for r in runs])
        except ValueError:  # no positive run (a wait of 0): the figure alone decides
            estimate = None
    if estimate is None or estimate.low is None or estimate.high is None:
        met = figure >= e.bound if e.figure.at_least else figure <= e.bound
        return (PASS if met else FAIL), None
    if e.figure.at_least:  # pass: not below the bound less the margin, interval and all
        good, bad = estimate.low >= 1 - noise.MARGIN, estimate.high < 1 - noise.MARGIN
    else:
        good, bad = estimate.high <= 1 + noise.MARGIN, estimate.low > 1 + noise.MARGIN
    return (PASS if good else FAIL if bad else UNDECIDED), estimate


def read_expectations(sweep_dir: Path) -> tuple[Expectation, ...]:
    """The `expect:` section of a sweep's saved spec.yaml; () for a sweep without one."""
    path = sweep_dir / "spec.yaml"
    if not path.is_file():
        return ()
    loaded = load_yaml_with_lines(path.read_text())
    top = loaded.data if isinstance(loaded.data, dict) else {}

    def fail(dotted: str, message: str) -> Exception:
        return ValueError(f"{path}:{loaded.line_of(dotted)}: {dotted}: {message}")

    return parse_expect(top.get("expect"), fail)


def check_expectations(rows: pd.DataFrame, sweep_dirs: Iterable[Path]) -> list[Outcome]:
    """Every expectation of every sweep, checked on that sweep's rows."""
    wanted: dict[str, tuple[Expectation, ...]] = {}
    out: list[Outcome] = []
    for sweep_dir in sweep_dirs:
        try:
            wanted[str(sweep_dir)] = read_expectations(Path(sweep_dir))
        except (ValueError, YamlSyntaxError, OSError) as e:
            out.append(Outcome(str(sweep_dir), None, problem=f"cannot read the expectations: {e}"))
    if not any(wanted.values()):
        return out
    summary = _summary(rows, node_types=any("node_type" in e.filters for es in wanted.values() for e in es))
    for label, expectations in wanted.items():
        mine = summary[summary["sweep_dir"] == label] if not summary.empty else summary
        out.extend(_check(label, e, mine) for e in expectations)
    return out


def failed(outcomes: Iterable[Outcome]) -> int:
    return sum(not o.passed for o in outcomes)


def _summary(rows: pd.DataFrame, *, node_types: bool) -> pd.DataFrame:
    if rows.empty:
        return pd.DataFrame()
    meta = load_meta(rows, []) if node_types else None  # its problems are the report's to list
    return summarize(add_nodes(rows, meta), by="node", meta=meta)


def _check(sweep_dir: str, e: Expectation, summary: pd.DataFrame) -> Outcome:
    column = e.figure.column
    if summary.empty:
        table = summary
    elif column == "of_bound":
        table = _of_bound(summary)
    elif "rung" in e.filters:
        table = summary
    else:
        table = table_rows(summary)  # the rung the tables show: full, or the sweep's closest
    for key, value in e.filters.items():
        if key not in table.columns:
            table = table.iloc[0:0]
            break
        table = table[[_same(v, value) for v in table[key]]]
    if table.empty or column not in table.columns or table[column].isna().all():
        return Outcome(sweep_dir, e)
    table = table.dropna(subset=[column])
    runs = table[RUNS[column]] if column in RUNS else [()] * len(table)
    judged = [judge(e, float(f), tuple(r)) for f, r in zip(table[column], runs, strict=True)]
    # The worst point: a FAIL before an undecided before a pass, then the worst figure.
    rank = {FAIL: 0, UNDECIDED: 1, PASS: 2}
    sign = 1 if e.figure.at_least else -1
    at = min(range(len(table)), key=lambda i: (rank[judged[i][0]], sign * float(table[column].iloc[i])))
    worst = table.iloc[at]
    return Outcome(
        sweep_dir,
        e,
        figure=float(worst[column]),
        points=len(table),
        where=f"point {worst['point_id']} on {worst['node']}",
        runs=int(table["runs"].max()),
        judgement=judged[at][0],
        interval=judged[at][1],
    )


def _of_bound(summary: pd.DataFrame) -> pd.DataFrame:
    """Per point and node: full's steps/s over the bound rung's (host_batch where measured)."""
    keys = ["group", "sweep_dir", "point_id"]
    full = summary[summary["rung"] == "full"].set_index(keys)
    bound: pd.Series | None = None
    for rung in BOUND_RUNGS:  # host_batch first: it wins where both were measured
        rates = summary[summary["rung"] == rung].set_index(keys)["steps_per_s"]
        bound = rates if bound is None else bound.combine_first(rates)
    assert bound is not None
    ratio = full["steps_per_s"] / bound.reindex(full.index)
    return full.assign(of_bound=ratio).reset_index()


def _same(have: Any, want: Any) -> bool:
    """A row's setting (read from CSV) against the spec's value: numbers as numbers, the rest
    as text (`True` and `true`)."""
    if isinstance(want, int | float) and not isinstance(want, bool):
        try:
            return float(have) == float(want)
        except (TypeError, ValueError):
            return False
    return str(have).strip().lower() == str(want).strip().lower()


def render_expectations(outcomes: list[Outcome], fmt: str = "terminal") -> str:
    """The block a user (or a CI log) reads: one line per expectation, then the count."""
    several = len({o.sweep_dir for o in outcomes}) > 1
    lines = [_line(o, several) for o in outcomes]
    bad = failed(outcomes)
    lines.append(
        f"{bad} of {len(outcomes)} expectation(s) failed (exit status 3)"
        if bad
        else f"all {len(outcomes)} expectation(s) met"
    )
    if fmt == "markdown":
        return "\n".join(f"- {line}" for line in lines)
    if fmt == "latex":
        return "\n".join(f"% {line}" for line in lines)
    if fmt == "csv":
        return "\n".join(f"# {line}" for line in lines)
    if fmt == "html":
        return f"<pre>{html.escape(chr(10).join(lines))}</pre>"
    return "\n".join(lines)


def _line(o: Outcome, several: bool) -> str:
    sweep = f"{Path(o.sweep_dir).name}: " if several else ""
    if o.expectation is None:
        return f"FAIL  {sweep}{o.problem}"
    e = o.expectation
    if o.figure is None:
        return f"FAIL  {sweep}{e.label()}: no data (no point matched, or the figure was not measured)"
    figure = f"{o.figure:.0%}" if e.figure.column == "of_bound" else f"{o.figure:.4g}"
    worst = "worst of" if o.points > 1 else "of"
    median = f", median over {o.runs} runs" if o.runs > 1 else ""
    where = f"{worst} {o.points} point(s): {o.where}{median}{_judged(o)}"
    return f"{o.judgement}  {sweep}{e.label()}: {figure} {e.figure.unit} ({where})"


def _judged(o: Outcome) -> str:
    """What the worst point's interval says, where it was judged by one."""
    r, e = o.interval, o.expectation
    if r is None or r.low is None or r.high is None or e is None or o.figure is None:
        return ""
    edge = e.bound * (1 - noise.MARGIN if e.figure.at_least else 1 + noise.MARGIN)
    ci = f"95% CI {r.low * e.bound:.4g} .. {r.high * e.bound:.4g}"
    if o.judgement == UNDECIDED:
        runs = r.runs_needed(edge=edge / e.bound)
        more = f"about {runs} runs would decide" if runs else f"over {noise.MAX_RUNS} runs would decide"
        return f"; {ci} across {edge:.4g}, the bound with the {noise.MARGIN:.0%} margin: {more}"
    side = "above" if e.figure.at_least else "below"
    if o.judgement == PASS and (o.figure < e.bound if e.figure.at_least else o.figure > e.bound):
        return f"; {ci}, {side} {edge:.4g}: within the {noise.MARGIN:.0%} margin of the bound"
    return f"; {ci}"
