"""harness VERB ...: plan, run, submit, status, resume, sbatch, report, compare, make-data.

The verbs only: each parses its arguments and calls the modules that do the work (the plan
table in harness.plan_table, the backends and the wait loop in harness.backends, the report in
analysis). Everything heavy is imported inside the verb that needs it: `harness --help` imports
neither torch nor pandas, and `harness plan` no pandas.

Exit status: 0 all well; 1 some points failed or did not finish (the others completed); 2 bad
input (spec, arguments, overrides), with one line on stderr and nothing run; 3 every point ran
but an expectation of the spec's `expect:` failed (run, submit --wait, report); 130 interrupted
(Ctrl-C): what was measured is kept, and `harness resume SWEEP` goes on.

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

from harness.config.expect import EXIT_EXPECTATION_FAILED
from harness.config.overrides import OVERRIDE_SHAPE
from harness.config.plan import Plan, Point, expand
from harness.config.sbatch_safe import UnsafePath, refuse_unsafe_results
from harness.config.spec import SlurmConfig, Spec, SpecError, load_spec
from harness.extras import MissingExtra
from harness.storage.atomic import CannotWrite
from harness.storage.reading import UnreadableFile

log = logging.getLogger("harness")

EXIT_OK, EXIT_FAILED_POINTS, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_RESULTS = Path(os.environ.get("HARNESS_RESULTS", "results"))
RESULTS_HELP = "results root (default: ./results, or $HARNESS_RESULTS)"
ANALYSIS_VERBS = ("report", "compare")


class UsageError(Exception):
    """Bad input that is not a spec error (a missing folder, an empty plan)."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser(analysis=any(verb in argv for verb in ANALYSIS_VERBS))
    args, rest = parser.parse_known_args(argv)
    # Overrides after an option (`run x.yaml --backend local a=1`) are left over by argparse.
    if rest and hasattr(args, "overrides") and all(OVERRIDE_SHAPE.fullmatch(r) for r in rest):
        args.overrides += rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    _setup_logging(args.verbose)
    try:
        refuse_unsafe_results(getattr(args, "results", None))
        return int(args.func(args))
    except (SpecError, UsageError, MissingExtra, UnsafePath) as e:
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UnreadableFile as e:  # a sweep's file torn, unreadable or of another version
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_FAILED_POINTS
    except CannotWrite as e:  # a full, read-only or forbidden disk: one line, what is kept
        from harness.storage.sweep import kept_line

        left = kept_line(e.path) or e.outcome
        print(f"harness: {e}{'; ' + left if left else ''}", file=sys.stderr)
        return EXIT_FAILED_POINTS
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
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
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging (tracebacks of failed points)"
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    _add_here_verbs(verbs)
    _add_slurm_verbs(verbs)
    _add_analysis_verbs(verbs, analysis)
    _add_data_verb(verbs)
    _add_tune_verb(verbs)
    return parser


Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_here_verbs(verbs: Verbs) -> None:
    plan = verbs.add_parser("plan", help="print the expanded points of a spec; run nothing")
    plan.add_argument("spec", type=Path)
    _add_overrides(plan)
    plan.set_defaults(func=cmd_plan)

    run = verbs.add_parser(
        "run", help="run every point here (inline, or local subprocesses) and print the table"
    )
    run.add_argument("spec", type=Path)
    _add_overrides(run)
    run.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    run.add_argument(
        "--backend",
        choices=["inline", "local"],
        default="inline",
        help="inline: in this process (default); local: slurm.tasks_per_node subprocesses per point",
    )
    run.add_argument("--format", choices=["terminal", "markdown", "latex", "csv"], default="terminal")
    run.set_defaults(func=cmd_run)


