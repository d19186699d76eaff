"""One sampling thread per rank: host and GPU figures at `hz`, named phases, per-phase summaries;
its timeline is written as samples-rank<k>.csv by harness/sampling/timeline_file.py.

    sampler = RankSampler(hz=10.0, device=device, rank=env.rank)
    timeline = TimelineFile(point_dir / timeline_name(rank))  # keeps the earlier runs' samples
    with sampler:                              # start() ... stop()
        with sampler.phase("full/0") as ph:    # a sample at each boundary, so short phases work
            ...measured work...
        row_fields = ph.summary(samples=n)     # SUMMARY_KEYS -> value or None
        timeline.write(sampler)                # the timeline so far (after each rung)
    timeline.write(sampler)

The thread and the phase boundaries take samples under one lock, so the timeline is in order.
Every figure in a sample is cumulative (CPU seconds, energy) or instantaneous (power, memory);
rates are differences between two samples, computed when asked, never in the thread.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from harness.sampling.base import Sampler
from harness.sampling.host import DEFAULT_MEMORY_INTERVAL_S, HostReading, HostSampler
from harness.sampling.nvml import GpuReading, GpuSampler, history_mean
from harness.sampling.timeline_file import SAMPLE_COLUMNS, Sample, mean, timeline_rows
from harness_schema.atomic import atomic_write_text
from harness_schema.rows import csv_text

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

SUMMARY_KEYS: tuple[str, ...] = (
    "gpu_util",
    "gpu_mem_util",
    "gpu_power_w",
    "energy_j",
    "energy_per_sample_j",
    "peak_device_memory_gb",
    "loader_cores",
    "main_cores",
    "cpus_allotted",
    "peak_host_memory_gb",
    "foreign_cpu_share",
)
"""Keys of Phase.summary(), the sampled columns of storage.rows.RungRow."""


class Phase:
    """A named stretch of the run. A context manager (`with sampler.phase(name) as ph`) or
    `ph = sampler.begin(name)` ... `ph.end()`. Summarise it after it ends."""

    def __init__(self, sampler: RankSampler, name: str) -> None:
        self.sampler, self.name = sampler, name
        self.begin_index: int | None = None
        self.end_index: int | None = None

    def begin(self) -> Phase:
        if self.begin_index is None:
            self.sampler._begin(self)
        return self

    def end(self, *, memory: bool = True) -> None:
        """`memory`: read the process tree's memory at this last sample (tens of ms: PSS). Pass
        False where a measured region starts right after (a warmup phase's end)."""
        if self.begin_index is not None and self.end_index is None:
            self.sampler._end(self, memory=memory)

    def __enter__(self) -> Phase:
        return self.begin()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end()

    @property
    def seconds(self) -> float | None:
        """Seconds between the phase's boundary samples; None while open or when sampling is off."""
        return self.sampler._seconds(self)

    def summary(self, *, samples: int | None = None) -> dict[str, Any]:
        """SUMMARY_KEYS -> value, None where not measured. `samples`: data samples processed in
        the phase, for energy_per_sample_j."""
        if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 0):
            raise ValueError(f"samples must be a number of data samples >= 0 (got {samples!r})")
        return self.sampler._summary(self, samples)


