"""harness VERB ...: plan, run, submit, status, resume, sbatch, report, compare, make-data.

The verbs only: each parses its arguments and calls the modules that do the work (the
policies that run points in harness.sweeps, against the backends of harness.backends.registry;
the plan table in harness.plan_table; the report in analysis). Everything heavy is imported
inside the verb that needs it: `harness --help` imports neither torch nor pandas, and `harness
plan` no pandas. Exit codes and usage errors: harness/exits.py.

`run`, `resume` and `tune` take `--backend NAME`, a key of the one registry of backends
(inline, local, slurm); `submit` is `run --backend slurm` without waiting, the word Slurm users
expect.

`plan`, `run`, `submit` and `sbatch` take overrides after the spec, `key=value` with a dotted
key and a YAML value (harness/config/overrides.py): `harness run x.yaml loader.num_workers=[0,4]`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from harness.backends.registry import BACKENDS
from harness.config.overrides import OVERRIDE_SHAPE
from harness.config.plan import Plan, Point, expand
from harness.config.sbatch_safe import UnsafePath, refuse_unsafe_results
from harness.config.spec import Spec, SpecError, load_spec
from harness.exits import (
    EXIT_BAD_INPUT,
    EXIT_FAILED_POINTS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    interrupted,
    terminated_as_interrupt,
)
from harness.extras import MissingExtra
from harness.storage.lock import SweepHeld
from harness.text_tables import TABLE_FORMATS
from harness_schema.atomic import CannotWrite, named
from harness_schema.reading import UnreadableFile

log = logging.getLogger("harness")

DEFAULT_RESULTS = Path(os.environ.get("HARNESS_RESULTS", "results"))
RESULTS_HELP = "results root (default: ./results, or $HARNESS_RESULTS)"
SPEC_HELP = "the spec: a YAML file (jobs/*.yaml)"
SWEEP_HELP = "a sweep folder (results/<name>/<sweep id>), as run, submit and status print it"
ANALYSIS_VERBS = ("report", "compare")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(analysis=any(verb in argv for verb in ANALYSIS_VERBS))
    args, rest = parser.parse_known_args(argv)
    # Overrides after an option (`run x.yaml --backend local a=1`) are left over by argparse.
    if rest and hasattr(args, "overrides") and all(OVERRIDE_SHAPE.fullmatch(r) for r in rest):
        args.overrides += rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    _setup_logging(args.verbose, args.quiet)
    try:
        refuse_unsafe_results(getattr(args, "results", None))
        with terminated_as_interrupt():  # kill, scancel, a closed terminal: as Ctrl-C
            return int(args.func(args))
    except (SpecError, UsageError, MissingExtra, UnsafePath) as e:
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SweepHeld as e:  # another run or resume works on the sweep: nothing was done
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_FAILED_POINTS
    except UnreadableFile as e:  # a sweep's file torn, unreadable or of another version
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_FAILED_POINTS
    except CannotWrite as e:  # a full, read-only or forbidden disk: one line, what is kept
        from harness.storage.sweep import kept_line

        # A report's plots or page: nothing was measured, and resume would not write them.
        left = ("" if args.verb in ANALYSIS_VERBS else kept_line(e.path)) or e.outcome
        print(f"harness: {e}{'; ' + left if left else ''}", file=sys.stderr)
        return EXIT_FAILED_POINTS
    except KeyboardInterrupt as e:
        print(f"harness: {interrupted(e)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `harness plan spec.yaml | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


# --- the parser, a group of verbs at a time ---------------------------------------------------


def _parser(analysis: bool = True) -> argparse.ArgumentParser:
    """`analysis`: give report and compare their arguments (which imports pandas)."""
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Benchmark PyTorch input pipelines: the caching ladder and the DataLoader grid.",
    )
    parser.add_argument("--version", action=_InstalledVersion)
    _add_verbosity(parser, default=False)
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    _add_here_verbs(verbs)
    _add_slurm_verbs(verbs)
    _add_analysis_verbs(verbs, analysis)
    _add_data_verb(verbs)
    _add_tune_verb(verbs)
    for verb in verbs.choices.values():
        # After the verb too (`harness run x.yaml -v`); SUPPRESS keeps a -v given before it.
        _add_verbosity(verb, default=argparse.SUPPRESS)
    return parser


def installed_version() -> str:
    """The version pip installed (the distribution's metadata: pyproject.toml's `version` when it
    was installed); a checkout run without an install (PYTHONPATH, scripts/gpu_suite.sh) has no
    metadata and says harness.__version__."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pipeline-harness")
    except PackageNotFoundError:
        from harness import __version__

        return __version__


