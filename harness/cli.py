"""harness VERB ...: plan, run, report, make-data. A thin layer: the logic stays importable.

Exit status: 0 all well; 1 some points failed (the others completed); 2 bad input (spec,
arguments), with one line on stderr and nothing run.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from analysis.__main__ import add_report_arguments, report_main
from analysis.report import build_report
from harness.plan import Plan, expand
from harness.spec import SpecError, load_spec

log = logging.getLogger("harness")

EXIT_OK, EXIT_FAILED_POINTS, EXIT_BAD_INPUT = 0, 1, 2
DEFAULT_RESULTS = Path(os.environ.get("HARNESS_RESULTS", "results"))


class UsageError(Exception):
    """Bad input that is not a spec error (a missing folder, an empty plan)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    try:
        return int(args.func(args))
    except (SpecError, UsageError) as e:
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Benchmark PyTorch input pipelines: the caching ladder and the DataLoader grid.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging (tracebacks of failed points)"
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    plan = verbs.add_parser("plan", help="print the expanded points of a spec; run nothing")
    plan.add_argument("spec", type=Path)
    plan.set_defaults(func=cmd_plan)

    run = verbs.add_parser("run", help="run every point in this process and print the table")
    run.add_argument("spec", type=Path)
    run.add_argument(
        "--results", type=Path, default=DEFAULT_RESULTS, help="results root (default: ./results)"
    )
    run.add_argument("--format", choices=["terminal", "markdown", "latex", "csv"], default="terminal")
    run.set_defaults(func=cmd_run)

    report = verbs.add_parser("report", help="print the tables again from result folders alone")
    add_report_arguments(report)
    report.set_defaults(func=report_main)

    data = verbs.add_parser("make-data", help="write an image_folder data set of random images")
    data.add_argument("root", type=Path)
    data.add_argument("--images", type=int, default=1000)
    data.add_argument("--classes", type=int, default=10)
    data.add_argument("--size", type=int, default=256, help="image side in pixels (default 256)")
    data.add_argument("--image-format", choices=["jpg", "png"], default="jpg")
    data.set_defaults(func=cmd_make_data)
    return parser


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname).1s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for noisy in ("PIL", "matplotlib", "submitit"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _load_plan(spec_path: Path) -> Plan:
    plan = expand(load_spec(spec_path))
    if not plan.points:
        raise UsageError(f"{spec_path}: no points to run: every combination is excluded")
    return plan


def cmd_plan(args: argparse.Namespace) -> int:
    plan = _load_plan(args.spec)
    print(plan_table(plan))
    for note in plan.notes:
        print(f"note: {note}")
    return EXIT_OK


def plan_table(plan: Plan) -> str:
    varying = plan.axes()
    rows = []
    for p in plan.points:
        settings = p.settings()
        row = {"#": p.index, "id": p.id}
        if p.step:
            row["step"] = p.step
        row.update({k: settings[k] for k in varying})
        row["rungs"] = " ".join(p.rungs)
        if any(q.adjustments for q in plan.points):
            row["adjusted"] = "; ".join(p.adjustments)
        rows.append(row)
    spec = plan.spec
    head = (
        f"{spec.name}: {len(plan.points)} point(s) × {len(spec.rungs)} rung(s) × "
        f"{spec.measure.repeats} repeat(s), {spec.measure.warmup_steps}+{spec.measure.steps} steps each"
    )
    return head + "\n" + tabulate(rows, headers="keys", tablefmt="simple", disable_numparse=True)


def cmd_run(args: argparse.Namespace) -> int:
    from harness.backends.inline import run_inline  # torch is imported only to run
    from harness.sweep import create_sweep

    plan = _load_plan(args.spec)
    sweep_dir = create_sweep(plan, args.results)
    log.info("sweep %s: %d point(s), results in %s", plan.spec.name, len(plan.points), sweep_dir)
    outcomes = run_inline(plan.points, sweep_dir)
    report = build_report([sweep_dir], args.format)
    print(report.text)
    print(f"\nresults: {sweep_dir}")
    failed = sum(1 for o in outcomes if o.failed)
    if failed:
        print(
            f"harness: {failed} of {len(outcomes)} point(s) failed; see the rows' error column",
            file=sys.stderr,
        )
        return EXIT_FAILED_POINTS
    return EXIT_OK


def cmd_make_data(args: argparse.Namespace) -> int:
    from harness.workloads.image_folder import make_image_folder

    try:
        total = make_image_folder(
            args.root,
            images=args.images,
            classes=args.classes,
            size=args.size,
            image_format=args.image_format,
        )
    except ValueError as e:
        raise UsageError(f"make-data: {e}") from e
    print(f"{args.images} images, {total / 1e6:.1f} MB, in {args.root}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
