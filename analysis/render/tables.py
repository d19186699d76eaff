"""Lay out the per-node DataLoader table of the Jean Zay course (https://github.com/IDRIS-CNRS/DLO-JZ)
from the summary that analysis.aggregate makes, and render it (terminal, markdown, csv, latex, html).

Columns: the course's first (the job, the loader's knobs, its two chronometers), then ours; the
noise of the repeats (`runs`, `ci95`: the point's samples/s known to ± that, and `outliers`:
the runs that stand out, where one does), the ranks (`loading_rank`: the rank that waited
most), `steady` and the epoch restarts only where some row needs them. Of the tail of the wait
(analysis.grid.tail), `waited_share` wherever it was measured (how often the step waited longer than
it computed: the one figure of the tail a reader needs on every row), `loading_time_p99` only
where some row's wait is heavy-tailed (then the report's caveat refers to it).

That is the wide table (`--wide`, and every CSV). The table a person reads (`readable`, issue
#38) keeps the job, the settings that vary between its rows (the course's knobs in the course's
order first), then the figures that answer: samples_per_s, loading_time, waited_share, ci95 and
whether the window was steady; a setting the same in every row is said once, above it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from tabulate import tabulate

from analysis.aggregate import SAMPLED_COLUMNS, WORKLOAD_COLUMNS, table_rows, varies
from analysis.grid.tail import heavy_tailed
from harness_schema import settings

# The Jean Zay table's columns, in its order (DLO-JZ, Jour2/tp_dlojz_jour2/dlojz2_3.py): the job,
# the loader's knobs (every one declared, so a new knob joins the table), the two chronometers. Then ours.
JEAN_ZAY_COLUMNS = ["jobid", *settings.LOADER_COLUMNS, "loading_time", "training_time"]
EXTRA_COLUMNS = ["first_step_loading_time", "samples_per_s", "cpu_memory_gb"]
FORMATS = {"terminal": "simple", "markdown": "github", "latex": "latex_booktabs", "html": "html"}
WIDTH = 120
"""The terminal width the readable tables are made to fit (issue #38: the docs site at 1280 px)."""
SETTINGS = [*settings.LOADER_COLUMNS, "sequence_step", *WORKLOAD_COLUMNS, "rung", "nodes", "sweep"]
"""The columns that say what a row ran, in the order the readable table shows those that vary."""
ANSWERS = ["samples_per_s", "loading_time", "waited_share", "runs", "ci95", "steady", "idle_workers", "ranks"]
"""The figures of the readable table, where the wide one has them: `runs` and `ranks` only
where they differ between rows (else they are said above), idle_workers where the row's
num_workers overstates the loader. loading_time_p99 is left to --wide: the report's note on a
heavy tail gives the p50 and p99 of the rows it names."""
SAID_ONCE = {*SETTINGS, "runs", "ranks"}
SAME = "same in every row:"


def loader_tables(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per group (node or node type): the course's columns, then ours and the settings that vary."""
    chosen = table_rows(summary)
    if chosen.empty:
        return {}
    columns = _columns(chosen)
    in_sequence = (chosen["sequence_step"] != "").any()
    tables = {}
    for group, rows in chosen.groupby("group", sort=True):
        # Sampled figures only where this group has some (a CPU node has no gpu_util).
        sampled = [c for c in SAMPLED_COLUMNS if rows[c].notna().any()]
        at = columns.index("sampled")
        table_columns = columns[:at] + sampled + columns[at + 1 :]
        if rows["sweep_dir"].nunique() > 1:
            table_columns.append("sweep")
        # A sequence reads in its order (each step builds on the previous); a grid by time.
        order = ["sweep", "point_index"] if in_sequence else ["sweep", "training_time"]
        ordered = rows.sort_values(order, kind="stable")
        tables[str(group)] = _cells(ordered, table_columns)
    return tables


def _columns(chosen: pd.DataFrame) -> list[str]:
    """The columns of every table of this summary ("sampled" stands for the sampled ones)."""
    varying = [
        c
        for c in ("sequence_step", *WORKLOAD_COLUMNS)
        if varies(chosen[c]) or (c == "sequence_step" and (chosen[c] != "").any())
    ]
    tail = ["waited_share"] if chosen["waited_share"].notna().any() else []
    if heavy_tailed(chosen).any():
        tail.insert(0, "loading_time_p99")
    columns = JEAN_ZAY_COLUMNS + EXTRA_COLUMNS + ["sampled"] + tail + varying
    if chosen["rung"].nunique() > 1:
        columns.append("rung")
    if (chosen["runs"] > 1).any():
        columns += ["runs", "ci95"]
    if (chosen["outliers"] != "").any():
        columns.append("outliers")
    if chosen["steady"].eq(False).any():
        columns.append("steady")
    if (chosen["epoch_restarts"] > 0).any():
        columns += ["epoch_restarts", "epoch_restart_time"]
    if (chosen["idle_workers"] > 0).any():
        columns.append("idle_workers")  # the row's num_workers overstates the loader
    if (chosen["world_size"] > 1).any():
        columns += ["loading_rank", "ranks", "rank_spread"]
    if (chosen["nodes"] > 1).any():
        columns.append("nodes")
    return columns


def _cells(ordered: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The table of these rows, with the cells that are words rather than numbers."""
    table = ordered[columns].reset_index(drop=True)
    if "ranks" in table:
        # "3/4": a rank's rows are missing; the figures are those of the ranks present.
        table["ranks"] = [
            f"{r:.0f}" if r >= w else f"{r:.0f}/{w:.0f}"
            for r, w in zip(ordered["ranks"], ordered["world_size"], strict=True)
        ]
    if "loading_rank" in table:
        table["loading_rank"] = ["" if pd.isna(r) else f"{r:.0f}" for r in table["loading_rank"]]
    if "steady" in table:
        # Only "no" is worth a cell: a window too short to judge is not news.
        table["steady"] = ["no" if pd.notna(s) and not bool(s) else "" for s in table["steady"]]
    return table


@dataclass(frozen=True, slots=True)
class Readable:
    """A table as a person reads it: its columns, and what is the same in every row."""

    table: pd.DataFrame
    same: tuple[tuple[str, str], ...]
    """(column, value as the table would show it), in the wide table's order."""

    def line(self, fmt: str = "terminal") -> str:
        """ "same in every row: pin_memory False, runs 3", wrapped to WIDTH on a terminal; "" when
        nothing is."""
        if not self.same:
            return ""
        if fmt != "terminal":
            text = f"{SAME} " + ", ".join(f"{column} {value}" for column, value in self.same)
            return f"% {text}" if fmt == "latex" else text
        # A setting and its value stay on one line (a no-break space while wrapping).
        items = ", ".join(f"{column} {value}".replace(" ", "\xa0") for column, value in self.same)
        wrapped = textwrap.fill(f"{SAME} {items}", WIDTH, subsequent_indent="  ", break_on_hyphens=False)
        return wrapped.replace("\xa0", " ")


def readable(table: pd.DataFrame, rows: pd.DataFrame | None = None) -> Readable:
    """The table a person reads (issue #38), from a wide one of loader_tables: the job, the
    settings that vary between its rows, then the figures that answer; the settings the same
    in every row said once (`Readable.line`), with the batch size from `rows` (the group's rows
    of the summary) where the table leaves it out for being the same. The course's columns keep
    the course's order. A one-row table says its settings above it too."""
    # Only the columns that may be said once are shown to find those the same in every row:
    # the figures' cells are made once, by render (a table of 100,000 rows: issue #36).
    cells = _shown(table[[c for c in table.columns if c in SAID_ONCE]])
    constant = {c for c in cells.columns if cells[c].astype(str).nunique() <= 1}
    same = [(c, str(cells[c].iloc[0])) for c in table.columns if c in constant and len(cells)]
    if rows is not None and "batch_size" not in table and "batch_size" in rows and not rows.empty:
        sizes = rows["batch_size"].dropna().unique()
        if len(sizes) == 1:
            same.insert(0, ("batch_size", f"{sizes[0]:.0f}"))
    kept = ["jobid", *(c for c in [*SETTINGS, *ANSWERS] if c in table and c not in constant)]
    return Readable(table[kept], tuple(same))


def render(table: pd.DataFrame, fmt: str) -> str:
    shown = _shown(table, digits=fmt != "csv")  # CSV keeps every digit, for a program to read
    if fmt == "csv":
        return str(shown.to_csv(index=False)).rstrip("\n")
    if fmt == "terminal":
        return simple_columns(
            list(shown.columns), [[str(c) for c in shown[h].tolist()] for h in shown.columns]
        )
    return tabulate(shown, headers="keys", tablefmt=FORMATS[fmt], showindex=False, disable_numparse=True)


def _shown(table: pd.DataFrame, digits: bool = True) -> pd.DataFrame:
    """The table's cells as they are shown: with `digits`, numbers to the digits that matter and
    a blank for no value; without, only prefetch_factor's "-" (PyTorch's None, without workers)."""
    shown = table.copy()
    if "prefetch_factor" in shown:
        shown["prefetch_factor"] = _each(shown["prefetch_factor"], "-", int)
    if not digits:
        return shown
    formats = {
        "loading_time": "{:.6f}",
        "loading_time_p99": "{:.6f}",
        "waited_share": "{:.0%}",
        "first_step_loading_time": "{:.4f}",
        "training_time": "{:.3f}",
        "samples_per_s": "{:.2f}",
        "cpu_memory_gb": "{:.2f}",
        "ci95": "±{:.1%}",
        "epoch_restarts": "{:g}",
        "idle_workers": "{:g}",
        "epoch_restart_time": "{:.3f}",
        "rank_spread": "{:.1%}",
        "gpu_util": "{:.1f}",
        "energy_per_sample_j": "{:.4g}",
        "loader_cores": "{:.2f}",
    }
    for column, spec in formats.items():
        if column in shown:
            values = shown[column]
            missing = values.isna().tolist()  # pd.isna of each value, in one call
            shown[column] = [
                ("" if na else spec.format(v)) for v, na in zip(values.tolist(), missing, strict=True)
            ]
    if "batch_size" in shown:
        shown["batch_size"] = _each(shown["batch_size"], "", int)
    # A blank cell is NaN, and stays NaN through astype(str) on pandas 3: shown as "" in every format.
    return shown.astype(object).where(shown.notna(), "")


def _each(values: pd.Series, blank: str, make: Callable[[Any], Any]) -> pd.Series:
    """values.map(lambda v: blank if pd.isna(v) else make(v)), with one isna for the column:
    the cells come out the same once _shown makes every column object."""
    missing = values.isna().tolist()
    cells = [blank if na else make(v) for v, na in zip(values.tolist(), missing, strict=True)]
    return pd.Series(cells, index=values.index)


def simple_table(headers: list[str], rows: list[list[str]]) -> str:
    """tabulate's "simple" layout for text cells, byte for byte (a test checks it), in a
    fraction of its time: tabulate infers a type for every cell, seconds for 10,000 rows."""
    widths = [len(h) + 2 for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)


def simple_columns(headers: list[str], columns: list[list[str]]) -> str:
    """simple_table from the cells column by column (each column's width and padding in one
    pass over it, not a cell at a time across the rows): the same text, byte for byte, in a
    third of the time on a table of 100,000 rows (issue #36)."""
    widths = [
        max(len(h) + 2, max(map(len, cells), default=0)) for h, cells in zip(headers, columns, strict=True)
    ]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    padded = [[c.ljust(w) for c in cells] for cells, w in zip(columns, widths, strict=True)]
    lines.extend("  ".join(row).rstrip() for row in zip(*padded, strict=True))
    return "\n".join(lines)
