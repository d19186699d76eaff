"""A sweep folder: the resolved spec and plan, written before any point runs, and who runs it.

A sweep run here (inline or local) names its process in `owner.json` while it runs, so that
`harness status` tells a sweep still running from one that was interrupted, and `harness
resume` never runs a point twice at once. The local backend's jobs are processes of their own
(submitit starts them to outlive the process that submits them): jobs.json names each one's
process too, so that a point whose job outlived a killed `harness run` counts as running.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.config.plan import Plan, Point
from harness_schema import layout, reading
from harness_schema import rows as results
from harness_schema.atomic import CannotWrite, atomic_write_text, named


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepInfo:
    """How a sweep runs: what `status` and `resume` need to judge its points."""

    spec: str
    backend: str
    """inline, local, slurm or sbatch."""
    world_size: int
    """Ranks per point: a point is complete when every rank has its rows."""
    created: str
    world_sizes: Mapping[str, int] = field(default_factory=dict)
    """Point id -> its ranks, for the points whose size is not the first (sizes as an axis:
    slurm.nodes: [1, 2]); empty for a sweep of one size, whose sweep.json is as it was."""

    def ranks(self, point_id: str) -> int:
        """The ranks of one point: a point is complete when every one has its rows."""
        return self.world_sizes.get(point_id, self.world_size)


def create_sweep(
    plan: Plan,
    results_root: Path,
    *,
    backend: str = "inline",
    world_size: int = 1,
    world_sizes: Mapping[str, int] | None = None,
    sweep_id: str | None = None,
) -> Path:
    """The sweep's folder, with its spec, plan and sweep files. It appears whole or not at
    all: made aside (a hidden sibling), then renamed into place, so that a full or read-only
    disk leaves no half-made sweep for `status` or `resume` to stumble on."""
    spec_root = results_root / plan.spec.name
    try:
        spec_root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _not_made(named(spec_root, e)) from None
    sweep_dir = spec_root / (sweep_id or layout.new_sweep_id(spec_root))
    aside = spec_root / f".{sweep_dir.name}.making-{os.getpid()}"
    try:
        aside.mkdir()
        _write_sweep_files(plan, aside, backend, world_size, world_sizes or {})
        sweep_dir = _renamed_in(aside, sweep_dir, spec_root, given=sweep_id is not None)
    except BaseException as e:
        shutil.rmtree(aside, ignore_errors=True)
        fault = _named_in_place(e, aside, sweep_dir)
        if fault is e:
            raise
        raise fault from None
    return sweep_dir


TAKEN = (errno.ENOTEMPTY, errno.EEXIST)
"""rename()'s errors onto a folder that is not empty (Linux says the one, macOS the other)."""


def _renamed_in(aside: Path, sweep_dir: Path, spec_root: Path, *, given: bool) -> Path:
    """`aside` renamed to `sweep_dir`, or, where another sweep of the spec started in the same
    second took that id first, to the next free one (20261128-202327-2: ids stay sortable).
    The rename is the claim: it fails onto a folder that is not empty, so two sweeps never
    share one. An id the caller gave is never changed."""
    for _ in range(1000):
        try:
            aside.rename(sweep_dir)
            return sweep_dir
        except OSError as e:
            if given or e.errno not in TAKEN:
                raise
        sweep_dir = spec_root / layout.new_sweep_id(spec_root)
    aside.rename(sweep_dir)  # raises: a thousand sweeps of the spec in one second
    return sweep_dir


def _named_in_place(e: BaseException, aside: Path, sweep_dir: Path) -> BaseException:
    """A storage fault while the sweep was made aside, named at the path the user knows."""
    if isinstance(e, CannotWrite) and e.path.is_relative_to(aside):
        return _not_made(CannotWrite(sweep_dir / e.path.relative_to(aside), e))
    if isinstance(e, OSError):
        return _not_made(named(sweep_dir, e))
    return e


def _not_made(e: OSError) -> OSError:
    if isinstance(e, CannotWrite):
        e.outcome = "no sweep was made"
    return e


def _notes(plan: Plan, world_size: int) -> list[str]:
    """The plan's notes that hold for this sweep: the spec's ranks (slurm.world_size) are not
    this backend's where it runs one rank a point (inline), so the note on a loader factory
    that cannot split the data between ranks does not apply."""
    from harness.workloads.loader_factory import is_ranks_note

    return [n for n in plan.notes if world_size > 1 or not is_ranks_note(n)]


