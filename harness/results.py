"""The results layout, the row schema, and atomic writes.

results/<spec name>/<sweep id>/
  spec.yaml  plan.csv  plan.json
  points/<point id>/rank<k>.csv  meta-rank<k>.json

Every file is written to a temporary name in the same folder and renamed into place, so a
reader on a shared filesystem never sees half a file. Torch-free: analysis imports it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

ROW_FILE = re.compile(r"^rank(\d+)\.csv$")


@dataclass(kw_only=True, slots=True)
class RungRow:
    """One measured (rung, repeat) on one rank. Column names are an interface: keep them."""

    sweep_id: str
    point_id: str
    point_index: int
    step: str
    rung: str
    repeat: int
    rank: int
    world_size: int
    hostname: str
    jobid: str
    """Slurm job id (array job id _ task id) where there is one, else empty."""
    device: str
    status: str
    """ok, failed or skipped."""
    error: str
    # settings (effective values, see plan.resolve_loader)
    dataset: str
    dataset_args: str
    """The dataset's arguments as JSON (they tell apart two storage paths of one dataset)."""
    model: str
    model_args: str
    batch_size: int
    amp: str
    compile: bool
    channels_last: bool
    zero_grad_set_to_none: bool
    gpu_normalize: bool
    num_workers: int
    persistent_workers: bool
    pin_memory: bool
    non_blocking: bool
    prefetch_factor: int | None
    drop_last: bool
    # timing, seconds
    warmup_steps: int
    steps: int
    samples: int
    first_step_loading_time: float | None
    loading_time: float | None
    """Mean time blocked in next(iterator) per measured step."""
    loading_time_median: float | None
    loading_time_total: float | None
    step_time: float | None
    step_time_median: float | None
    training_time: float | None
    """Wall time of all measured steps, device synchronised at both ends."""
    samples_per_s: float | None
    steps_per_s: float | None
    cpu_memory_gb: float | None
    """Memory of the rank's process tree (PSS where the OS gives it, else RSS) after the run."""
    # sampled over the measured steps (empty when the sampler is off or has no GPU)
    gpu_util: float | None = None
    """Mean GPU utilization, percent."""
    gpu_mem_util: float | None = None
    gpu_power_w: float | None = None
    energy_j: float | None = None
    energy_per_sample_j: float | None = None
    peak_device_memory_gb: float | None = None
    loader_cores: float | None = None
    """Cores used by the DataLoader worker processes (CPU seconds / wall seconds)."""
    main_cores: float | None = None
    """Cores used by the rank's own process."""
    cpus_allotted: int | None = None
    """Cores this process may run on (Slurm's --cpus-per-task, via the affinity mask)."""
    peak_host_memory_gb: float | None = None
    # what the caching ladder's verdict needs to know about the pipeline
    transform_names: str = ""
    """The dataset's Compose steps, comma-separated (names the stage a transform:<k> rung adds)."""
    input_shapes: int | None = None
    """How many distinct input batch shapes the rung saw: > 1 means inputs vary in size."""
    started_at: str = ""
    finished_at: str = ""


ROW_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RungRow))
# The column types, read off RungRow's annotations so the schema is written once: readers of
# the CSVs (analysis/load.py) restore types from these.
_HINTS = typing.get_type_hints(RungRow)
BOOL_COLUMNS: tuple[str, ...] = tuple(c for c in ROW_COLUMNS if _HINTS[c] is bool)
NUMBER_COLUMNS: tuple[str, ...] = tuple(
    c
    for c in ROW_COLUMNS
    if _HINTS[c] is not bool and any(t in (int, float) for t in typing.get_args(_HINTS[c]) or (_HINTS[c],))
)

PLAN_COLUMNS: tuple[str, ...] = (
    "point_index",
    "point_id",
    "step",
    "dataset",
    "dataset_args",
    "model",
    "model_args",
    "batch_size",
    "device",
    "amp",
    "compile",
    "channels_last",
    "zero_grad_set_to_none",
    "gpu_normalize",
    "num_workers",
    "persistent_workers",
    "pin_memory",
    "non_blocking",
    "prefetch_factor",
    "drop_last",
    "rungs",
    "adjustments",
)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); results are shared like any file the user
        # writes, so give it the mode the umask would have given it.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in columns})
    return buffer.getvalue()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True)
    return value


class RankWriter:
    """Rows of one rank of one point; the whole file is rewritten atomically on each append,
    so a crash or a time limit leaves every row measured so far, and never half a row."""

    def __init__(self, point_dir: Path, rank: int) -> None:
        self.path = point_dir / f"rank{rank}.csv"
        self.rows: list[dict[str, Any]] = []

    def append(self, row: RungRow) -> None:
        """Add the row, replacing an earlier row of the same (rung, repeat): a unit measured
        again after a requeue (because another rank had not finished it) stays one row."""
        new = asdict(row)
        self.rows = [
            r for r in self.rows if (r["rung"], str(r["repeat"])) != (new["rung"], str(new["repeat"]))
        ]
        self.rows.append(new)
        atomic_write_text(self.path, csv_text(self.rows, ROW_COLUMNS))


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def new_sweep_id(root: Path) -> str:
    base = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, n = base, 1
    while (root / candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def point_dir(sweep_dir: Path, point_id: str) -> Path:
    return sweep_dir / "points" / point_id


def write_meta(point_path: Path, rank: int, meta: Mapping[str, Any]) -> None:
    atomic_write_text(point_path / f"meta-rank{rank}.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")


def write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def completed_units(point_path: Path, world_size: int) -> set[tuple[str, int]]:
    """The (rung, repeat) pairs that every rank has a final row for (ok, failed or skipped)."""
    per_rank: list[set[tuple[str, int]]] = []
    for rank in range(world_size):
        path = point_path / f"rank{rank}.csv"
        if not path.exists():
            return set()
        try:
            rows = read_rows(path)
        except (OSError, csv.Error):
            return set()
        per_rank.append({(r["rung"], int(r["repeat"])) for r in rows if r.get("rung")})
    return set.intersection(*per_rank) if per_rank else set()


def point_complete(point_path: Path, rungs: Sequence[str], repeats: int, world_size: int) -> bool:
    wanted = {(rung, rep) for rung in rungs for rep in range(repeats)}
    return wanted <= completed_units(point_path, world_size)
