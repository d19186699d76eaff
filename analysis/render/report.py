"""The report a user reads after a sweep: per-node tables and recommendations, then stragglers,
incomplete results, failures and reading problems; plots on request (always in HTML)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from analysis import summary_cache
from analysis.aggregate import add_nodes, table_rows
from analysis.expect import check_expectations, failed, render_expectations
from analysis.grid.recommend import Recommendation, render_recommendations
from analysis.grid.tail import tail_notes
from analysis.ladder.verdict import Verdict, ladder_verdicts
from analysis.ladder.verdict_text import render_verdict
from analysis.load import load_results
from analysis.meta import load_meta
from analysis.render import html
from analysis.render.tables import loader_tables, readable, render
from analysis.scaling import AU_THRESHOLD, Scaling, render_scaling, scale_count, scaling
from analysis.stragglers import RULE, find_stragglers
from analysis.sweep_plan import SweepPlan, load_plan
from harness_schema.settings import AUTO_RSE

if TYPE_CHECKING:
    from analysis.render.plots import Plot

MAX_LISTED = 20
LADDER = "caching ladder"
SCALING = "scaling: how many GPUs the input pipeline feeds"


@dataclass(frozen=True, slots=True)
class Report:
    text: str
    points: int
    failed_points: int
    problems: int
    plots: tuple[Path, ...] = field(default=())
    """PNG files written (with plots=True)."""
    expectations_failed: int = 0
    """Expectations of the sweeps' `expect:` sections not met (analysis/expect.py)."""


def build_report(
    paths: Sequence[str | Path],
    fmt: str = "terminal",
    *,
    by: str = "node",
    plots: bool = False,
    timeline: Sequence[str] = (),
    consolidated: bool = True,
    wide: bool = False,
    au_threshold: float = AU_THRESHOLD,
) -> Report:
    """`by`: node (a table per host) or gpu (per node type: GPU model and count). `wide`: every
    column of the tables, as CSV has them; else the columns a person reads (tables.readable). `plots`:
    write the PNGs under `<sweep dir>/plots/` and name them; the HTML format embeds them anyway.
    `consolidated`: read the sweeps' consolidated files, and write them again where rank
    files were added or changed (analysis/consolidated.py); else read every rank file.
    `au_threshold`: the AU the scaling section's sizes must hold (results of several sizes)."""
    loaded = load_results(paths, consolidated=consolidated, refresh=consolidated)
    rows = loaded.rows
    meta = (
        load_meta(rows, loaded.problems, consolidated=consolidated)
        if by == "gpu" and not rows.empty
        else None
    )
    if not rows.empty:
        rows = add_nodes(rows, meta)
    plans = {d: load_plan(d, loaded.problems) for d in loaded.sweep_dirs()}
    incomplete = _incomplete(rows, plans)
    found = scaling(rows, au_threshold) if not rows.empty and scale_count(rows) > 1 else []
    drawn = plots or fmt == "html" or bool(timeline)
    # A report of text alone takes the recommendations kept as said; the plots need them whole.
    summary, recs = _judged(rows, by, meta, loaded.file_keys, said=not drawn)
    made = _plots(summary, recs, found, timeline, write=plots or bool(timeline)) if drawn else []

    group_plots: dict[str, list[Plot]] = {}
    for plot in made:
        group_plots.setdefault(plot.group, []).append(plot)
    sections = _group_sections(summary, recs, group_plots, fmt, by, wide)
    ladders = _ladder_verdicts(rows, fmt, wide)
    if ladders:
        sections.append((LADDER, ladders))
    if found:  # results of more than one size (slurm.nodes: [1, 2])
        sections.append((SCALING, render_scaling(found, fmt)))
    checked = check_expectations(loaded.rows, loaded.sweep_dirs())
    if checked:
        sections.append(("expectations (each sweep's expect:)", render_expectations(checked, fmt)))

    failures = _failures(rows)
    problems = loaded.problems + incomplete
    written = [p for p in made if p.path is not None]
    notes = _notes(rows, failures, problems, plans, loaded.profiled) + _plot_notes(written)
    rest = [p for plots_of_group in group_plots.values() for p in plots_of_group]
    return Report(
        text=_text(paths, sections, notes, rest, written, fmt),
        points=int(rows[["sweep_dir", "point_id"]].drop_duplicates().shape[0]) if not rows.empty else 0,
        failed_points=0 if failures is None else int(failures["point_id"].nunique()),
        problems=len(problems),
        plots=tuple(p.path for p in written if p.path is not None),
        expectations_failed=failed(checked),
    )


