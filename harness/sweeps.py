"""The policies that run a sweep's points, each written once against the Backend protocol
(harness/backends/base.py): `harness run` and `submit` (a new sweep), `harness resume` (the
points without complete results), the adaptive rounds of `measure.repeats: auto`, and the
end of a sweep (its tables and exit status). The CLI (harness/cli.py) parses and calls these;
`harness tune` runs its rounds through the same backends (harness/tune/driver.py).

Every verb that runs points takes the sweep's lock first (harness/storage/lock.py), before it
reads what is done: two resumes of one sweep never measure the same units side by side.

A backend that runs here (inline, local) always waits for its points; one that submits to a
scheduler (slurm) waits only when asked (`submit --wait`, `run --backend slurm`,
`resume --wait`). Interrupted (Ctrl-C) while points run here, the sweep keeps what was
measured and the line says how to go on.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.backends.base import Backend, BackendRefusal
from harness.backends.registry import BACKENDS, backend_of_sweep
from harness.config.plan import Plan, Point
from harness.config.spec import Spec
from harness.exits import (
    EXIT_EXPECTATION_FAILED,
    EXIT_FAILED_POINTS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    interrupted,
)

log = logging.getLogger(__name__)

Announce = Callable[[Sequence[str]], None]


def make_backend(name: str, spec: Spec) -> Backend:
    return BACKENDS[name](spec)


def check_backend(backend: Backend, plan: Plan, where: Path | str) -> None:
    """The backend's up-front refusals as bad input, before anything is written: one line
    that starts with `where` (the spec's path, or the sweep's)."""
    try:
        backend.check(plan)
    except BackendRefusal as e:
        raise UsageError(f"{where}: {e}") from e


def require_torch_here(backend: Backend | type[Backend], verb: str) -> None:
    """A backend that runs here needs PyTorch here: said before anything is written (a login
    node); a scheduler's jobs need it on the compute nodes only."""
    if backend.here:
        from harness.extras import require_run_extra

        require_run_extra(verb)


@contextmanager
def _submission() -> Iterator[None]:
    """sbatch's refusal as one line of bad input."""
    from harness.backends.slurm.backend import SubmissionError

    try:
        yield
    except SubmissionError as e:
        raise UsageError(str(e)) from e


# --- a new sweep: run, submit ------------------------------------------------------------------


def new_sweep(plan: Plan, backend: Backend, results: Path, *, wait: bool, fmt: str = "terminal") -> int:
    """`harness run` (`wait`) and `harness submit`: make the sweep folder, measure or submit
    its points, and with `wait` print the tables."""
    from harness.storage.lock import sweep_lock
    from harness.storage.sweep import create_sweep

    sweep_dir = create_sweep(plan, results, backend=backend.name, world_size=backend.world_size(plan))
    with sweep_lock(sweep_dir, "harness run" if wait else "harness submit"):
        if backend.here:
            log.info("sweep %s: %d point(s), results in %s", plan.spec.name, len(plan.points), sweep_dir)
        announce = _first_submission(sweep_dir)
        if not wait and not backend.here:
            with _submission():
                announce(backend.submit(plan.points, sweep_dir))
            _after_submission(sweep_dir, plan.spec)
            return EXIT_OK
        if not measure(backend, plan.points, sweep_dir, announce):
            return EXIT_INTERRUPTED
        if plan.spec.measure.adaptive and not adapt(backend, sweep_dir):
            return EXIT_INTERRUPTED
        return finish(sweep_dir, fmt)


def _first_submission(sweep_dir: Path) -> Announce:
    def announce(job_ids: Sequence[str]) -> None:
        if len(job_ids) == 1:
            print(f"submitted 1 point as job {job_ids[0]}")  # submitit sends a single job, not an array
        else:
            array = job_ids[0].split("_")[0]
            print(f"submitted {len(job_ids)} point(s) as job array {array} ({job_ids[0]} .. {job_ids[-1]})")
        print(f"sweep: {sweep_dir}")

    return announce


