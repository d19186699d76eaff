"""The row schema of rank<k>.csv, and the writer that appends a rank's rows.

One row per (rung, repeat) and rank. Column names are an interface: the analysis and users'
notebooks read them. The setting columns come from harness_schema/settings.py; the rest are
RungRow's fields. Torch-free: analysis imports it.
"""

from __future__ import annotations

import csv
import io
import json
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

from harness_schema import layout, reading, settings
from harness_schema.atomic import atomic_write_text
from harness_schema.settings import SETTING_COLUMNS

IDENTITY_COLUMNS: tuple[str, ...] = (
    "sweep_id",
    "point_id",
    "point_index",
    "sequence_step",
    "rung",
    "repeat",
    "rank",
    "world_size",
    "hostname",
    "jobid",
    "device",
    "status",
    "error",
)


@dataclass(kw_only=True, slots=True)
class RungRow:
    """One measured (rung, repeat) on one rank. Column names are an interface: keep them.

    The point's settings travel as `settings` (their columns are declared once, in
    harness_schema/settings.py); every other column is a field here.
    """

    sweep_id: str
    """The sweep's folder name (its creation time): results/<spec name>/<sweep id>."""
    point_id: str
    """The point's id: a short hash of everything measured, the same in every sweep."""
    point_index: int
    """The point's place in the plan (0 is the baseline)."""
    sequence_step: str
    """The sequence step's name, or "" outside a sequence."""
    rung: str
    """The caching ladder's rung: full, or the stage the input was cached after."""
    repeat: int
    """Which run of the point (0, 1, ...)."""
    rank: int
    """The DDP rank that wrote the row."""
    world_size: int
    """How many ranks ran the point."""
    hostname: str
    """The node the rank ran on."""
    jobid: str
    """Slurm job id (array job id _ task id) where there is one, else empty."""
    device: str
    """The device actually used (cpu, cuda:3), not the one asked for."""
    status: str
    """ok, failed or skipped."""
    error: str
    """Why a failed or skipped row failed or was skipped; empty when ok."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Setting column -> cell (see settings.setting_cells)."""
    # --- the window (see harness/execution/loop.py for the rules) ---
    warmup_steps: int = 0
    """Steps run before the window: the spec's, plus those that used up the workers' stock."""
    steps: int = 0
    """Measured steps in the window."""
    samples: int = 0
    """Samples actually delivered in the window (a partial last batch counts what it holds)."""
    first_step_loading_time: float | None = None
    """The very first next() of the rung: iterator and worker start-up."""
    loading_time: float | None = None
    """Mean per measured step of next() plus the host-to-device copy call (the course's chronometer)."""
    loading_time_median: float | None = None
    """Median of the per-step loading_time."""
    loading_time_total: float | None = None
    """Sum of the per-step loading_time over the window."""
    loading_time_p50: float | None = None
    """The tail of the per-step loading_time: its 50th, 95th and 99th percentiles (a read that
    stalls now and then shows in p99 long before it moves the mean)."""
    loading_time_p95: float | None = None
    """95th percentile of the per-step loading_time."""
    loading_time_p99: float | None = None
    """99th percentile of the per-step loading_time."""
    waited_share: float | None = None
    """Share of measured steps whose wait for data exceeded their own compute (step time minus
    the wait): how often the accelerator stood idle more than it worked."""
    next_time: float | None = None
    """Mean time blocked in next(iterator) alone, per measured step."""
    step_time: float | None = None
    """Mean wall time of a measured step, the wait for data included."""
    step_time_median: float | None = None
    """Median wall time of a measured step."""
    training_time: float | None = None
    """Wall time of all measured steps, device synchronised at both ends."""
    samples_per_s: float | None = None
    """Samples delivered over the window's wall time (training_time)."""
    steps_per_s: float | None = None
    """Measured steps over the window's wall time."""
    window_drift: float | None = None
    """Mean step time of the window's second half over its first half, minus 1."""
    window_steady: bool | None = None
    """False when the drift is beyond what the steps' own scatter explains (see loop.py)."""
    epoch_steps: int | None = None
    """Batches in one epoch of this rank's loader (per-rank share of the data set)."""
    epoch_restarts: int | None = None
    """Epoch ends crossed inside the window (a new iterator; new workers unless persistent)."""
    epoch_restart_time: float | None = None
    """Seconds the window spent in the next() calls that started a new epoch."""
    loader_capacity: float | None = None
    """Batches per second the same loader delivers with no train step (sample-level rungs)."""
    cpu_memory_gb: float | None = None
    """Memory of the rank's process tree (PSS where the OS gives it, else RSS) after the run."""
    cached_sample_bytes: int | None = None
    """Bytes of one cached value of a cached sample-level rung: what caching that stage's output
    would hold per sample (the verdict's caching what-if)."""
    dataset_samples: int | None = None
    """Samples in the data set: map-style, its len(); a stream with a length, its len() on the
    rank times the ranks (such a stream shards itself, and its len() is the rank's share: a
    DataLoader's len needs it per rank); empty for a stream without one."""
    memory_limit_gb: float | None = None
    """Memory the job may use on this node: the least of the host's, the cgroup's limit and
    Slurm's --mem."""
    # --- sampled over the measured steps (empty when the sampler is off or has no GPU) ---
    gpu_util: float | None = None
    """Mean GPU utilization, percent."""
    gpu_mem_util: float | None = None
    """Mean GPU memory-controller utilization, percent (NVML)."""
    gpu_power_w: float | None = None
    """Mean GPU power draw, watts."""
    energy_j: float | None = None
    """GPU energy over the window, joules (the energy counter, else power integrated)."""
    energy_per_sample_j: float | None = None
    """energy_j over the samples of the window."""
    peak_device_memory_gb: float | None = None
    """Most GPU memory in use on the rank's GPU (NVML's used, every context)."""
    loader_cores: float | None = None
    """Cores used by the DataLoader worker processes (CPU seconds / wall seconds)."""
    main_cores: float | None = None
    """Cores used by the rank's own process."""
    cpus_allotted: int | None = None
    """Cores this process may run on (Slurm's --cpus-per-task, via the affinity mask)."""
    peak_host_memory_gb: float | None = None
    """Most memory of the rank's process tree, DataLoader workers included."""
    max_memory_allocated_gb: float | None = None
    """This rank's most memory allocated by its tensors on its GPU during the rung (PyTorch's
    count: unlike NVML's `used`, no other context and no cached-but-free blocks)."""
    max_memory_reserved_gb: float | None = None
    """What PyTorch's caching allocator held on this rank's GPU at most during the rung."""
    # --- what the caching ladder's verdict needs to know about the pipeline ---
    transform_names: str = ""
    """The dataset's Compose steps, comma-separated (names the stage a transform:<k> rung adds)."""
    input_shapes: int | None = None
    """How many distinct input shapes (batch dimension aside) the rung saw: > 1 means inputs vary."""
    started_at: str = ""
    """When the rung's run started (UTC, ISO 8601)."""
    finished_at: str = ""
    """When it finished."""
    # --- appended columns (older results lack them and still load) ---
    foreign_cpu_share: float | None = None
    """Share of the CPU time of the CPUs the rank may run on, over the window, that other
    processes took (neither the rank's tree nor its job's; steal included): > 0.1 says the
    machine was shared (harness/sampling/mates.py)."""
    run_pass: int | None = None
    """The pass of the sweep in which this unit was measured, where points' repeats are
    interleaved (inline, local: ABC ABC, harness.sweeps.run_points): rows of two points with
    the same run_pass were measured side by side, and the analysis compares them paired.
    Empty where a point's repeats ran back to back (Slurm)."""
    idle_workers: int | None = None
    """DataLoader workers that made no batch in the rung (warmup, window and loader capacity),
    of num_workers; empty without workers and on the batch-level rungs. > 0 on a stream: it has
    fewer shards than readers, and those workers idled (harness/execution/dataloader.py:WorkerTally)."""
    loader_given: str = ""
    """The class of a loader the harness measured as it was given, not built (workload.loader's
    factory, a script's DataLoader subclass, a torchdata.nodes Loader): its settings columns are
    then the loader's own where it reports them (empty where it does not), not the spec's.
    After the class, on several ranks: a DataModule's loader "re-made with a DistributedSampler"
    (or a DistributedSamplerWrapper around a sampler of its own) as Lightning's Trainer does, or
    a factory's "not split by rank" (it takes neither rank nor world_size, its sampler is plain):
    each rank read the whole data set."""
    delivery_period: int | None = None
    """Steps per period where the loader delivered in bursts (workers in step: a wait every
    `delivery_period` steps, harness/execution/steady.py): the window covers whole periods, and
    the wait is periodic, not a heavy tail. Empty where the delivery was not periodic."""
    window_rse: float | None = None
    """With measure.steps: auto, the relative standard error of the window's step rate (batch
    means over blocks of whole periods, harness/execution/steady.py): the window stopped once it
    was at most 2 %, or at measure.max_seconds, which a larger value here says. Empty for a
    window of a fixed number of steps."""
    dataset_stream: bool | None = None
    """True where the data set is a stream (an IterableDataset), whether or not it has a length
    (dataset_samples is filled for one that has: LitData's, MosaicML Streaming's); False for a
    map-style one. Empty in rows written before the column existed."""
    nodes: int | None = None
    """The nodes the point ran on (its size: slurm.nodes, one of them where sizes are an axis;
    on the local backend, nodes emulated on one machine): world_size / nodes ranks each. Empty
    in rows written before the column existed, and where no size was planned (tune's points)."""

    def cells(self) -> dict[str, Any]:
        """The row as the CSV holds it: column -> value."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "settings"}
        return {c: self.settings.get(c) if c in SETTING_COLUMNS else values[c] for c in ROW_COLUMNS}

    @staticmethod
    def from_cells(cells: Mapping[str, Any]) -> RungRow:
        """The inverse of cells(): a row from column -> value (tests, notebooks)."""
        own = {k: v for k, v in cells.items() if k not in SETTING_COLUMNS}
        return RungRow(**own, settings={k: v for k, v in cells.items() if k in SETTING_COLUMNS})


_OWN = tuple(f.name for f in fields(RungRow) if f.name != "settings")
ROW_COLUMNS: tuple[str, ...] = (*IDENTITY_COLUMNS, *SETTING_COLUMNS, *_OWN[len(IDENTITY_COLUMNS) :])
assert _OWN[: len(IDENTITY_COLUMNS)] == IDENTITY_COLUMNS, "RungRow starts with the identity columns"


def _column_type(column: str) -> Any:
    if column in SETTING_COLUMNS:
        return settings.column_type(column)
    hint = _HINTS[column]
    return next((t for t in (bool, int, float) if t is hint or t in typing.get_args(hint)), str)


# The column types, read off the declarations so the schema is written once: readers of the
# CSVs (analysis/load.py) restore types from these.
_HINTS = typing.get_type_hints(RungRow)
BOOL_COLUMNS: tuple[str, ...] = tuple(c for c in ROW_COLUMNS if _column_type(c) is bool)
NUMBER_COLUMNS: tuple[str, ...] = tuple(c for c in ROW_COLUMNS if _column_type(c) in (int, float))

PLAN_COLUMNS: tuple[str, ...] = (
    "point_index",
    "point_id",
    "sequence_step",
    *(f.name for f in dataclass_fields(settings.WorkloadSettings)),  # device as asked for, too
    *settings.LOADER_COLUMNS,
    "rungs",
    "adjustments",
)


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """The rows as CSV, a mapping or list as its JSON, None empty. The rows are read as they
    are: none is changed while they are written."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    # A mapping or list in many rows is often one object (a setting of the spec in every
    # point of plan.csv: ten a point, 10,000 json.dumps for 1,000 points, issue #36): written
    # once. Keyed by id, each kept beside its text, so that no id is another object's.
    written: dict[int, tuple[Any, str]] = {}
    for row in rows:
        writer.writerow({k: _cell(row.get(k), written) for k in columns})
    return buffer.getvalue()