def _judged(
    rows: pd.DataFrame, by: str, meta: pd.DataFrame | None, keys: dict[str, str], *, said: bool
) -> tuple[pd.DataFrame, Sequence[Recommendation | summary_cache.Said]]:
    """The summary and its recommendations, each sweep's taken as kept where its rows did not
    change (analysis/summary_cache.py); with `said`, the recommendations kept as said."""
    summaries = summary_cache.summarize(rows, by, meta, keys=keys)
    return summaries.summary, summary_cache.recommendations(summaries, said=said)


def _plots(
    summary: pd.DataFrame,
    recs: Sequence[Recommendation | summary_cache.Said],
    found: list[Scaling],
    timeline: Sequence[str],
    *,
    write: bool,
) -> list[Plot]:
    """Every plot of the report (the groups', the timelines, the scaling series'), written to
    <sweep>/plots/ with `write`; matplotlib imported only here, when drawing."""
    from analysis.render.plots import make_plots, scaling_plot, write_plots

    whole = [r for r in recs if isinstance(r, Recommendation)]  # every one: made whole where drawn
    made = make_plots(summary, whole, timeline) + [scaling_plot(s) for s in found]
    return write_plots(made) if write else made


def _group_sections(
    summary: pd.DataFrame,
    recs: Sequence[Recommendation | summary_cache.Said],
    group_plots: dict[str, list[Plot]],
    fmt: str,
    by: str,
    wide: bool = False,
) -> list[tuple[str, str]]:
    """(title, rendered body) per group: its table, the table's notes, its recommendations and,
    in HTML, its plots (taken out of `group_plots`)."""
    recs_by_group: dict[str, list[Recommendation | summary_cache.Said]] = {}
    for rec in recs:
        recs_by_group.setdefault(rec.group, []).append(rec)
    shown = table_rows(summary)
    # Each group's rows, in their order, taken once (not a mask over every row per group).
    of_group = dict(iter(shown.groupby("group", sort=False))) if not shown.empty else {}
    sections = []
    for group, table in loader_tables(summary).items():
        body = _table_text(table, of_group[group], fmt, wide)
        sep = "\n" if fmt == "html" else "\n\n"
        notes = table_notes(of_group[group])
        if notes and fmt != "csv":
            body += sep + _note_block(notes, fmt)
        if fmt == "html" and recs_by_group.get(group):
            body += sep + "\n".join(_recommendation_html(r) for r in recs_by_group[group])
        elif fmt != "csv" and recs_by_group.get(group):
            body += sep + render_recommendations(recs_by_group[group], fmt)
        if fmt == "html":
            body += "\n" + "\n".join(html.figure(p.png, _caption(p)) for p in group_plots.pop(group, []))
        sections.append((_group_title(group, by, of_group[group]), body))
    return sections


def _table_text(table: pd.DataFrame, rows: pd.DataFrame, fmt: str, wide: bool) -> str:
    """A group's table in `fmt`: with `wide`, and in CSV (read by programs), every column; else
    the columns a person reads, under the line of what is the same in every row."""
    if not wide and fmt != "csv":
        view = readable(table, rows)
        table, line = view.table, view.line(fmt)
    else:
        line = ""
    if fmt == "html":
        return (html.paragraph(line) + "\n" if line else "") + html.scroll(render(table, fmt))
    # Markdown starts a table after a blank line only (else the header joins the paragraph).
    return (line + ("\n\n" if fmt == "markdown" else "\n") if line else "") + render(table, fmt)


def _notes(
    rows: pd.DataFrame,
    failures: pd.DataFrame | None,
    problems: list[str],
    plans: dict[Path, SweepPlan | None],
    profiled: dict[str, list[str]],
) -> list[str]:
    """The report's closing notes: caveats, stragglers, failures, problems, pending points, traces
    (`profiled`: analysis.load.Loaded.profiled)."""
    notes = _caveats(rows)
    stragglers = find_stragglers(rows) if not rows.empty else []
    if stragglers:
        notes.append(f"{len(stragglers)} straggler(s):")
        notes.extend(f"  {s.line()}" for s in stragglers[:MAX_LISTED])
        if len(stragglers) > MAX_LISTED:
            notes.append(f"  … and {len(stragglers) - MAX_LISTED} more")
        notes.append(f"  (rule: {RULE})")
    if failures is not None:
        notes.append(f"{failures['point_id'].nunique()} point(s) had failed rungs:")
        notes.extend(f"  {r.point_id} {r.rung} (rank {r.rank}): {r.error}" for r in failures.itertuples())
    if problems:
        notes.append(f"{len(problems)} problem(s) with the result files:")
        notes.extend(f"  {p}" for p in problems)
    notes += _pending(rows, plans)
    notes += _profiles(plans, profiled)
    if rows.empty and not problems:
        notes.append("no result rows found")
    return notes