def _add_slurm_verbs(verbs: Verbs) -> None:
    wait_help = "follow the jobs to their end, then print the table"
    submit = verbs.add_parser("submit", help="submit the sweep to Slurm as one job array")
    submit.add_argument("spec", type=Path)
    _add_overrides(submit)
    submit.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    submit.add_argument("--wait", action="store_true", help=wait_help)
    submit.set_defaults(func=cmd_submit)

    status = verbs.add_parser("status", help="where each point of a sweep stands (sacct and results)")
    status.add_argument("sweep", type=Path)
    status.set_defaults(func=cmd_status)

    resume = verbs.add_parser(
        "resume",
        help="run again only the points without complete results and without a live job "
        "(resubmitted to Slurm, or run here for an inline or local sweep)",
    )
    resume.add_argument("sweep", type=Path)
    resume.add_argument("--wait", action="store_true", help=wait_help + " (Slurm sweeps)")
    resume.add_argument(
        "--failed",
        action="store_true",
        help="also run again the points with failed units (their failed rows kept aside, "
        "in rank<k>.csv.failed-<time>)",
    )
    resume.set_defaults(func=cmd_resume)

    sbatch = verbs.add_parser("sbatch", help="write a standalone sbatch script for the sweep")
    sbatch.add_argument("spec", type=Path)
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
    data.add_argument("root", type=Path)
    data.add_argument("--images", type=int, default=1000)
    data.add_argument("--classes", type=int, default=10)
    data.add_argument("--size", type=int, default=256, help="image side in pixels (default 256)")
    data.add_argument("--image-format", choices=["jpg", "png"], default="jpg")
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
        help="the grid's answer from a profile, a model and a few confirmations (harness/tuning.py)",
    )
    tune.add_argument("spec", type=Path, help="a spec with a loader grid; with --what-if, a tune's sweep")
    _add_overrides(tune)
    tune.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    tune.add_argument(
        "--backend",
        choices=["inline", "local", "slurm"],
        default="inline",
        help="slurm: a job array per round, followed from here to its end (as submit --wait)",
    )
    tune.add_argument("--repeats", type=int, default=3, help="runs of each confirmed point (at least 3)")
    tune.add_argument("--budget", type=int, default=None, help="the most point-runs the confirmations spend")
    tune.add_argument(
        "--what-if",
        metavar="gpus=G,cores=C",
        help="predict the workers per rank on a node of G GPUs and C cores from a tune's sweep",
    )
    tune.set_defaults(func=cmd_tune)


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
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
    from concurrent.futures import ThreadPoolExecutor

    from harness.execution.script import check_refusal, check_script, check_warning, command

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
        refusal = check_refusal(ended, " ".join(argv[2:]))
        if refusal is not None:
            raise SpecError(refusal[1], file=str(spec_path), field=refusal[0])
        if warning := check_warning(ended):
            log.warning("%s: the script's check run (%s): %s", spec_path, " ".join(argv[2:]), warning)


def _job_name(plan: Plan) -> str:
    from harness.backends.slurm import job_name

    return job_name(plan.spec.name)


def _open_sweep(path: Path) -> Path:
    from harness.storage.sweep import open_sweep

    try:
        return open_sweep(path)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from e


def _check_sbatch_parameters(plan: Plan) -> None:
    """A throwaway render before anything is submitted: submitit rejects unknown options."""
    from harness.backends.slurm import render_sbatch

    try:
        render_sbatch(plan.spec.slurm, _job_name(plan), Path("/tmp/check/%j"), "true", len(plan.points))
    except ValueError as e:
        raise UsageError(f"{plan.spec.path}: slurm: {str(e).splitlines()[0]}") from e


def _finish(sweep_dir: Path, fmt: str = "terminal") -> int:
    """Print the tables; the exit status says whether some points failed or did not finish,
    else whether an expectation of the spec failed."""
    from analysis.report import build_report
    from harness.backends.status import sweep_status

    report = build_report([sweep_dir], fmt)
    print(report.text)
    print(f"\nresults: {sweep_dir}")
    statuses = sweep_status(sweep_dir, states={})
    bad = [s for s in statuses if s.failed_units or not s.complete]
    if bad:
        print(
            f"harness: {len(bad)} of {len(statuses)} point(s) failed or did not finish; "
            f"see the rows' error column, or: harness status {sweep_dir}",
            file=sys.stderr,
        )
        return EXIT_FAILED_POINTS
    if report.expectations_failed:
        print(f"harness: {report.expectations_failed} expectation(s) not met", file=sys.stderr)
        return EXIT_EXPECTATION_FAILED
    return EXIT_OK