class _InstalledVersion(argparse.Action):
    """--version, argparse's own but for the version, read only when asked: importlib.metadata is
    an import that every other command would pay."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings,
            dest=dest,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"{parser.prog} {installed_version()}\n")
        parser.exit()


def _add_verbosity(parser: argparse.ArgumentParser, default: object) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="debug logging (tracebacks of failed points)",
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="warnings and errors only (no progress lines)",
    )


Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_here_verbs(verbs: Verbs) -> None:
    plan = verbs.add_parser("plan", help="print the expanded points of a spec; run nothing")
    plan.add_argument("spec", type=Path, help=SPEC_HELP)
    _add_overrides(plan)
    _add_format(plan)
    plan.set_defaults(func=cmd_plan)

    run = verbs.add_parser(
        "run", help="run every point (here, or on Slurm with --backend slurm) and print the table"
    )
    run.add_argument("spec", type=Path, help=SPEC_HELP)
    _add_overrides(run)
    run.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    _add_backend(run, "inline")
    _add_format(run, wide=True)
    run.set_defaults(func=cmd_run)


BACKEND_HELP = (
    "where points run: inline, in this process; local, slurm.tasks_per_node subprocesses per "
    "point; slurm, a job array (run and tune follow it to its end, as submit --wait)"
)


WIDE_HELP = (
    "every column of the tables (as CSV has them); by default the settings that vary between "
    "points and the figures that answer, the settings the same in every row said once above"
)


def _add_format(verb: argparse.ArgumentParser, *, wide: bool = False) -> None:
    """--format, and with `wide` the --wide of the verbs that print the per-point tables."""
    verb.add_argument(
        "--format",
        choices=TABLE_FORMATS,
        default="terminal",
        help="how the tables are printed (default: terminal)",
    )
    if wide:
        verb.add_argument("--wide", action="store_true", help=WIDE_HELP)


def _add_backend(verb: argparse.ArgumentParser, default: str | None, more: str = "") -> None:
    """The one --backend flag of every verb that runs points: the registry's names."""
    shown = f" (default: {default})" if default else ""
    verb.add_argument("--backend", choices=list(BACKENDS), default=default, help=BACKEND_HELP + shown + more)


def _add_slurm_verbs(verbs: Verbs) -> None:
    wait_help = "follow the jobs to their end, then print the table"
    submit = verbs.add_parser("submit", help="submit the sweep to Slurm as one job array")
    submit.add_argument("spec", type=Path, help=SPEC_HELP)
    _add_overrides(submit)
    submit.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    submit.add_argument("--wait", action="store_true", help=wait_help)
    _add_format(submit, wide=True)
    submit.set_defaults(func=cmd_submit)

    status = verbs.add_parser("status", help="where each point of a sweep stands (sacct and results)")
    status.add_argument("sweep", type=Path, help=SWEEP_HELP)
    _add_format(status, wide=True)
    status.set_defaults(func=cmd_status)

    resume = verbs.add_parser(
        "resume",
        help="run again only the points without complete results and without a live job "
        "(resubmitted to Slurm, or run here for an inline or local sweep)",
    )
    resume.add_argument("sweep", type=Path, help=SWEEP_HELP)
    resume.add_argument("--wait", action="store_true", help=wait_help + " (Slurm sweeps)")
    resume.add_argument(
        "--failed",
        action="store_true",
        help="also run again the points with failed units (their failed rows kept aside, "
        "in rank<k>.csv.failed-<time>)",
    )
    resume.add_argument(
        "--more-repeats",
        type=_positive,
        metavar="N",
        help="first add N repeats to each point the recommendation's `to decide:` line names "
        "(the cheapest contender, the others still open, the best), measured in turn",
    )
    _add_backend(
        resume, None, "; default: the sweep's own (inline and local with one task are interchangeable)"
    )
    resume.add_argument("--wide", action="store_true", help=WIDE_HELP)
    resume.set_defaults(func=cmd_resume)

    sbatch = verbs.add_parser("sbatch", help="write a standalone sbatch script for the sweep")
    sbatch.add_argument("spec", type=Path, help=SPEC_HELP)
    _add_overrides(sbatch)
    sbatch.add_argument("-o", "--output", type=Path, default=Path("sbatch"), help="folder for the script")
    sbatch.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    sbatch.add_argument(
        "--portable",
        action="store_true",
        help="a script to keep in git (sbatch/): paths relative to the clone's root; "
        "its sweep is made when it runs",
    )
    sbatch.set_defaults(func=cmd_sbatch)