def _after_submission(sweep_dir: Path, spec: Spec) -> None:
    print(f"follow it with: harness status {sweep_dir}")
    if spec.measure.adaptive:
        print(
            f"repeats: auto: once these jobs end, harness resume {sweep_dir} submits the points still "
            "undecided again (or submit with --wait, which does it)"
        )


def _resubmission(points: Sequence[Point]) -> Announce:
    def announce(job_ids: Sequence[str]) -> None:
        ids = ", ".join(p.id for p in points)
        print(f"resubmitted {len(points)} point(s) ({ids}) as jobs {job_ids[0]} .. {job_ids[-1]}")

    return announce


# --- measuring points, and the adaptive rounds -----------------------------------------------


def measure(backend: Backend, points: Sequence[Point], sweep_dir: Path, announce: Announce) -> bool:
    """Measure the points and wait for them; False when interrupted (Ctrl-C) while they ran
    here, after saying how to go on: the units measured so far are kept."""
    try:
        with _submission():
            run_points(backend, points, sweep_dir, announce)
    except KeyboardInterrupt as e:
        if not backend.here:
            raise  # the scheduler's jobs go on; the CLI says "interrupted"
        print(
            f"harness: {interrupted(e)}; what was measured is kept; go on with: harness resume {sweep_dir}",
            file=sys.stderr,
        )
        return False
    return True


def run_points(
    backend: Backend, points: Sequence[Point], sweep_dir: Path, announce: Announce | None = None
) -> None:
    """Measure the units each point lacks. Here (inline, local: the points share this machine,
    one after the other), in passes of one repeat of each point (ABC ABC, not AAA BBB): a slow
    spell of the machine then lands on every configuration compared, not on all repeats of
    one, and the rows' `started_at` records the order. A scheduler's array runs its tasks
    side by side, each point's repeats back to back (one job a point): handed over whole."""
    if not backend.here:
        backend.run(points, sweep_dir, announce=announce or _quiet)
        return
    from harness.storage.sweep import owned

    # owner.json names this process for `status` across every pass, not pass by pass.
    with owned(sweep_dir):
        _run_passes(backend, points, sweep_dir, announce)


def _run_passes(
    backend: Backend, points: Sequence[Point], sweep_dir: Path, announce: Announce | None
) -> None:
    batches = _numbered(points, sweep_dir)
    whole = {p.id: p for p in points}
    failing: list[Point] = []  # every unit failed in the last pass: the rest at once, next pass
    given_up: set[str] = set()
    for k, batch in enumerate(batches, 1):
        given_up |= {p.id for p in failing}
        batch = [p for p in batch if p.id not in given_up]
        if len(batches) > 1:
            log.info("pass %d/%d: one repeat of %d point(s)", k, len(batches), len(batch))
        backend.run([*batch, *failing], sweep_dir, announce=announce or _quiet)
        failing = [whole[p.id] for p in batch if _failed_wholly(sweep_dir, p)]
        # Their other repeats, if any: a point with no unit left is not run again for nothing
        # (its progress line twice, under the local backend a job started for nothing).
        left = lacking(failing, sweep_dir)
        failing = [p for p in failing if p.id in left]
    if failing:
        backend.run(failing, sweep_dir, announce=announce or _quiet)


def _numbered(points: Sequence[Point], sweep_dir: Path) -> list[list[Point]]:
    """The passes of what the points lack (adaptive.passes), each point marked with its pass
    (RunPass): numbered on from the sweep's last pass, so that rows with the same run_pass
    were measured side by side, whichever run of the sweep measured them."""
    from dataclasses import replace

    from harness.backends.adaptive import passes
    from harness.config.plan import RunPass

    batches = passes(points, lacking(points, sweep_dir))
    first = next_pass(sweep_dir)
    repeats = {p.id: p.measure.repeats for p in points}
    return [
        [
            replace(p, run_pass=RunPass(number=first + k, k=k + 1, of=len(batches), repeats=repeats[p.id]))
            for p in batch
        ]
        for k, batch in enumerate(batches)
    ]