def _plot_notes(written: list[Plot]) -> list[str]:
    return ["plots:", *(f"  {p.path}" for p in written)] if written else []


def _text(
    paths: Sequence[str | Path],
    sections: list[tuple[str, str]],
    notes: list[str],
    rest: list[Plot],
    written: list[Plot],
    fmt: str,
) -> str:
    if fmt == "html":
        return _html_page(paths, sections, notes, rest)
    # The verdicts carry their own titles.
    parts = [body if title == LADDER else _title(title, fmt) + body for title, body in sections]
    if fmt == "csv":
        parts += [f"# plot: {p.path}" for p in written]
    elif notes:
        parts.append("\n".join(f"% {n}" for n in notes) if fmt == "latex" else "\n".join(notes))
    return "\n\n".join(parts)


def table_notes(shown: pd.DataFrame) -> list[str]:
    """What a reader of a table must know to trust its rows: windows that drifted, epochs
    shorter than the window (the loader restarted inside it: its workers, unless persistent),
    and a wait for data whose tail the mean hides (analysis.grid.tail)."""
    notes = []
    unsteady = shown[shown["unsteady_runs"] > 0]
    if not unsteady.empty:
        listed = ", ".join(
            f"{r.jobid} ({r.unsteady_runs:.0f} of {r.runs:.0f} runs)"
            for r in unsteady.head(MAX_LISTED).itertuples()
        )
        more = f" … and {len(unsteady) - MAX_LISTED} more" if len(unsteady) > MAX_LISTED else ""
        notes.append(
            f"window not steady (step time drifted between its halves beyond the noise): {listed}{more}; "
            "a longer measure.warmup_steps or measure.steps gives a steadier window"
        )
    notes += _outlier_notes(shown)
    notes += _imprecise_notes(shown)
    short = shown[(shown["epoch_steps"] > 0) & (shown["epoch_steps"] < pd.to_numeric(shown["steps"]))]
    for r in short.head(MAX_LISTED).itertuples():
        restarts = "" if pd.isna(r.epoch_restarts) else f": {r.epoch_restarts:g} {_restart_kind(r)} inside it"
        spent = "" if pd.isna(r.epoch_restart_time) else f" ({r.epoch_restart_time:.3f} s of the window)"
        notes.append(
            f"{r.jobid}: epoch shorter than the window ({r.epoch_steps:.0f} batches per rank, "
            f"{int(r.steps)} steps measured){restarts}{spent}"
        )
    if len(short) > MAX_LISTED:
        notes.append(f"… and {len(short) - MAX_LISTED} more point(s) whose epoch is shorter than the window")
    return notes + tail_notes(shown)


def _imprecise_notes(shown: pd.DataFrame) -> list[str]:
    """The auto windows (measure.steps: auto) that stopped at measure.max_seconds with their
    rate's relative standard error above AUTO_RSE (harness/execution/steady.py)."""
    if "imprecise_runs" not in shown:
        return []
    imprecise = shown[shown["imprecise_runs"] > 0]
    if imprecise.empty:
        return []
    listed = ", ".join(
        f"{r.jobid} ({r.imprecise_runs:.0f} of {r.runs:.0f} runs, up to {r.window_rse:.1%})"
        for r in imprecise.head(MAX_LISTED).itertuples()
    )
    more = f" … and {len(imprecise) - MAX_LISTED} more" if len(imprecise) > MAX_LISTED else ""
    return [
        f"auto window stopped at measure.max_seconds with its step rate's relative standard error "
        f"above {AUTO_RSE:.0%}: {listed}{more}; raise measure.max_seconds, or compare with more repeats"
    ]


def _outlier_notes(shown: pd.DataFrame) -> list[str]:
    """The runs that stand out (analysis.noise.outliers), named: neither dropped nor trusted alone."""
    if "outliers" not in shown:
        return []
    marked = shown[shown["outliers"] != ""]
    if marked.empty:
        return []
    listed = "; ".join(f"{r.jobid} {r.outliers}" for r in marked.head(MAX_LISTED).itertuples())
    more = f" … and {len(marked) - MAX_LISTED} more" if len(marked) > MAX_LISTED else ""
    return [
        f"runs that stand out from their point's others (% from its median): {listed}{more}; kept in "
        "samples_per_s (the median) and in ci95, which they widen: more repeats tell a stall from the "
        "configuration's own speed"
    ]