def _add_overrides(verb: argparse.ArgumentParser) -> None:
    verb.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="change the spec without editing it: a dotted key and a YAML value, e.g. "
        "loader.num_workers=8, loader.num_workers=[0,4,8] (an axis), slurm.partition=gpu",
    )


def _add_analysis_verbs(verbs: Verbs, with_arguments: bool) -> None:
    """report and compare take analysis's own arguments. analysis imports pandas, so they are
    added only when the command line names one of these verbs: the verb list shows both anyway."""
    report = verbs.add_parser("report", help="print the tables again from result folders alone")
    report.set_defaults(func=cmd_report)
    compare = verbs.add_parser("compare", help="compare two sweeps: what changed, and did it help")
    compare.set_defaults(func=cmd_compare)
    if with_arguments:
        from analysis.__main__ import add_compare_arguments, add_report_arguments

        add_report_arguments(report)
        add_compare_arguments(compare)


def _add_data_verb(verbs: Verbs) -> None:
    data = verbs.add_parser("make-data", help="write an image_folder data set of random images")
    data.add_argument("root", type=Path, help="the folder to write (created)")
    data.add_argument("--images", type=int, default=1000, help="how many images (default 1000)")
    data.add_argument("--classes", type=int, default=10, help="how many classes, a folder each (default 10)")
    data.add_argument("--size", type=int, default=256, help="image side in pixels (default 256)")
    data.add_argument(
        "--image-format", choices=["jpg", "png"], default="jpg", help="file format (default jpg)"
    )
    data.add_argument(
        "--shards", type=int, default=0, help="pack the images into this many shard files (image_shards)"
    )
    data.add_argument(
        "--webdataset",
        action="store_true",
        help="with --shards: WebDataset tar shards (harness.examples.shards_stream) instead",
    )
    data.set_defaults(func=cmd_make_data)


def _add_tune_verb(verbs: Verbs) -> None:
    tune = verbs.add_parser(
        "tune",
        help="the grid's answer from a profile, a model and a few confirmations (harness/tune/driver.py)",
    )
    tune.add_argument("spec", type=Path, help="a spec with a loader grid; with --what-if, a tune's sweep")
    _add_overrides(tune)
    tune.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    _add_backend(tune, "inline", "; on slurm, a job array per round")
    tune.add_argument("--repeats", type=int, default=3, help="runs of each confirmed point (at least 3)")
    tune.add_argument("--budget", type=int, default=None, help="the most point-runs the confirmations spend")
    tune.add_argument(
        "--what-if",
        metavar="gpus=G,cores=C",
        help="predict the workers per rank on a node of G GPUs and C cores from a tune's sweep",
    )
    tune.set_defaults(func=cmd_tune)


