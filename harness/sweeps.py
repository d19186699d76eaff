"""The policies that run a sweep's points, each written once against the Backend protocol
(harness/backends/base.py): `harness run` and `submit` (a new sweep), `harness resume` (the
points without complete results), the adaptive rounds of `measure.repeats: auto`, and the
end of a sweep (its tables and exit status). The CLI (harness/cli.py) parses and calls these;
`harness tune` runs its rounds through the same backends (harness/tune/driver.py).

Every verb that runs points takes the sweep's lock first (harness/storage/lock.py), before it
reads what is done: two resumes of one sweep never measure the same units side by side.

Each policy submits points to the backend and waits on the handle its `submit` returns
(harness/backends/base.py, Jobs): points run here (inline, local) run when waited on, so they
are always waited for; a scheduler's jobs (slurm) go on alone, and are waited for only when
asked (`submit --wait`, `run --backend slurm`, `resume --wait`). The policies never ask where
the points run: the backend and its handle answer what they need. Interrupted (Ctrl-C) while
points run here, the sweep keeps what was measured and the line says how to go on.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.backends.base import Backend, BackendRefusal, Jobs
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
    """What this machine needs to run the backend's points (PyTorch, for a backend that runs
    them here), said before anything is written (a login node)."""
    backend.check_machine(verb)


@contextmanager
def _submission() -> Iterator[None]:
    """sbatch's refusal as one line of bad input."""
    from harness.backends.slurm.backend import SubmissionError

    try:
        yield
    except SubmissionError as e:
        raise UsageError(str(e)) from e


# --- a new sweep: run, submit ------------------------------------------------------------------


def new_sweep(
    plan: Plan, backend: Backend, results: Path, *, wait: bool, fmt: str = "terminal", wide: bool = False
) -> int:
    """`harness run` (`wait`) and `harness submit`: make the sweep folder, measure or submit
    its points, and with `wait` (or where its jobs do not go on alone) print the tables (every
    column with `wide`)."""
    from harness.storage.lock import sweep_lock
    from harness.storage.sweep import create_sweep

    sweep_dir = create_sweep(
        plan,
        results,
        backend=backend.name,
        world_size=backend.world_size(plan),
        world_sizes={p.id: backend.ranks(p) for p in plan.points},
    )
    with sweep_lock(sweep_dir, "harness run" if wait else "harness submit"):

        def said() -> None:  # nothing queued to announce: where the results go
            log.info("sweep %s: %d point(s), results in %s", plan.spec.name, len(plan.points), sweep_dir)

        with _submission():
            jobs = start(backend, plan.points, sweep_dir, _first_submission(sweep_dir), said)
        if not wait and jobs.detached:
            _after_submission(sweep_dir, plan.spec)
            return EXIT_OK
        if not waited(jobs, sweep_dir):
            return EXIT_INTERRUPTED
        if plan.spec.measure.follows_up and not adapt(backend, sweep_dir):
            return EXIT_INTERRUPTED
        return finish(sweep_dir, fmt, wide)


def _first_submission(sweep_dir: Path) -> Announce:
    def announce(job_ids: Sequence[str]) -> None:
        if len(job_ids) == 1:
            print(f"submitted 1 point as job {job_ids[0]}")  # submitit sends a single job, not an array
        elif len(arrays := dict.fromkeys(j.split("_")[0] for j in job_ids)) > 1:  # one per size
            each = ", ".join(f"{a} ({sum(j.split('_')[0] == a for j in job_ids)})" for a in arrays)
            print(
                f"submitted {len(job_ids)} point(s) as {len(arrays)} job arrays, one per size, each "
                f"after the one before: {each}"
            )
        else:
            array = job_ids[0].split("_")[0]
            print(f"submitted {len(job_ids)} point(s) as job array {array} ({job_ids[0]} .. {job_ids[-1]})")
        print(f"sweep: {sweep_dir}")

    return announce


def _after_submission(sweep_dir: Path, spec: Spec) -> None:
    print(f"follow it with: harness status {sweep_dir}")
    if spec.measure.follows_up:
        which = "points" if spec.measure.adaptive else "contenders of the best"
        name = "repeats: auto" if spec.measure.adaptive else "decide"
        print(
            f"{name}: once these jobs end, harness resume {sweep_dir} submits the {which} still "
            "undecided again (or submit with --wait, which does it)"
        )


def _resubmission(points: Sequence[Point]) -> Announce:
    def announce(job_ids: Sequence[str]) -> None:
        ids = ", ".join(p.id for p in points)
        print(f"resubmitted {len(points)} point(s) ({ids}) as jobs {job_ids[0]} .. {job_ids[-1]}")

    return announce