def next_pass(sweep_dir: Path) -> int:
    """The number of the sweep's next pass: one past the highest run_pass of its rows."""
    from harness.storage.sweep import load_info, load_points
    from harness_schema import layout
    from harness_schema.reading import read_point

    world_size = load_info(sweep_dir).world_size
    done = [
        read_point(layout.point_dir(sweep_dir, p.id), world_size).last_pass for p in load_points(sweep_dir)
    ]
    return max(done, default=-1) + 1


def _failed_wholly(sweep_dir: Path, point: Point) -> bool:
    """Every unit of the point so far has a failed row (a workload that does not build, no
    device): a point run again per pass would fail as many times."""
    from harness.storage.sweep import load_info
    from harness_schema import layout
    from harness_schema.reading import read_point

    rows = read_point(layout.point_dir(sweep_dir, point.id), load_info(sweep_dir).world_size)
    return bool(rows.units) and rows.failed == rows.units


def lacking(points: Sequence[Point], sweep_dir: Path) -> dict[str, list[int]]:
    """Point id -> the repeat numbers of which some unit (rung, repeat) has no row on every
    rank yet: what a run of the point measures (an interrupted pass, resumed, measures each
    missing unit once)."""
    from harness.storage.sweep import load_info
    from harness_schema import layout
    from harness_schema.reading import read_point

    world_size = load_info(sweep_dir).world_size
    out = {}
    for p in points:
        done = read_point(layout.point_dir(sweep_dir, p.id), world_size).units
        missing = sorted({r for r in range(p.measure.repeats) for rung in p.rungs if (rung, r) not in done})
        if missing:
            out[p.id] = missing
    return out


def adapt(backend: Backend, sweep_dir: Path) -> bool:
    """repeats: auto: rounds of more repeats for the points still undecided, until each is
    decided or its budget is spent (harness/backends/adaptive.py); False when interrupted.

    Here, a round is passes of one more repeat of each point (ABC ABC: a slow spell of the
    machine lands on several points); on a scheduler, one follow-up array per round (each
    array waits in the queue)."""
    from harness.backends.adaptive import measure_here, next_round, raise_repeats

    if backend.here:
        return measure_here(sweep_dir, lambda points: measure(backend, points, sweep_dir, _quiet))
    while step := next_round(sweep_dir):
        print(step.line())
        points = raise_repeats(sweep_dir, step)
        if not measure(backend, points, sweep_dir, _resubmission(points)):
            return False
    return True


def _quiet(job_ids: Sequence[str]) -> None:
    """A backend that runs here submits nothing to announce."""


def finish(sweep_dir: Path, fmt: str = "terminal") -> int:
    """Print the tables; the exit status says whether some points failed or did not finish,
    else whether an expectation of the spec failed."""
    from analysis.render.report import build_report
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


def _follow_and_finish(backend: Backend, sweep_dir: Path, spec: Spec) -> int:
    """Follow a scheduler's live jobs of the sweep to their end, then the adaptive rounds and
    the tables."""
    from harness.backends.follow import wait_for_sweep
    from harness.backends.registry import recorded

    wait_for_sweep(sweep_dir, recorded(sweep_dir))
    if spec.measure.adaptive and not adapt(backend, sweep_dir):
        return EXIT_INTERRUPTED
    return finish(sweep_dir)


# --- resume ------------------------------------------------------------------------------------


def resume_sweep(
    sweep_dir: Path, *, wait: bool, backend_name: str | None = None, failed: bool = False
) -> int:
    """Run again the points without complete results and without a live job, as `status`
    advises, and with `failed` those with failed units (their failed rows set aside): on the
    sweep's own backend (resubmitted to Slurm, run here for an inline or local sweep), or on
    `backend_name` where it runs points with the same ranks here."""
    from harness.storage.lock import sweep_lock

    spec, backend, plan = _resume_backend(sweep_dir, backend_name)
    require_torch_here(backend, "resume")
    check_backend(backend, plan, sweep_dir)
    with sweep_lock(sweep_dir, "harness resume"):
        return _resume_locked(sweep_dir, spec, backend, wait=wait or backend.here, failed=failed)