def _write_sweep_files(
    plan: Plan, sweep_dir: Path, backend: str, world_size: int, world_sizes: Mapping[str, int]
) -> None:
    atomic_write_text(sweep_dir / "spec.yaml", plan.spec.text)
    atomic_write_text(sweep_dir / "plan.csv", plan_csv(plan))
    layout.write_json(
        sweep_dir / "plan.json",
        {
            "spec": plan.spec.name,
            "notes": _notes(plan, world_size),
            "points": [p.to_json() for p in plan.points],
        },
    )
    info = SweepInfo(
        spec=plan.spec.name,
        backend=backend,
        world_size=world_size,
        created=datetime.now().isoformat(timespec="seconds"),
        world_sizes={k: v for k, v in world_sizes.items() if v != world_size},
    )
    data = asdict(info)
    if not info.world_sizes:
        del data["world_sizes"]  # a sweep of one size: its sweep.json as it always was
    layout.write_json(sweep_dir / "sweep.json", data)


def load_info(sweep_dir: Path) -> SweepInfo:
    """sweep.json; UnreadableFile (one line) when it is missing, torn or of another version.
    Keys a newer harness added are left alone: what this one needs is backend and world_size."""
    path = sweep_dir / "sweep.json"
    data = reading.read_json(path, dict)
    backend, world_size = data.get("backend"), data.get("world_size")
    if not isinstance(backend, str) or not backend:
        raise reading.another_version(path, f"backend is {backend!r}, not a backend's name")
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise reading.another_version(path, f"world_size is {world_size!r}, not a number of ranks")
    sizes = data.get("world_sizes", {})
    if not isinstance(sizes, dict) or not all(isinstance(v, int) and v >= 1 for v in sizes.values()):
        raise reading.another_version(path, f"world_sizes is {sizes!r}, not point ids to numbers of ranks")
    return SweepInfo(
        spec=str(data.get("spec", "")),
        backend=backend,
        world_size=world_size,
        created=str(data.get("created", "")),
        world_sizes=sizes,
    )


def record_jobs(
    sweep_dir: Path, points: list[Point], job_ids: list[str], backend: str, *, process: bool = False
) -> None:
    """Append (point, job) pairs to jobs.json: the latest job of a point is its last entry.

    `process`: the job ids are pids of this machine (the local backend's jobs); each entry then
    stamps its process (see process_alive)."""
    path = sweep_dir / "jobs.json"
    entries = reading.read_json(path, list) if path.exists() else []
    now = datetime.now().isoformat(timespec="seconds")
    for p, j in zip(points, job_ids, strict=True):
        entry = {"point_id": p.id, "point_index": p.index, "job_id": j, "backend": backend, "submitted": now}
        if process:
            entry["process"] = process_stamp(int(j))
        entries.append(entry)
    layout.write_json(path, entries)


def latest_jobs(sweep_dir: Path) -> dict[str, str]:
    """point id -> the id of the last job submitted for it."""
    return {point: entry["job_id"] for point, entry in latest_job_entries(sweep_dir).items()}


def latest_job_entries(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """point id -> the jobs.json entry of the last job submitted for it."""
    path = sweep_dir / "jobs.json"
    if not path.exists():
        return {}
    entries: dict[str, dict[str, Any]] = {}
    for n, entry in enumerate(reading.read_json(path, list)):
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), (str, int)) for k in JOB_KEYS):
            raise reading.another_version(path, f"entry {n} lacks one of {', '.join(JOB_KEYS)}")
        entries[str(entry["point_id"])] = {**entry, "job_id": str(entry["job_id"])}
    return entries


JOB_KEYS = ("point_id", "job_id")
"""What every jobs.json entry holds (record_jobs)."""


def open_sweep(path: Path) -> Path:
    """Check that `path` is a sweep folder, with a message that says what it is instead."""
    if not (path / "plan.json").exists():
        raise FileNotFoundError(
            f"{path}: not a sweep folder (no plan.json); sweeps are results/<spec name>/<sweep id>/"
        )
    return path


def plan_csv(plan: Plan) -> str:
    rows = []
    for p in plan.points:
        rows.append(
            {
                "point_index": p.index,
                "point_id": p.id,
                "sequence_step": p.sequence_step,
                **p.settings(),
                "rungs": " ".join(p.rungs),
                "adjustments": "; ".join(p.adjustments),
            }
        )
    return results.csv_text(rows, results.PLAN_COLUMNS)