# --- measuring points, and the adaptive rounds -----------------------------------------------


def start(
    backend: Backend,
    points: Sequence[Point],
    sweep_dir: Path,
    announce: Announce | None = None,
    said: Callable[[], None] | None = None,
) -> Jobs:
    """Submit the points; `announce` the job ids a scheduler queued, or, where nothing was
    queued (the points run here, when waited on), say `said`'s line."""
    jobs = backend.submit(points, sweep_dir)
    if jobs.ids:
        (announce or _quiet)(jobs.ids)
    elif said is not None:
        said()
    return jobs


def waited(jobs: Jobs, sweep_dir: Path) -> bool:
    """Wait on the handle; False when interrupted (Ctrl-C) while its points ran here, after
    saying how to go on: the units measured so far are kept. A scheduler's jobs go on: the
    interrupt goes on too (the CLI says "interrupted")."""
    try:
        jobs.wait()
    except KeyboardInterrupt as e:
        if jobs.detached:
            raise
        print(
            f"harness: {interrupted(e)}; what was measured is kept; go on with: harness resume {sweep_dir}",
            file=sys.stderr,
        )
        return False
    return True


def measure(
    backend: Backend,
    points: Sequence[Point],
    sweep_dir: Path,
    announce: Announce,
    said: Callable[[], None] | None = None,
) -> bool:
    """Measure the points and wait for them; False when interrupted while they ran here."""
    with _submission():
        jobs = start(backend, points, sweep_dir, announce, said)
    return waited(jobs, sweep_dir)


def run_points(
    backend: Backend, points: Sequence[Point], sweep_dir: Path, announce: Announce | None = None
) -> None:
    """Measure the units each point lacks and wait for them: here in passes of one repeat of
    each point (ABC ABC: harness/backends/here.py), on a scheduler as one array, each point's
    repeats back to back (one job a point). `tune`'s rounds run through it."""
    start(backend, points, sweep_dir, announce).wait()


def adapt(backend: Backend, sweep_dir: Path) -> bool:
    """repeats: auto: rounds of more repeats for the points still undecided, until each is
    decided or its budget is spent (harness/backends/adaptive.py); False when interrupted.

    Here, a round is passes of one more repeat of each point (ABC ABC: a slow spell of the
    machine lands on several points), its line logged; on a scheduler, one follow-up array per
    round (each array waits in the queue), its line printed with the array's."""
    from harness.backends.adaptive import next_round, raise_repeats

    while step := next_round(sweep_dir):
        points = raise_repeats(sweep_dir, step)
        line = step.line()
        if not measure(backend, points, sweep_dir, _round(line, points), _logged(line)):
            return False
    log.info("%s", step.line())
    return True


def _logged(line: str) -> Callable[[], None]:
    """The round's line, logged where nothing was queued (the round runs here, in passes)."""
    return lambda: log.info("%s", line)


def _round(line: str, points: Sequence[Point]) -> Announce:
    resubmitted = _resubmission(points)

    def announce(job_ids: Sequence[str]) -> None:
        print(line)
        resubmitted(job_ids)

    return announce


def _quiet(job_ids: Sequence[str]) -> None:
    """A backend that runs here submits nothing to announce."""


def finish(sweep_dir: Path, fmt: str = "terminal", wide: bool = False) -> int:
    """Print the tables (every column with `wide`); the exit status says whether some points
    failed or did not finish, else whether an expectation of the spec failed."""
    from analysis.render.report import build_report
    from harness.backends.status import sweep_status

    report = build_report([sweep_dir], fmt, wide=wide)
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


def _follow_and_finish(backend: Backend, jobs: Jobs, sweep_dir: Path, spec: Spec, wide: bool = False) -> int:
    """Follow a scheduler's live jobs of the sweep to their end, then the adaptive rounds and
    the tables (every column with `wide`)."""
    jobs.wait()
    if spec.measure.follows_up and not adapt(backend, sweep_dir):
        return EXIT_INTERRUPTED
    return finish(sweep_dir, wide=wide)


# --- resume ------------------------------------------------------------------------------------