def _cell(value: Any, written: dict[int, tuple[Any, str]]) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        known = written.get(id(value))
        if known is None or known[0] is not value:
            known = written[id(value)] = (value, json.dumps(value, sort_keys=True))
        return known[1]
    return value


class RankWriter:
    """Rows of one rank of one point; the whole file is rewritten atomically on each append,
    so a crash or a time limit leaves every row measured so far, and never half a row."""

    def __init__(self, point_dir: Path, rank: int) -> None:
        self.path = layout.rank_file(point_dir, rank)
        self.rows: list[dict[str, Any]] = []

    def append(self, row: RungRow) -> None:
        """Add the row, replacing an earlier row of the same (rung, repeat): a unit measured
        again after a requeue (because another rank had not finished it) stays one row."""
        new = row.cells()
        self.rows = [
            r for r in self.rows if (r["rung"], str(r["repeat"])) != (new["rung"], str(new["repeat"]))
        ]
        self.rows.append(new)
        atomic_write_text(self.path, csv_text(self.rows, ROW_COLUMNS))


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a rank file through the one tolerant reader (harness_schema/reading.py):
    reading.UnreadableFile, one line, when it is torn or unreadable."""
    return reading.read_rows(path)


def completed_units(point_path: Path, world_size: int) -> set[tuple[str, int]]:
    """The (rung, repeat) pairs that every rank has a final row for (ok, failed or skipped); a
    rank file that cannot be read has none."""
    return reading.read_point(point_path, world_size).units


def point_complete(point_path: Path, rungs: Sequence[str], repeats: int, world_size: int) -> bool:
    wanted = {(rung, rep) for rung in rungs for rep in range(repeats)}
    return wanted <= completed_units(point_path, world_size)


def short_error(error: str, width: int = 160) -> str:
    """A row's error for a one-line display (`harness status`): whole where it fits; else what
    happened (its first words) and its last line, whole, for a script's error column ends with
    the line that says what went wrong (script.error_excerpt): `RuntimeError: ...`, not its
    first 160 characters."""
    if len(error) <= width or " | " not in error:
        return error
    first, last = error.split(" | ", 1)[0], error.rsplit(" | ", 1)[-1]
    if "; stderr: " in first:
        return f"{first.split('; stderr: ', 1)[0]}; stderr: … {last}"
    return f"{first} … {last}"