def _restart_kind(row: Any) -> str:
    """Each epoch end starts a new iterator: new worker processes unless they persist."""
    workers = not pd.isna(row.num_workers) and row.num_workers > 0 and not bool(row.persistent_workers)
    return "worker restart(s)" if workers else "iterator restart(s)"


def _note_block(notes: list[str], fmt: str) -> str:
    if fmt == "markdown":
        return "\n".join(f"- {n}" for n in notes)
    if fmt == "latex":
        return "\n".join(f"% {n}" for n in notes)
    if fmt == "html":
        return "\n".join(html.paragraph(n) for n in notes)
    return "\n".join(notes)


def _group_title(group: str, by: str, rows: pd.DataFrame) -> str:
    """`rows`: the group's rows as the table shows them."""
    rungs = set(rows["rung"])
    rung = f" (rung {rungs.pop()})" if len(rungs) == 1 and rungs != {"full"} else ""
    if by == "gpu":
        nodes = sorted(rows["node"].unique())
        listed = ", ".join(nodes[:6]) + (f", … ({len(nodes)} nodes)" if len(nodes) > 6 else "")
        return f"node type {group} (nodes: {listed}){rung}"
    return f"node {group}{rung}"


def _title(text: str, fmt: str) -> str:
    if fmt == "markdown":
        return f"### {text}\n\n"
    if fmt == "latex":
        return f"% {text}\n"
    if fmt == "csv":
        return f"# {text}\n"
    return f"{text}\n"


def _caption(plot: Plot) -> str:
    return f"{plot.title} — {plot.sweep_dir}"


def _html_page(
    paths: Sequence[str | Path], sections: list[tuple[str, str]], notes: list[str], timelines: list[Plot]
) -> str:
    parts = [html.Section(title, body) for title, body in sections]
    if timelines:
        figures = "\n".join(html.figure(p.png, _caption(p)) for p in timelines)
        parts.append(html.Section("timelines and other plots", figures))
    if notes:
        parts.append(html.Section("notes", html.preformatted("\n".join(notes))))
    return html.page("pipeline-harness report: " + " ".join(str(p) for p in paths), parts)


def _recommendation_html(rec: Recommendation | summary_cache.Said) -> str:
    """The recommendation as a table: one row per choice (best, cheapest, undecided, baseline), its
    configuration and its figures; the one-run caveat under it."""
    rows, after = [], []
    for line in rec.lines():
        role, _, rest = line.partition(": ")
        if not role.startswith(("best", "cheapest", "undecided", "not ranked", "baseline")):
            after.append(html.paragraph(line))
            continue
        configuration, _, figures = rest.partition(": ")
        rows.append([role, configuration, figures])
    table = html.table(["", "configuration", "samples/s and against the baseline"], rows, "text")
    return "\n".join([html.heading(rec.title()), table, *after])


def _verdict_html(verdict: Verdict, wide: bool = False) -> str:
    """The verdict's table as an HTML table (its cells as the terminal shows them, through the
    tab-separated rendering), its title above, its sentence and caveats below."""
    lines = render_verdict(verdict, "csv", wide=wide).split("\n")
    size = len(verdict.table) + 1  # the header and one line per rung
    cells = [[c.strip() for c in line.split("\t")] for line in lines[1 : 1 + size]]
    rest = [html.paragraph(line, "verdict" if n == 0 else "note") for n, line in enumerate(lines[1 + size :])]
    return "\n".join([html.heading(lines[0]), html.table(cells[0], cells[1:], "ladder"), *rest])


def _ladder_verdicts(rows: pd.DataFrame, fmt: str, wide: bool = False) -> str:
    """The caching ladder's verdict (analysis.ladder.verdict) of every point that measured two rungs."""
    if rows.empty or fmt == "csv":
        return ""
    ladder = rows[rows.groupby(["sweep_dir", "point_id"])["rung"].transform("nunique") > 1]
    if ladder.empty:
        return ""
    verdicts = ladder_verdicts(ladder)
    if fmt == "html":
        return "\n".join(_verdict_html(v, wide) for v in verdicts)
    return "\n\n".join(render_verdict(v, fmt, wide=wide) for v in verdicts)


def _profiles(plans: dict[Path, SweepPlan | None], profiled: dict[str, list[str]]) -> list[str]:
    """Where the profiler traces are, and HolisticTraceAnalysis's time breakdown where it can
    make one (it needs GPU kernels in the traces, and HTA installed)."""
    from analysis.profiles import time_breakdown, trace_dirs

    notes: list[str] = []
    for sweep_dir in plans:
        for folder in trace_dirs(sweep_dir, profiled.get(str(sweep_dir))):
            count = sum(1 for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))
            notes.append(f"profiler traces ({count}): {folder}  (TensorBoard, Perfetto or HTA read them)")
            breakdown = time_breakdown(folder)
            if breakdown is not None:
                notes.append("  " + breakdown.to_string(index=False).replace("\n", "\n  "))
    return notes