def resume_sweep(
    sweep_dir: Path,
    *,
    wait: bool,
    backend_name: str | None = None,
    failed: bool = False,
    wide: bool = False,
    more_repeats: int | None = None,
) -> int:
    """Run again the points without complete results and without a live job, as `status`
    advises, and with `failed` those with failed units (their failed rows set aside): on the
    sweep's own backend (resubmitted to Slurm, run here for an inline or local sweep), or on
    `backend_name` where it runs points with the same ranks here. With `more_repeats`, first
    `more_repeats` more repeats of the points the recommendation's `to decide:` line names
    (analysis.grid.deciding). The tables at the end have every column with `wide`."""
    from harness.storage.lock import sweep_lock

    spec, backend, plan = _resume_backend(sweep_dir, backend_name)
    require_torch_here(backend, "resume")
    check_backend(backend, plan, sweep_dir)
    with sweep_lock(sweep_dir, "harness resume"):
        if more_repeats is not None:
            _add_deciding_repeats(sweep_dir, more_repeats)
        return _resume_locked(sweep_dir, spec, backend, wait=wait, failed=failed, wide=wide)


def _add_deciding_repeats(sweep_dir: Path, more: int) -> None:
    """Raise the repeats of the points the recommendation's `to decide:` lines name by `more`
    (repeats.json): the resume then measures them, in turn, like any missing repeat."""
    from harness.backends.adaptive import deciding_round
    from harness.storage.sweep import want_repeats

    step = deciding_round(sweep_dir, more)
    if not step:
        print("--more-repeats: the recommendation leaves nothing open to decide; nothing added")
        return
    want_repeats(sweep_dir, step.targets)
    print(step.line(doing=f"{more} more repeat(s) each"))


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
        backend.where == recorded.where and backend.world_size(plan) == info.world_size
    ):
        raise UsageError(
            f"{sweep_dir}: its points ran on {info.backend} with {info.world_size} rank(s) each; "
            f"--backend {name} runs {backend.world_size(plan)} rank(s) "
            f"{backend.where}: resume it with --backend {info.backend}"
        )
    return spec, backend, plan


def _resume_locked(
    sweep_dir: Path, spec: Spec, backend: Backend, *, wait: bool, failed: bool, wide: bool = False
) -> int:
    from harness.backends.follow import counts
    from harness.backends.registry import recorded
    from harness.backends.status import scheduler_view, sweep_status, to_resume

    was = recorded(sweep_dir)
    statuses = backend.settle(sweep_status(sweep_dir, scheduler_view(sweep_dir, was)), sweep_dir, was)
    active = [st for st in statuses if st.active]
    todo, moved = to_resume(statuses, sweep_dir, failed=failed)
    for line in moved:
        print(line)
    if active:
        print(f"{len(active)} point(s) with a live job ({counts(active)}): left alone")
    if not todo and not active and spec.measure.follows_up:
        return _resume_adaptive(sweep_dir, spec, backend, wait, wide)
    if not todo:
        print("nothing to resume: every other point has complete results")
        jobs = backend.follow(sweep_dir) if wait and active else None
        return EXIT_OK if jobs is None else _follow_and_finish(backend, jobs, sweep_dir, spec, wide)

    def said() -> None:  # nothing queued: the points run here, now
        print(f"running the {len(todo)} point(s) without complete results here ({backend.name})")

    return _measure_again(todo, sweep_dir, spec, backend, wait, _resubmission(todo), said, wide)


def _measure_again(
    todo: Sequence[Point],
    sweep_dir: Path,
    spec: Spec,
    backend: Backend,
    wait: bool,
    announce: Announce,
    said: Callable[[], None],
    wide: bool = False,
) -> int:
    """The points measured again (each measures what it lacks): waited for, with the adaptive
    rounds and the tables (every column with `wide`), or, where their jobs go on alone and
    `wait` is not asked, only submitted."""
    with _submission():
        jobs = start(backend, todo, sweep_dir, announce, said)
    if not wait and jobs.detached:
        return EXIT_OK
    if not waited(jobs, sweep_dir):
        return EXIT_INTERRUPTED
    if spec.measure.follows_up and not adapt(backend, sweep_dir):
        return EXIT_INTERRUPTED  # an interrupted round goes on where it stopped
    return finish(sweep_dir, wide=wide)


def _resume_adaptive(sweep_dir: Path, spec: Spec, backend: Backend, wait: bool, wide: bool = False) -> int:
    """Every point has its results: with repeats: auto, the next round of more repeats for the
    points still undecided (run here, or a follow-up array on Slurm)."""
    from harness.backends.adaptive import next_round, raise_repeats

    step = next_round(sweep_dir)
    if step.worth_saying:
        print(step.line())
    if not step:
        print("nothing to resume: every point has complete results")
        return EXIT_OK
    line = step.line()
    points = raise_repeats(sweep_dir, step)
    return _measure_again(
        points, sweep_dir, spec, backend, wait, _resubmission(points), lambda: log.info("%s", line), wide
    )