def _positive(text: str) -> int:
    """An integer >= 1 (argparse prints the message after the option's name)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; expected an integer >= 1")
    return value


def _setup_logging(verbose: bool, quiet: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(levelname).1s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for noisy in ("PIL", "matplotlib", "submitit"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# --- what the verbs share ---------------------------------------------------------------------


def _load_plan(spec_path: Path, overrides: Sequence[str] = ()) -> Plan:
    from harness.plan_cost import judge

    plan = expand(load_spec(spec_path, overrides))
    if not plan.points:
        raise UsageError(f"{spec_path}: no points to run: every combination is excluded")
    for warning in judge(plan):  # what a point costs: refused (SpecError) or said here
        log.warning("%s: %s", spec_path, warning)
    return plan


def _check_scripts(spec_path: Path, plan: Plan) -> None:
    """A script workload's flags and loaders, before anything is written or submitted: the
    script runs once per distinct command line, in a scratch folder, up to its loop's
    probe.measure, where the probe stops it (check_script; a few seconds, never training).
    What no point could survive is bad input (check_refusal); any other failure (a login node
    without the GPU or the data the script wants) is only said."""
    if all(point.workload.script is None for point in plan.points):
        return  # before the imports: 30 ms of a plan of built-in workloads (issue #36)
    from concurrent.futures import ThreadPoolExecutor

    from harness.execution.script import command
    from harness.execution.script_check import check_notes, check_refusal, check_script, check_warning

    firsts: dict[tuple[str, ...], Point] = {}
    for point in plan.points:
        if point.workload.script is not None:
            firsts.setdefault(tuple(command(point)), point)
    if not firsts:
        return
    log.info("checking the script's %d command line(s) up to probe.measure", len(firsts))
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        checked = list(pool.map(check_script, firsts.values()))
    for argv, ended in zip(firsts, checked, strict=True):
        refusal = check_refusal(ended, " ".join(argv[2:]), firsts[argv])
        if refusal is not None:
            raise SpecError(refusal[1], file=str(spec_path), field=refusal[0])
        for note in dict.fromkeys(check_notes(ended)):
            log.info("%s", note)
        if warning := check_warning(ended):
            log.warning("%s: the script's check run (%s): %s", spec_path, " ".join(argv[2:]), warning)


def _open_sweep(path: Path) -> Path:
    from harness.storage.sweep import open_sweep

    try:
        return open_sweep(path)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from e


def _check_sbatch_parameters(plan: Plan) -> None:
    """A throwaway render before anything is written: submitit rejects unknown options."""
    from harness.backends.slurm.backend import SlurmBackend
    from harness.sweeps import check_backend

    check_backend(SlurmBackend(plan.spec), plan, plan.spec.path or plan.spec.name)


# --- the verbs ---------------------------------------------------------------------------------


def cmd_plan(args: argparse.Namespace) -> int:
    from harness.plan_table import plan_text

    plan = _load_plan(args.spec, args.overrides)
    _check_scripts(args.spec, plan)
    print(plan_text(plan, args.overrides, DEFAULT_RESULTS, args.format))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    return _new_sweep(args, args.backend, wait=True, fmt=args.format)


def cmd_submit(args: argparse.Namespace) -> int:
    return _new_sweep(args, "slurm", wait=args.wait, fmt=args.format)


def _new_sweep(args: argparse.Namespace, backend_name: str, *, wait: bool, fmt: str = "terminal") -> int:
    from harness.sweeps import check_backend, make_backend, new_sweep, require_torch_here

    # Before anything is written: a login node without PyTorch, for a backend that runs here.
    require_torch_here(BACKENDS[backend_name], "run")
    plan = _load_plan(args.spec, args.overrides)
    if BACKENDS[backend_name].detached:  # run here, the script's own run says it at once
        _check_scripts(args.spec, plan)
    backend = make_backend(backend_name, plan.spec)
    check_backend(backend, plan, args.spec)
    return new_sweep(plan, backend, args.results, wait=wait, fmt=fmt, wide=args.wide)


def cmd_status(args: argparse.Namespace) -> int:
    from harness.backends.follow import status_report
    from harness.backends.registry import recorded

    sweep_dir = _open_sweep(args.sweep)
    text, done = status_report(sweep_dir, recorded(sweep_dir), args.format, wide=args.wide)
    print(text)
    return EXIT_OK if done else EXIT_FAILED_POINTS


def cmd_resume(args: argparse.Namespace) -> int:
    """Run again the points without complete results and without a live job, and with
    --failed those with failed units (harness.sweeps)."""
    from harness.sweeps import resume_sweep

    return resume_sweep(
        _open_sweep(args.sweep),
        wait=args.wait,
        backend_name=args.backend,
        failed=args.failed,
        wide=args.wide,
        more_repeats=args.more_repeats,
    )


def cmd_sbatch(args: argparse.Namespace) -> int:
    from harness.backends.slurm.sbatch import write_standalone_script

    if args.portable:
        return _portable_sbatch(args)
    plan = _load_plan(args.spec, args.overrides)
    _one_size(args.spec, plan.spec)
    _check_scripts(args.spec, plan)
    _check_sbatch_parameters(plan)
    target, sweep_dir = write_standalone_script(plan, args.results.resolve(), args.output)
    print(f"wrote {target}: {len(plan.points)} point(s) as one array; results in {sweep_dir}")
    print(f"submit it with: sbatch {target}")
    return EXIT_OK


def _one_size(path: Path, spec: Spec) -> None:
    """A standalone script is one array, and an array's tasks share one size (sbatch's
    --nodes, --gres): sizes as an axis are submitted by `harness submit`, an array each."""
    if spec.scale_varies:
        sizes = ", ".join(s.label() for s in spec.scale_axis())
        raise UsageError(
            f"{path}: a standalone script is one job array of one size, and the spec has "
            f"{len(spec.scale_axis())} ({sizes}); use harness submit (an array per size), or "
            "give slurm.nodes, gpus_per_node and tasks_per_node one value each"
        )


def _portable_sbatch(args: argparse.Namespace) -> int:
    """A script that re-reads its spec when the job runs, to keep in git (sbatch/)."""
    from harness.backends.slurm.sbatch import portable_script
    from harness_schema.atomic import atomic_write_text

    if args.overrides:
        # The committed script reads the spec file when it runs: an override would be lost.
        raise UsageError(f"{args.spec}: --portable takes no KEY=VALUE overrides; edit the spec instead")
    _one_size(args.spec, load_spec(args.spec))
    try:
        script, count = portable_script(args.spec)
    except ValueError as e:
        if isinstance(e, SpecError):
            raise
        raise UsageError(f"{args.spec}: {str(e).splitlines()[0]}") from e
    target = args.output / f"{args.spec.stem}.sbatch"
    atomic_write_text(target, script)
    print(f"wrote {target}: {count} point(s) as one array; its sweep is made under results/ when it runs")
    print(f"submit it from the clone's root with: sbatch {target}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from analysis.__main__ import report_main

    return report_main(args)


def cmd_compare(args: argparse.Namespace) -> int:
    from analysis.__main__ import compare_main

    return compare_main(args)


def cmd_make_data(args: argparse.Namespace) -> int:
    from harness.workloads.make_data import make_image_folder, make_image_shards, make_webdataset_shards

    common = dict(images=args.images, classes=args.classes, size=args.size, image_format=args.image_format)
    try:
        if args.webdataset and not args.shards:
            raise ValueError("--webdataset needs --shards N (how many tar files)")
        if args.webdataset:
            total = make_webdataset_shards(args.root, shards=args.shards, **common)
            layout = f"in {args.shards} tar shard(s) (harness.examples.shards_stream)"
        elif args.shards:
            total = make_image_shards(args.root, shards=args.shards, **common)
            layout = f"in {args.shards} shard(s) (dataset: image_shards)"
        else:
            total = make_image_folder(args.root, **common)
            layout = "one file each (dataset: image_folder)"
    except ValueError as e:
        raise UsageError(f"make-data: {e}") from e
    except OSError as e:  # a full, read-only or forbidden disk: the CLI's one line, and what is left
        fault = named(Path(e.filename or args.root), e)
        if not isinstance(fault, CannotWrite):
            raise
        fault.outcome = (
            f"the data set under {args.root} is incomplete: free space, or choose another folder, "
            "and run make-data again"
        )
        raise fault from None
    print(f"{args.images} images, {total / 1e6:.1f} MB, {layout}, in {args.root}")
    return EXIT_OK


def cmd_tune(args: argparse.Namespace) -> int:
    from harness.tune.rounds import TuneError
    from harness.tune.verb import run_tune_verb

    try:
        return run_tune_verb(args, _load_plan)
    except TuneError as e:
        raise UsageError(str(e)) from e


if __name__ == "__main__":
    sys.exit(main())