class RankSampler:
    """Samples the rank's host figures and (with `gpu` and a CUDA device) its GPU at `hz`.

    A sampler with neither source costs nothing: no thread, no reads, all-None summaries. Reads
    that fail never raise into the caller: the failing source turns off with one warning.
    """

    def __init__(
        self,
        *,
        hz: float = 10.0,
        host: bool = True,
        gpu: bool = True,
        device: torch.device | None = None,
        rank: int = 0,
        memory_interval_s: float = DEFAULT_MEMORY_INTERVAL_S,
    ) -> None:
        if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not math.isfinite(hz) or hz <= 0:
            raise ValueError(f"hz must be a positive number of samples per second (got {hz!r})")
        for name, flag in (("host", host), ("gpu", gpu)):
            if not isinstance(flag, bool):
                raise ValueError(f"{name} must be true or false (got {flag!r})")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"rank must be an integer >= 0 (got {rank!r})")
        if device is not None and not hasattr(device, "type"):
            raise ValueError(f"device must be a torch.device or None (got {device!r})")
        self.hz, self.rank = float(hz), rank
        # The host's source also says which CPUs its busy time sums (the summary's rates); the
        # GPU's is any Sampler of GPU readings (base.py).
        self._host = HostSampler(memory_interval_s=memory_interval_s) if host else None
        self._gpu: Sampler[GpuReading] | None = None
        self.gpu_reason = "" if gpu else "not asked for"
        """Why there are no GPU figures ("" when there are)."""
        if gpu:
            self._gpu, self.gpu_reason = _gpu_sampler(device)
        self._lock = threading.Lock()
        self._samples: list[Sample] = []
        self._open: list[Phase] = []
        self._t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._host_failed = False
        self._thread_cpu_s = 0.0

    def threads_as_loader(self, on: bool) -> None:
        """Count the process's loader threads as loader cores (a thread-based loader: host.py)."""
        if self._host is not None:
            self._host.threads_as_loader = on

    @property
    def enabled(self) -> bool:
        return self._host is not None or self._gpu is not None

    # -- thread ----------------------------------------------------------------------------------

    def start(self) -> RankSampler:
        if not self.enabled or self._thread is not None:
            return self
        with self._lock:
            if not self._samples:
                self._t0 = time.perf_counter()
            self._take()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"rank{self.rank}-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the thread (it waits on an event, so this returns within one read, ~ms)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=2.0)
        if self._thread.is_alive():
            log.warning("rank %d: the sampler thread did not stop within 2 s", self.rank)
        self._thread = None

    def __enter__(self) -> RankSampler:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def thread_cpu_s(self) -> float:
        """CPU seconds the sampling thread has used so far: its own cost, to check it stays
        small. Samples at phase boundaries run in the caller's thread and are not included."""
        return self._thread_cpu_s

    def _run(self) -> None:
        period = 1.0 / self.hz
        next_at = time.perf_counter() + period
        cpu0 = time.thread_time()
        while not self._stop.wait(max(0.0, next_at - time.perf_counter())):
            with self._lock:
                self._take()
            self._thread_cpu_s += time.thread_time() - cpu0
            cpu0 = time.thread_time()
            next_at += period
            now = time.perf_counter()
            if next_at < now:  # a slow read: skip the missed ticks rather than catch up in a burst
                next_at = now + period

    # -- samples ---------------------------------------------------------------------------------

    def sample(self) -> None:
        """Take one sample now (the thread does this at `hz`)."""
        if self.enabled:
            with self._lock:
                self._take()

    def _take(self, *, memory: bool | None = None, exact: bool = False) -> int:
        """Under the lock. Returns the sample's index. `exact` at phase boundaries (see
        HostSampler.read)."""
        gpu = self._gpu.read() if self._gpu is not None else None
        # Stamped right before the host read, whose CPU times come first and its (slow) memory
        # read last: the rates divide CPU seconds by the time between stamps.
        t, wall_time = time.perf_counter() - self._t0, time.time()
        host = None
        if self._host is not None and not self._host_failed:
            try:
                host = self._host.read(memory=memory, exact=exact)
            except Exception as e:  # psutil surprises must not stop the benchmark
                self._host_failed = True
                log.warning(
                    "rank %d: host sampling failed (%s); host figures are empty from here on", self.rank, e
                )
        self._samples.append(
            Sample(
                t=t,
                wall_time=wall_time,
                phase=self._open[-1].name if self._open else "",
                gpu=gpu,
                host=host,
            )
        )
        return len(self._samples) - 1

    # -- phases ----------------------------------------------------------------------------------

    def phase(self, name: str) -> Phase:
        """A phase to use as a context manager; it begins on entry."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a phase needs a non-empty name (got {name!r})")
        return Phase(self, name)

    def begin(self, name: str) -> Phase:
        return self.phase(name).begin()

    def _begin(self, phase: Phase) -> None:
        if not self.enabled:
            phase.begin_index = -1
            return
        with self._lock:
            self._open.append(phase)
            phase.begin_index = self._take(memory=False, exact=True)

    def _end(self, phase: Phase, *, memory: bool) -> None:
        if not self.enabled:
            phase.end_index = -1
            return
        with self._lock:
            # Memory is read now whatever its interval (unless told not to): the workers are
            # still alive, and the peak of a rung is then.
            phase.end_index = self._take(memory=True if memory else None, exact=True)
            if phase in self._open:  # phases may end out of order
                self._open.remove(phase)

    def _seconds(self, phase: Phase) -> float | None:
        b, e = phase.begin_index, phase.end_index
        if b is None or e is None or b < 0:
            return None
        with self._lock:
            return self._samples[e].t - self._samples[b].t

    def _summary(self, phase: Phase, samples: int | None) -> dict[str, Any]:
        summary: dict[str, Any] = dict.fromkeys(SUMMARY_KEYS)
        if not self.enabled or phase.begin_index is None or phase.begin_index < 0:
            return summary
        with self._lock:
            end = phase.end_index if phase.end_index is not None else len(self._samples) - 1
            rows = self._samples[phase.begin_index : end + 1]
        if len(rows) < 2:
            return summary
        wall_s = rows[-1].t - rows[0].t
        if self._gpu is not None:
            summary.update(_gpu_summary(rows, wall_s))
        if self._host is not None:
            summary.update(_host_summary(rows, wall_s, self._host.cpus))
            summary["cpus_allotted"] = self._host.cpus_allotted
        if samples and summary["energy_j"] is not None:
            summary["energy_per_sample_j"] = summary["energy_j"] / samples
        return summary

    # -- the timeline ----------------------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """The timeline, one dict per sample with SAMPLE_COLUMNS as keys."""
        with self._lock:
            samples = list(self._samples)
        return timeline_rows(samples, self.rank)

    def write_timeline(self, path: Path) -> None:
        """Writes the timeline so far (atomically: a reader never sees half a file)."""
        atomic_write_text(Path(path), csv_text(self.rows(), SAMPLE_COLUMNS))


def _gpu_sampler(device: Any) -> tuple[Sampler[GpuReading] | None, str]:
    """The GPU source, or None and why. A CPU device is no reason to warn: there is no GPU."""
    if device is None or device.type != "cuda":
        return None, f"device {device} is not a CUDA device"
    index = device.index
    if index is None:
        try:
            import torch

            index = torch.cuda.current_device()
        except Exception as e:
            reason = f"no GPU figures: cannot tell which CUDA device {device} is ({e})"
            log.warning("%s", reason)
            return None, reason
    gpu = GpuSampler(device_index=index)
    # A GPU that cannot be read at all costs nothing afterwards (its warning is already out).
    return (gpu, "") if gpu.available else (None, gpu.reason)


def _gpu_summary(rows: list[Sample], wall_s: float) -> dict[str, Any]:
    readings = [r.gpu for r in rows]
    if readings[-1] is None:
        return {}  # the GPU stopped answering within the phase: no figure covers all of it
    # NVML's rates look back over the driver's last period, so the phase's first sample
    # describes the time before the phase: means use the samples after it.
    after = [g for g in readings[1:] if g is not None]
    util = history_mean([s for g in after for s in g.util_history], wall_s)
    mem_util = history_mean([s for g in after for s in g.mem_util_history], wall_s)
    first, last = readings[0], readings[-1]
    energy = None
    if first is not None and last is not None and first.energy_j is not None and last.energy_j is not None:
        energy = last.energy_j - first.energy_j
    else:
        energy = _integrate_power(rows)
    used = [g.mem_used_gb for g in readings if g is not None and g.mem_used_gb is not None]
    return {
        "gpu_util": util if util is not None else mean(g.util for g in after),
        "gpu_mem_util": mem_util if mem_util is not None else mean(g.mem_util for g in after),
        "gpu_power_w": mean(g.power_w for g in after),
        "energy_j": energy,
        "peak_device_memory_gb": max(used) if used else None,
    }


def _integrate_power(rows: list[Sample]) -> float | None:
    """Trapezoids over the power readings, for GPUs without an energy counter (pre-Volta)."""
    points = [(r.t, r.gpu.power_w) for r in rows if r.gpu is not None and r.gpu.power_w is not None]
    if len(points) < 2:
        return None
    return sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(points))


def _host_summary(rows: list[Sample], wall_s: float, cpus: int) -> dict[str, Any]:
    first, last = rows[0].host, rows[-1].host
    memory = [r.host.memory_bytes for r in rows if r.host is not None and r.host.memory_bytes is not None]
    out: dict[str, Any] = {"peak_host_memory_gb": max(memory) / 1e9 if memory else None}
    if first is not None and last is not None and wall_s > 0:
        out["loader_cores"] = (last.loader_cpu_s - first.loader_cpu_s) / wall_s
        out["main_cores"] = (last.main_cpu_s - first.main_cpu_s) / wall_s
        out["foreign_cpu_share"] = _foreign_share(first, last, wall_s, cpus)
    return out


def _foreign_share(first: HostReading, last: HostReading, wall_s: float, cpus: int) -> float | None:
    """The share of the rank's CPUs' time that went to neither its tree nor its job (see
    harness/sampling/host.py): busy time beside the rank's. CPU times tick at 10 ms, so a
    short window reads it within a few percent."""
    if first.allotted_busy_s is None or last.allotted_busy_s is None or cpus < 1:
        return None
    busy = last.allotted_busy_s - first.allotted_busy_s
    ours = (last.main_cpu_s - first.main_cpu_s) + (last.loader_cpu_s - first.loader_cpu_s)
    ours += last.mates_cpu_s - first.mates_cpu_s
    return min(1.0, max(0.0, (busy - ours) / (wall_s * cpus)))
