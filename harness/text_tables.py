"""The tables the harness's own verbs print (`plan`, `status`) in the formats that every verb
printing a table offers: the terminal's, Markdown, CSV and LaTeX (`--format`), as `report` and
`compare` render theirs (analysis/tables.py). Torch-free and pandas-free: `plan` and `status`
answer at once on a login node.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from tabulate import tabulate

# One order everywhere (harness/cli.py's --format of every verb; analysis/__main__.py's
# COMPARE_FORMATS holds the same, as analysis imports nothing from harness).
TABLE_FORMATS = ("terminal", "markdown", "csv", "latex")
_TABULATE = {"terminal": "simple", "markdown": "github", "latex": "latex_booktabs"}


def render(rows: Sequence[Mapping[str, Any]], fmt: str = "terminal") -> str:
    """Rows of one shape (their keys are the header) as a table in `fmt`. Numbers are shown as
    given (a point id of digits stays text)."""
    if fmt == "csv":
        out = io.StringIO()
        if rows:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return out.getvalue().rstrip("\n")
    return tabulate(rows, headers="keys", tablefmt=_TABULATE[fmt], disable_numparse=True)