def _resume_backend(sweep_dir: Path, name: str | None) -> tuple[Spec, Backend, Plan]:
    """The sweep's spec, the backend that resumes it, and its points as a plan. Another
    backend than the sweep's own is taken where it runs the same ranks here (inline and
    local with one task): the rows of one sweep come from points run alike."""
    from harness.config.spec import parse_spec
    from harness.storage.sweep import load_info, load_points
    from harness_schema.reading import read_sweep_spec

    info = load_info(sweep_dir)
    spec = parse_spec(read_sweep_spec(sweep_dir), file=str(sweep_dir / "spec.yaml"))
    recorded = backend_of_sweep(info.backend, spec)
    # Another name of the same backend (slurm, for the sweep of a standalone script) is its own.
    backend = recorded if name is None or BACKENDS[name] is type(recorded) else make_backend(name, spec)
    plan = Plan(spec=spec, points=tuple(load_points(sweep_dir)))
    if backend is not recorded and not (
        backend.here and recorded.here and backend.world_size(plan) == info.world_size
    ):
        raise UsageError(
            f"{sweep_dir}: its points ran on {info.backend} with {info.world_size} rank(s) each; "
            f"--backend {name} runs {backend.world_size(plan)} rank(s) "
            f"{'here' if backend.here else 'as Slurm jobs'}: resume it with --backend {info.backend}"
        )
    return spec, backend, plan


def _resume_locked(sweep_dir: Path, spec: Spec, backend: Backend, *, wait: bool, failed: bool) -> int:
    from harness.backends.follow import counts, wait_for_orphaned_jobs
    from harness.backends.registry import recorded
    from harness.backends.status import scheduler_view, sweep_status, to_resume

    statuses = sweep_status(sweep_dir, scheduler_view(sweep_dir, recorded(sweep_dir)))
    if backend.here:
        statuses = wait_for_orphaned_jobs(statuses, sweep_dir, recorded(sweep_dir))
    active = [st for st in statuses if st.active]
    todo, moved = to_resume(statuses, sweep_dir, failed=failed)
    for line in moved:
        print(line)
    if active:
        print(f"{len(active)} point(s) with a live job ({counts(active)}): left alone")
    if not todo and not active and spec.measure.adaptive:
        return _resume_adaptive(sweep_dir, spec, backend, wait)
    if not todo:
        print("nothing to resume: every other point has complete results")
        if wait and active and not backend.here:
            return _follow_and_finish(backend, sweep_dir, spec)
        return EXIT_OK
    if backend.here:
        print(f"running the {len(todo)} point(s) without complete results here ({backend.name})")
    return _measure_again(todo, sweep_dir, spec, backend, wait)


def _measure_again(todo: Sequence[Point], sweep_dir: Path, spec: Spec, backend: Backend, wait: bool) -> int:
    """The points measured again (each measures what it lacks): waited for, with the adaptive
    rounds and the tables, or only submitted."""
    announce = _resubmission(todo)
    if not wait:
        with _submission():
            announce(backend.submit(todo, sweep_dir))
        return EXIT_OK
    if not measure(backend, todo, sweep_dir, announce):
        return EXIT_INTERRUPTED
    if spec.measure.adaptive and not adapt(backend, sweep_dir):
        return EXIT_INTERRUPTED  # an interrupted round goes on where it stopped
    return finish(sweep_dir)


def _resume_adaptive(sweep_dir: Path, spec: Spec, backend: Backend, wait: bool) -> int:
    """Every point has its results: with repeats: auto, the next round of more repeats for the
    points still undecided (run here, or a follow-up array on Slurm)."""
    from harness.backends.adaptive import next_round, raise_repeats

    step = next_round(sweep_dir)
    print(step.line())
    if not step:
        print("nothing to resume: every point has complete results")
        return EXIT_OK
    if backend.here:
        if not adapt(backend, sweep_dir):
            return EXIT_INTERRUPTED
        return finish(sweep_dir)
    return _measure_again(raise_repeats(sweep_dir, step), sweep_dir, spec, backend, wait)
