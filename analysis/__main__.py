"""Answers from result folders alone (no torch, no GPU: runs on a login node).

    python -m analysis RESULTS... [--by node|gpu] [--format F] [-o FILE] [--plots] [--timeline ID]
    python -m analysis RESULTS... --format parquet|json -o FILE
    python -m analysis compare A B [--format F] [-o FILE]

The first prints the per-node tables with the recommendation; the second writes the tidy rows
(one per rank, rung and repeat, with settings and provenance: analysis/export.py) for a
notebook; the third compares two sets of results configuration by configuration. RESULTS, A
and B are sweep folders, spec folders, results roots or globs (quote a glob to give it to one
side of compare). A results folder that is literally named "compare" is given as ./compare.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis.aggregate import GROUPINGS
from analysis.export import EXPORT_FORMATS

# The table formats in the order of every verb that prints tables (harness/text_tables.py;
# tests/harness/test_cli.py keeps them equal), then the report's own: one self-contained page
# (html) and the tidy rows (parquet, json).
COMPARE_FORMATS = ["terminal", "markdown", "csv", "latex"]
FORMAT_CHOICES = [*COMPARE_FORMATS, "html", *EXPORT_FORMATS]
DEFAULT_HTML = Path("report.html")
PREFIX = "harness:"
"""The one prefix of an error line, whichever verb says it: `harness report` and `harness
compare` run this module, and `python -m analysis` is the same verbs without the entry point."""


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="RESULTS",
        help="sweep folders, spec folders, results roots or globs",
    )
    parser.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default="terminal",
        help="terminal (default), markdown, csv, latex, or html: one self-contained page with the "
        f"tables and plots, written to -o (default ./{DEFAULT_HTML}); parquet or json (records): "
        "the tidy rows for a notebook, one per rank, rung and repeat, with every setting and "
        "provenance, written to -o (required)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="write the report to FILE instead of the terminal",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="every column of the tables (as --format csv has them); by default the settings that "
        "vary between points and the figures that answer, the settings the same in every row said "
        "once above",
    )
    parser.add_argument(
        "--by",
        choices=GROUPINGS,
        default="node",
        help="a table per node (hostname, the default) or per node type (gpu: GPU model and count, "
        "from meta-rank<k>.json)",
    )
    parser.add_argument(
        "--plots",
        action="store_true",
        help="write PNG plots to <sweep dir>/plots/ (throughput against num_workers, the caching "
        "ladder, the timelines of the baseline and best points) and list them",
    )
    parser.add_argument(
        "--au",
        type=_share,
        default=None,
        metavar="SHARE",
        help="with results of several sizes (slurm.nodes: [1, 2, 4]), the accelerator utilisation "
        "each size must hold in the scaling section (default 0.9, MLPerf Storage's)",
    )
    parser.add_argument(
        "--timeline",
        action="append",
        default=[],
        metavar="POINT_ID",
        help="also plot this point's utilization timeline (repeatable; 'all': every point; writes plots)",
    )


def _share(text: str) -> float:
    """--au: a share in (0, 1]; argparse says the error in one line."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share in (0, 1], such as 0.9")
    return value


def report_main(args: argparse.Namespace) -> int:
    from analysis.render.report import build_report

    fmt = args.format
    if fmt in EXPORT_FORMATS:
        return export_main(args.paths, fmt, getattr(args, "output", None))
    report = build_report(
        args.paths,
        fmt,
        by=getattr(args, "by", "node"),
        plots=getattr(args, "plots", False),
        timeline=getattr(args, "timeline", []),
        wide=getattr(args, "wide", False),
        **({"au_threshold": args.au} if getattr(args, "au", None) is not None else {}),
    )
    output = getattr(args, "output", None)
    if output is None and fmt == "html":
        output = DEFAULT_HTML
    if output is not None:
        if not _write(Path(output), report.text):
            return 2
        summary = f"{report.points} point(s)"
        if report.problems:
            summary += f", {report.problems} problem(s) listed in the report"
        print(f"report: {output} ({summary})")
    else:
        print(report.text)
    if report.points == 0:
        return 1
    if report.expectations_failed:
        return 3  # harness_schema.expect.EXIT_EXPECTATION_FAILED: a CI job or nightly sbatch acts on it
    return 0


def export_main(paths: Sequence[str], fmt: str, output: Path | None) -> int:
    """Write the tidy rows to `output`: exit 0, 1 when there are no rows, 2 without -o or when
    the file cannot be written. Reading problems go to stderr, as warnings."""
    from analysis.export import tidy, tidy_bytes
    from harness_schema.atomic import atomic_write_bytes

    if output is None:
        print(f"{PREFIX} --format {fmt} writes a file: give it with -o FILE", file=sys.stderr)
        return 2
    problems: list[str] = []
    frame = tidy(paths, problems)
    for problem in problems:
        print(f"{PREFIX} {problem}", file=sys.stderr)
    if frame.empty:
        print(f"{PREFIX} no rows to export; {output} not written", file=sys.stderr)
        return 1
    try:
        atomic_write_bytes(Path(output), tidy_bytes(frame, fmt))
    except OSError as e:
        print(f"{PREFIX} cannot write {output}: {e.strerror or e}", file=sys.stderr)
        return 2
    points = frame[["sweep_dir", "point_id"]].drop_duplicates().shape[0]
    print(f"export: {output} ({len(frame)} row(s) of {points} point(s), {fmt})")
    return 0


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="the results before (a sweep folder, spec folder or glob)")
    parser.add_argument("b", metavar="B", help="the results after, or on the other node type")
    parser.add_argument(
        "--format",
        choices=COMPARE_FORMATS,
        default="terminal",
        help="how the tables are printed (default: terminal)",
    )
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE")


def compare_main(args: argparse.Namespace) -> int:
    """Exit 0 when some configurations matched, 1 when none did (or a side has no rows)."""
    from analysis.grid.compare import compare, render_comparison

    comparison = compare([args.a], [args.b])
    text = render_comparison(comparison, args.format)
    output = getattr(args, "output", None)
    if output is not None:
        if not _write(Path(output), text):
            return 2
        print(f"comparison: {output} ({comparison.matched} matching configuration(s))")
    else:
        print(text)
    return 0 if comparison.matched else 1


def _write(path: Path, text: str) -> bool:
    from harness_schema.atomic import atomic_write_bytes

    try:
        atomic_write_bytes(path, (text if text.endswith("\n") else text + "\n").encode())
    except OSError as e:
        print(f"{PREFIX} cannot write {path}: {e.strerror or e}", file=sys.stderr)
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # `python -m analysis ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "compare":
        parser = argparse.ArgumentParser(
            prog="python -m analysis compare",
            description="Compare two sets of results, configuration by configuration (matched on "
            "their settings, not point ids). A change is called faster or slower when its 95%% interval "
            "from the runs of each side excludes no change and it is at least 3%%; with one run a side "
            "it is shown as untested.",
        )
        add_compare_arguments(parser)
        return compare_main(parser.parse_args(argv[1:]))
    parser = argparse.ArgumentParser(
        prog="python -m analysis",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_report_arguments(parser)
    return report_main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