def _caveats(rows: pd.DataFrame) -> list[str]:
    notes = []
    ok = rows[rows["status"] == "ok"] if not rows.empty else rows
    if not ok.empty and (ok["device"] == "cpu").all():
        notes.append(
            "device cpu: pin_memory and non_blocking have no effect here (nothing is copied to a "
            "GPU); device_batch and host_batch measure the same thing."
        )
    amp = set(ok["amp"].astype(str).unique()) if not ok.empty and "amp" in ok else set()
    if "fp16" in amp and len(amp) > 1:
        notes.append(
            "amp fp16: the GradScaler reads its found-inf flag with .item() every step (one "
            "host-device sync per step); bf16 and fp32 rows do not sync, so their waits for data "
            "against compute are not comparable with the fp16 rows."
        )
    return notes


def _failures(rows: pd.DataFrame) -> pd.DataFrame | None:
    if rows.empty:
        return None
    failed = rows[rows["status"] == "failed"]
    if failed.empty:
        return None
    return failed.drop_duplicates(["point_id", "rung", "error"])[["point_id", "rung", "rank", "error"]]


def _incomplete(rows: pd.DataFrame, plans: dict[Path, SweepPlan | None]) -> list[str]:
    """Missing ranks (a run whose world size says more ranks than wrote rows) and partial rank
    files (fewer (rung, repeat) rows than the plan asks for)."""
    if rows.empty:
        return []
    out = []
    run = rows["jobid"].where(rows["jobid"] != "", rows["hostname"])
    runs = rows.assign(run=run).groupby(["sweep_dir", "point_id", "run"], sort=True)
    counts = pd.DataFrame({"ranks": runs["rank"].nunique(), "world_size": runs["world_size"].max()})
    short = counts[counts["ranks"] < counts["world_size"]]
    for sweep_dir, point_id, run_id in short.index:
        world = int(short.loc[(sweep_dir, point_id, run_id), "world_size"])
        present = rows.loc[
            (rows["sweep_dir"] == sweep_dir) & (rows["point_id"] == point_id) & (run == run_id), "rank"
        ]
        missing = sorted(set(range(world)) - {int(r) for r in present.dropna()})
        if missing:
            names = ", ".join(f"rank{r}.csv" for r in missing)
            out.append(
                f"{Path(sweep_dir) / 'points' / str(point_id)}: no rows from rank(s) "
                f"{', '.join(map(str, missing))} of {world} ({names} missing or unreadable, "
                f"run {run_id}); the figures are those of the ranks present"
            )
    expected: dict[tuple[str, str], int] = {}
    for sweep_dir, plan in plans.items():
        if plan is None:
            continue
        for point in plan.points:
            repeats = point.get("measure", {}).get("repeats", 1)
            expected[(str(sweep_dir), point["id"])] = len(point.get("rungs", [])) * int(repeats)
    if expected:
        units = rows.assign(unit=rows["rung"].astype(str) + "/" + rows["repeat"].astype(str))
        counts = units.groupby(["sweep_dir", "point_id", "source"], sort=True)["unit"].nunique()
        levels = [counts.index.get_level_values(k).tolist() for k in range(3)]
        for sweep_dir, point_id, source, n in zip(*levels, counts.tolist(), strict=True):
            want = expected.get((sweep_dir, point_id))
            if want and n < want:
                out.append(
                    f"{source}: {n} of {want} (rung, repeat) rows; the run stopped early "
                    "(time limit, crash) or is still running"
                )
    return out


def _pending(rows: pd.DataFrame, plans: dict[Path, SweepPlan | None]) -> list[str]:
    """Planned points without any row: not run yet, or their files are gone."""
    if rows.empty:
        return []
    out = []
    have = set(zip(rows["sweep_dir"], rows["point_id"], strict=True))
    for sweep_dir, plan in plans.items():
        if plan is None:
            continue
        missing = [p["id"] for p in plan.points if (str(sweep_dir), p["id"]) not in have]
        if missing:
            listed = ", ".join(missing[:10]) + (" …" if len(missing) > 10 else "")
            out.append(
                f"{sweep_dir}: {len(missing)} of {len(plan.points)} planned point(s) have no rows "
                f"(not run yet, or their files are missing): {listed}"
            )
    return out
