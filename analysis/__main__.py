"""python -m analysis RESULTS... : print the per-node tables from result folders alone."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from analysis.report import build_report
from analysis.tables import FORMATS

FORMAT_CHOICES = [*FORMATS, "csv"]


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
        help="table format (default: terminal)",
    )


def report_main(args: argparse.Namespace) -> int:
    report = build_report(args.paths, args.format)
    print(report.text)
    if report.points == 0:
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    add_report_arguments(parser)
    return report_main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