def load_points(sweep_dir: Path) -> list[Point]:
    """The sweep's points as planned, with the repeats that adaptive repeats added since
    (repeats.json): what `status` counts, `resume` runs and a job measures."""
    points = planned_points(sweep_dir)
    more = wanted_repeats(sweep_dir)
    return [with_repeats(p, more[p.id]) if more.get(p.id, 0) > p.measure.repeats else p for p in points]


def planned_points(sweep_dir: Path) -> list[Point]:
    """plan.json's points; UnreadableFile (one line) when it is torn or of another version."""
    path = sweep_dir / "plan.json"
    listed = reading.read_json(path, dict).get("points")
    if not isinstance(listed, list):
        raise reading.another_version(path, "no list of points")
    points = []
    for n, data in enumerate(listed):
        try:
            points.append(Point.from_json(data))
        except KeyError as e:
            raise reading.another_version(path, f"point {n} has no {e.args[0]!r}") from e
        except (TypeError, ValueError, AttributeError) as e:
            raise reading.another_version(path, f"point {n}: {e}") from e
    return points


REPEATS_FILE = "repeats.json"
"""point id -> repeats now wanted, where adaptive repeats (measure.repeats: auto) asked for more
than the plan's first round (harness/backends/adaptive.py)."""


def wanted_repeats(sweep_dir: Path) -> dict[str, int]:
    path = sweep_dir / REPEATS_FILE
    if not path.exists():
        return {}
    try:
        return {str(k): int(v) for k, v in reading.read_json(path, dict).items()}
    except (TypeError, ValueError) as e:
        if isinstance(e, reading.UnreadableFile):
            raise
        raise reading.another_version(path, f"a repeat count that is not a number ({e})") from e


def want_repeats(sweep_dir: Path, wanted: Mapping[str, int]) -> None:
    """Raise the repeats of these points (never lower them): the next run of each measures only
    the repeats it lacks, numbered on from its last (rows keep their repeat numbers)."""
    merged = wanted_repeats(sweep_dir)
    for point_id, repeats in wanted.items():
        merged[point_id] = max(merged.get(point_id, 0), int(repeats))
    layout.write_json(sweep_dir / REPEATS_FILE, merged)


def with_repeats(point: Point, repeats: int) -> Point:
    """The same point (the same id: its rows are found) measured `repeats` times in all."""
    return replace(point, measure=replace(point.measure, repeats=repeats))


OWNER_FILE = "owner.json"


@contextmanager
def owned(sweep_dir: Path) -> Iterator[None]:
    """While the block runs, owner.json names this process as the one running the sweep."""
    layout.write_json(sweep_dir / OWNER_FILE, process_stamp(os.getpid()))
    try:
        yield
    finally:
        # A disk gone read-only keeps the file: a stale one is told by its dead process.
        with contextlib.suppress(OSError):
            (sweep_dir / OWNER_FILE).unlink(missing_ok=True)


def live_owner(sweep_dir: Path) -> str:
    """ "pid 123 on host h" when a process of this machine is running the sweep now, else "".

    A process that died without cleaning up (Ctrl-C'd hard, killed) leaves the file: it is
    then not taken as running (see process_alive)."""
    try:
        owner = json.loads((sweep_dir / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return ""
    return process_alive(owner)


def process_stamp(pid: int) -> dict[str, Any]:
    """What identifies a process of this machine later: its host, pid and start time."""
    return {"host": socket.gethostname(), "pid": pid, "started": _process_start(pid)}


def process_alive(stamp: Any) -> str:
    """ "pid 123 on host h" while the process of `stamp` (process_stamp's) lives, else "".

    Its pid must be alive and be the same process (same start time: pids are reused). A
    process on another machine cannot be checked from here: it is not taken as running."""
    if not isinstance(stamp, dict) or stamp.get("host") != socket.gethostname():
        return ""
    started = stamp.get("started")  # None: the process had already ended when it was stamped
    if not isinstance(stamp.get("pid"), int) or started is None or _process_start(stamp["pid"]) != started:
        return ""
    return f"pid {stamp['pid']} on {stamp['host']}"


def _process_start(pid: int) -> float | None:
    """The start time of a live process; None for a pid gone, or a zombie (ended, not yet
    reaped by its parent: it writes nothing any more)."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except (psutil.Error, OSError):
        return None


def kept_line(path: Path) -> str:
    """What a storage fault at `path` leaves, in the words of the one line the CLI prints:
    the sweep it belongs to and the command that measures the rest ("" outside a sweep)."""
    for folder in (path, *path.parents):
        if (folder / "plan.json").is_file() and (folder / "sweep.json").is_file():
            return f"what was measured is kept: harness resume {folder}"
    return ""
