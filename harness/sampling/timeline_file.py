"""The timeline's file, samples-rank<k>.csv: its columns, one row per sample made from the
sampler's readings (rates between two samples, energy since the first), and the file of one rank
of one point across its runs (a requeued or resumed run appends, never rewrites).

Apart from harness/sampling/timeline.py, which takes the readings (the sampling thread, the
phases and their summaries): this module says what is written and how it is kept.
"""

from __future__ import annotations

import csv
import logging
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.sampling.host import HostReading
from harness.sampling.nvml import GpuReading
from harness_schema.atomic import atomic_write_text
from harness_schema.rows import csv_text

log = logging.getLogger(__name__)

SAMPLE_COLUMNS: tuple[str, ...] = (
    "t",
    "wall_time",
    "rank",
    "phase",
    "gpu_util",
    "gpu_mem_util",
    "gpu_mem_used_gb",
    "gpu_power_w",
    "gpu_sm_clock_mhz",
    "gpu_energy_j",
    "main_cpu_percent",
    "loader_cpu_percent",
    "system_cpu_percent",
    "host_memory_gb",
    "run",
)
"""Columns of samples-rank<k>.csv. t: seconds since the first run's start; phase: innermost open
phase or ""; *_cpu_percent: percent of one core; gpu_energy_j: since the run's first sample;
host_memory_gb only on the samples where it was read (see host.DEFAULT_MEMORY_INTERVAL_S); run:
0 for the point's first run on this rank, 1, 2... for each run after a requeue or a resume."""

# CPU times tick at 1/USER_HZ = 10 ms on Linux: a percent over less than this window would be
# mostly rounding, so a row's rate is taken against an earlier sample at least this far back.
MIN_RATE_WINDOW_S = 0.05


def timeline_name(rank: int) -> str:
    return f"samples-rank{rank}.csv"


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading of the sampler: when, in which phase, the GPU's and the host's figures."""

    t: float
    wall_time: float
    phase: str
    gpu: GpuReading | None
    host: HostReading | None


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values given, None where none is."""
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


class _Rows(Protocol):
    def rows(self) -> list[dict[str, Any]]: ...


class TimelineFile:
    """samples-rank<k>.csv of one rank of one point, across the point's runs.

    A requeued or resumed point's rank appends its samples after those of the earlier runs,
    with the next `run` number, and never rewrites them: the interrupted run's timeline is
    what shows why it was slow or where it stopped. `t` goes on from the first run's start (by
    the wall clock), so one plot shows every run and the gap between them. Each write is the
    whole file, atomically: a rank torn down between two writes leaves the last one whole.
    """

    def __init__(self, path: Path, *, keep_earlier: bool = True) -> None:
        self.path = Path(path)
        self.earlier: list[dict[str, Any]] = []
        self.run = 0
        self.origin: float | None = None
        """Wall-clock time of the first run's t = 0."""
        self.failed = False
        """A write failed (said once)."""
        if keep_earlier and self.path.is_file():
            self._read_earlier()

    def _read_earlier(self) -> None:
        try:
            with self.path.open(newline="") as f:
                self.earlier = [row for row in csv.DictReader(f) if row.get("t")]
        except (OSError, csv.Error, UnicodeDecodeError) as e:
            log.warning("%s: unreadable (%s); its earlier samples are not kept", self.path, e)
            self.earlier = []
        runs = [int(row["run"]) for row in self.earlier if (row.get("run") or "").isdigit()]
        self.run = max(runs, default=0) + 1 if self.earlier else 0
        for row in self.earlier:
            row["run"] = row.get("run") or 0  # a file written before runs were numbered
        try:
            self.origin = float(self.earlier[0]["wall_time"]) - float(self.earlier[0]["t"])
        except (IndexError, KeyError, ValueError):
            self.origin = None

    def write(self, sampler: _Rows) -> None:
        """The earlier runs' samples, then this run's so far."""
        rows = sampler.rows()
        if rows:
            shift = 0.0
            if self.origin is not None:
                shift = (rows[0]["wall_time"] - rows[0]["t"]) - self.origin
            for row in rows:
                row["t"] = round(row["t"] + shift, 4)
                row["run"] = self.run
        try:
            atomic_write_text(self.path, csv_text([*self.earlier, *rows], SAMPLE_COLUMNS))
        except OSError as e:
            # Best-effort: the timeline explains a result, it is not one. A full or read-only
            # disk is said once, and the rows (which do count) meet it on their own.
            if not self.failed:
                reason = e.strerror or e
                log.warning(
                    "the timeline %s is not written (%s); the point goes on without it", self.path, reason
                )
            self.failed = True


def timeline_rows(samples: list[Sample], rank: int) -> list[dict[str, Any]]:
    """The samples as the file's rows (SAMPLE_COLUMNS): GPU figures averaged over NVML's history,
    energy since the first sample (integrated from power where the GPU has no counter), CPU
    percents as rates against a sample at least MIN_RATE_WINDOW_S earlier."""
    rows: list[dict[str, Any]] = []
    energy0: float | None = None
    integrated = 0.0  # energy from power, for GPUs without a counter
    previous_power: tuple[float, float] | None = None
    for i, s in enumerate(samples):
        g, h = s.gpu, s.host
        row: dict[str, Any] = dict.fromkeys(SAMPLE_COLUMNS)
        row.update(t=round(s.t, 4), wall_time=round(s.wall_time, 3), rank=rank, phase=s.phase)
        if g is not None:
            util = mean(v for _, v in g.util_history) if g.util_history else g.util
            mem_util = mean(v for _, v in g.mem_util_history) if g.mem_util_history else g.mem_util
            energy: float | None = None
            if g.energy_j is not None:
                energy0 = g.energy_j if energy0 is None else energy0
                energy = g.energy_j - energy0
            elif g.power_w is not None:
                if previous_power is not None:
                    integrated += (s.t - previous_power[0]) * (g.power_w + previous_power[1]) / 2
                previous_power = (s.t, g.power_w)
                energy = integrated
            row.update(
                gpu_util=_round(util, 1),
                gpu_mem_util=_round(mem_util, 1),
                gpu_mem_used_gb=_round(g.mem_used_gb, 4),
                gpu_power_w=_round(g.power_w, 2),
                gpu_sm_clock_mhz=_round(g.sm_clock_mhz, 0),
                gpu_energy_j=_round(energy, 3),
            )
        if h is not None:
            earlier = _rate_base(samples, i)
            if earlier is not None and earlier.host is not None:
                dt = s.t - earlier.t
                e = earlier.host
                row.update(
                    main_cpu_percent=_round(100 * max(0.0, h.main_cpu_s - e.main_cpu_s) / dt, 1),
                    loader_cpu_percent=_round(100 * max(0.0, h.loader_cpu_s - e.loader_cpu_s) / dt, 1),
                    system_cpu_percent=_round(100 * max(0.0, h.system_busy_s - e.system_busy_s) / dt, 1),
                )
            if h.memory_bytes is not None:
                row["host_memory_gb"] = round(h.memory_bytes / 1e9, 4)
        rows.append(row)
    return rows


def _rate_base(samples: list[Sample], i: int) -> Sample | None:
    """The latest sample at least MIN_RATE_WINDOW_S before sample i."""
    t = samples[i].t
    for j in range(i - 1, -1, -1):
        if t - samples[j].t >= MIN_RATE_WINDOW_S:
            return samples[j]
    return None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