def _wait_and_finish(sweep_dir: Path, spec: Spec) -> int:
    """Follow the sweep's jobs to their end, then print the tables. With repeats: auto, submit
    a follow-up array of the points still undecided and follow it, round after round, until
    every point is decided or has spent its budget (harness/backends/adaptive.py)."""
    from harness.backends.adaptive import next_round, raise_repeats
    from harness.backends.follow import wait_for_sweep

    wait_for_sweep(sweep_dir)
    while spec.measure.adaptive and (step := next_round(sweep_dir)):
        print(step.line())
        _submit_again(raise_repeats(sweep_dir, step), sweep_dir, spec)
        wait_for_sweep(sweep_dir)
    return _finish(sweep_dir)


# --- the verbs ---------------------------------------------------------------------------------


def cmd_plan(args: argparse.Namespace) -> int:
    from harness.backends.slurm import job_folder, render_sbatch, submitit_command
    from harness.plan_table import plan_table

    plan = _load_plan(args.spec, args.overrides)
    _check_scripts(args.spec, plan)
    print(plan_table(plan))
    for note in plan.notes:
        print(f"note: {note}")
    if args.overrides:
        print(f"overrides: {' '.join(args.overrides)}")
    for expectation in plan.spec.expect:
        print(f"expect: {expectation.label()}")
    sweep_dir = DEFAULT_RESULTS.resolve() / plan.spec.name / "<sweep id>"
    folder = job_folder(sweep_dir)
    script = render_sbatch(
        plan.spec.slurm, _job_name(plan), folder, submitit_command(folder), len(plan.points)
    )
    print(f"\nsbatch script that `harness submit` sends (one array task per point):\n\n{script}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from harness.extras import require_run_extra
    from harness.storage.sweep import create_sweep  # torch is imported only to run

    require_run_extra("run")  # before anything is written: a login node without PyTorch
    plan = _load_plan(args.spec, args.overrides)
    world = 1
    if args.backend == "local":
        _check_local_backend(args.spec, plan)
        world = plan.spec.slurm.tasks_per_node
    sweep_dir = create_sweep(plan, args.results, backend=args.backend, world_size=world)
    log.info("sweep %s: %d point(s), results in %s", plan.spec.name, len(plan.points), sweep_dir)
    if not _run_here(args.backend, plan.points, sweep_dir, plan.spec.slurm):
        return EXIT_INTERRUPTED
    if plan.spec.measure.adaptive and not _adapt_here(args.backend, sweep_dir, plan.spec.slurm):
        return EXIT_INTERRUPTED
    return _finish(sweep_dir, args.format)


def _adapt_here(backend: str, sweep_dir: Path, cfg: SlurmConfig) -> bool:
    """repeats: auto, here: rounds of more repeats for the points still undecided."""
    from harness.backends.adaptive import measure_here

    return measure_here(sweep_dir, lambda points: _run_here(backend, points, sweep_dir, cfg))


def _check_local_backend(spec_path: Path, plan: Plan) -> None:
    """The local backend's refusals (one node only; GPUs asked for and not there), before
    anything is written."""
    from harness.backends.local import LocalBackendError, local_gpus

    try:
        local_gpus(plan.points, plan.spec.slurm)
    except LocalBackendError as e:
        raise UsageError(f"{spec_path}: {e}") from e


def _run_here(backend: str, points: Sequence[Point], sweep_dir: Path, cfg: SlurmConfig) -> bool:
    """Run the points in this process (inline) or its subprocesses (local); False when
    interrupted (Ctrl-C), after saying how to go on: the units measured so far are kept."""
    from harness.storage.sweep import owned

    try:
        with owned(sweep_dir):
            if backend == "local":
                from harness.backends.local import run_local

                run_local(points, sweep_dir, cfg)
            else:
                from harness.backends.inline import run_inline

                run_inline(points, sweep_dir)
    except KeyboardInterrupt:
        print(
            f"harness: interrupted; what was measured is kept; go on with: harness resume {sweep_dir}",
            file=sys.stderr,
        )
        return False
    return True


def cmd_submit(args: argparse.Namespace) -> int:
    from harness.backends.slurm import SubmissionError, submit_array
    from harness.storage.sweep import create_sweep

    plan = _load_plan(args.spec, args.overrides)
    _check_scripts(args.spec, plan)
    _check_sbatch_parameters(plan)
    sweep_dir = create_sweep(plan, args.results, backend="slurm", world_size=plan.spec.slurm.world_size)
    try:
        job_ids = submit_array(list(plan.points), sweep_dir, plan.spec.slurm, _job_name(plan))
    except SubmissionError as e:
        raise UsageError(str(e)) from e
    if len(job_ids) == 1:
        print(f"submitted 1 point as job {job_ids[0]}")  # submitit sends a single job, not an array
    else:
        array = job_ids[0].split("_")[0]
        print(f"submitted {len(job_ids)} point(s) as job array {array} ({job_ids[0]} .. {job_ids[-1]})")
    print(f"sweep: {sweep_dir}")
    if args.wait:
        return _wait_and_finish(sweep_dir, plan.spec)
    print(f"follow it with: harness status {sweep_dir}")
    if plan.spec.measure.adaptive:
        print(
            f"repeats: auto: once these jobs end, harness resume {sweep_dir} submits the points still "
            "undecided again (or submit with --wait, which does it)"
        )
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from harness.backends.follow import counts, status_table
    from harness.backends.status import advice, sweep_status
    from harness.storage.sweep import load_info

    sweep_dir = _open_sweep(args.sweep)
    statuses = sweep_status(sweep_dir)
    print(status_table(statuses))
    print(f"\n{counts(statuses)}")
    for line in advice(statuses, sweep_dir, load_info(sweep_dir).backend):
        print(line)
    done = all(st.complete and not st.failed_units for st in statuses)
    if all(st.complete for st in statuses) and _adaptive(sweep_dir):
        from harness.backends.adaptive import next_round

        step = next_round(sweep_dir)
        print(step.line(doing="to measure again"))
        if step:
            print(f"measure them again: harness resume {sweep_dir}")
    return EXIT_OK if done else EXIT_FAILED_POINTS


def cmd_resume(args: argparse.Namespace) -> int:
    """Run again the points without complete results and without a live job, as `status`
    advises: resubmitted for a Slurm sweep, run here for an inline or local one."""
    from harness.backends.follow import counts, wait_for_orphaned_jobs
    from harness.backends.status import SCHEDULED, sweep_status, to_resume
    from harness.config.spec import parse_spec
    from harness.storage.reading import read_sweep_spec
    from harness.storage.sweep import load_info

    sweep_dir = _open_sweep(args.sweep)
    backend = load_info(sweep_dir).backend
    spec = parse_spec(read_sweep_spec(sweep_dir), file=str(sweep_dir / "spec.yaml"))
    statuses = sweep_status(sweep_dir)
    if backend not in SCHEDULED:
        statuses = wait_for_orphaned_jobs(statuses, sweep_dir)
    active = [st for st in statuses if st.active]
    todo, moved = to_resume(statuses, sweep_dir, failed=args.failed)
    for line in moved:
        print(line)
    if active:
        print(f"{len(active)} point(s) with a live job ({counts(active)}): left alone")
    if not todo and not active and spec.measure.adaptive:
        return _resume_adaptive(sweep_dir, backend, spec, args.wait)
    if not todo:
        print("nothing to resume: every other point has complete results")
        if args.wait and active and backend in SCHEDULED:
            return _wait_and_finish(sweep_dir, spec)
        return EXIT_OK
    if backend not in SCHEDULED:
        print(f"running the {len(todo)} point(s) without complete results here ({backend})")
        if not _run_here(backend, todo, sweep_dir, spec.slurm):
            return EXIT_INTERRUPTED
        if spec.measure.adaptive and not _adapt_here(backend, sweep_dir, spec.slurm):
            return EXIT_INTERRUPTED  # an interrupted round goes on where it stopped
        return _finish(sweep_dir)
    return _resubmit(todo, sweep_dir, spec, args.wait)


def _resubmit(todo: Sequence[Point], sweep_dir: Path, spec: Spec, wait: bool) -> int:
    _submit_again(todo, sweep_dir, spec)
    if wait:
        return _wait_and_finish(sweep_dir, spec)
    return EXIT_OK


def _submit_again(todo: Sequence[Point], sweep_dir: Path, spec: Spec) -> None:
    """The points as one more job array of the sweep (each job measures what its point lacks)."""
    from harness.backends.slurm import SubmissionError, job_name, submit_array

    try:
        job_ids = submit_array(todo, sweep_dir, spec.slurm, job_name(spec.name))
    except SubmissionError as e:
        raise UsageError(str(e)) from e
    ids = ", ".join(p.id for p in todo)
    print(f"resubmitted {len(todo)} point(s) ({ids}) as jobs {job_ids[0]} .. {job_ids[-1]}")


def _resume_adaptive(sweep_dir: Path, backend: str, spec: Spec, wait: bool) -> int:
    """Every point has its results: with repeats: auto, the next round of more repeats for the
    points still undecided (run here, or a follow-up array on Slurm)."""
    from harness.backends.adaptive import next_round, raise_repeats
    from harness.backends.status import SCHEDULED

    step = next_round(sweep_dir)
    print(step.line())
    if not step:
        print("nothing to resume: every point has complete results")
        return EXIT_OK
    if backend not in SCHEDULED:
        if not _adapt_here(backend, sweep_dir, spec.slurm):
            return EXIT_INTERRUPTED
        return _finish(sweep_dir)
    return _resubmit(raise_repeats(sweep_dir, step), sweep_dir, spec, wait)


def _adaptive(sweep_dir: Path) -> bool:
    from harness.storage.sweep import load_points

    return any(p.measure.adaptive for p in load_points(sweep_dir))


def cmd_sbatch(args: argparse.Namespace) -> int:
    from harness.backends.slurm import render_sbatch, standalone_folder, worker_command
    from harness.storage.atomic import atomic_write_text
    from harness.storage.sweep import create_sweep

    if args.portable:
        return _portable_sbatch(args)
    plan = _load_plan(args.spec, args.overrides)
    _check_scripts(args.spec, plan)
    _check_sbatch_parameters(plan)
    sweep_dir = create_sweep(
        plan, args.results.resolve(), backend="sbatch", world_size=plan.spec.slurm.world_size
    )
    folder = standalone_folder(sweep_dir)
    folder.mkdir()
    script = render_sbatch(
        plan.spec.slurm, _job_name(plan), folder, worker_command(sweep_dir), len(plan.points)
    )
    target = args.output / f"{plan.spec.name}-{sweep_dir.name}.sbatch"
    atomic_write_text(target, script)
    print(f"wrote {target}: {len(plan.points)} point(s) as one array; results in {sweep_dir}")
    print(f"submit it with: sbatch {target}")
    return EXIT_OK


def _portable_sbatch(args: argparse.Namespace) -> int:
    """A script that re-reads its spec when the job runs, to keep in git (sbatch/)."""
    from harness.backends.slurm import portable_script
    from harness.storage.atomic import atomic_write_text

    if args.overrides:
        # The committed script reads the spec file when it runs: an override would be lost.
        raise UsageError(f"{args.spec}: --portable takes no KEY=VALUE overrides; edit the spec instead")
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
    print(f"{args.images} images, {total / 1e6:.1f} MB, {layout}, in {args.root}")
    return EXIT_OK


def cmd_tune(args: argparse.Namespace) -> int:
    from harness.tuning import TuneError, run_tune_verb

    try:
        return run_tune_verb(args, _load_plan, _check_sbatch_parameters)
    except TuneError as e:
        raise UsageError(str(e)) from e


if __name__ == "__main__":
    sys.exit(main())
