"""GPU figures of the rank's own GPU, read through NVML (nvidia-ml-py, imported as `pynvml`).

The GPU is found by its UUID (else its PCI bus id) as CUDA reports them for the rank's device,
never by an index: CUDA numbers the GPUs it is allowed to see (CUDA_VISIBLE_DEVICES, in
CUDA_DEVICE_ORDER), NVML numbers every GPU of the node in PCI order, and Slurm may hand out
node-global indices. Only the identity is the same for all three.

Nothing here raises into the caller. No NVML library, no matching GPU, nvmlInit failing or a call
failing mid-run: the GPU figures become None, one warning says why, and the benchmark goes on.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

BYTES_PER_GB = 1e9  # decimal GB, as cpu_memory_gb in the rows

# nvmlValueType_t -> the member of the nvmlValue_t union holding the value (nvml.h).
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

# The driver's utilization history is used for a phase's mean only when its samples cover at
# least this share of the phase: on some GPUs the buffer stops filling while the GPU is idle,
# and a mean over the busy moments alone would hide exactly the starvation we look for.
HISTORY_MIN_COVERAGE = 0.5

History = tuple[tuple[int, float], ...]
"""Driver samples: (timestamp in microseconds, value in %)."""


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One read of the GPU; a figure the GPU does not report is None."""

    util: float | None
    """Percent of the driver's last sample period (1/6 s to 1 s) in which a kernel ran."""
    mem_util: float | None
    """Percent of that period in which device memory was read or written."""
    mem_used_gb: float | None
    """Device memory used, all processes on the GPU included."""
    power_w: float | None
    sm_clock_mhz: float | None
    energy_j: float | None
    """The driver's energy counter (since it was loaded); only differences mean something."""
    util_history: History = ()
    """Driver utilization samples newer than the previous read."""
    mem_util_history: History = ()


def cuda_device_identity(device_index: int) -> tuple[str | None, str | None]:
    """(UUID as NVML spells it, "GPU-…"; PCI bus id as NVML spells it, "00000000:3B:00.0") of
    CUDA device `device_index` as this process sees it; None for what CUDA does not tell."""
    try:
        import torch

        props: Any = torch.cuda.get_device_properties(device_index)
    except Exception as e:  # no CUDA, bad index: the caller degrades to no GPU figures
        log.debug("CUDA device %s: no properties (%s)", device_index, e)
        return None, None
    raw_uuid = getattr(props, "uuid", None)  # torch._C._CUuuid; str() is bare 8-4-4-4-12 hex
    uuid = None
    if raw_uuid is not None and str(raw_uuid).strip():
        text = str(raw_uuid).strip()
        uuid = text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
    # pci_*_id are not in torch's type stubs but are read by torch.numa.binding (torch >= 2.8).
    parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    pci = None
    if all(isinstance(p, int) for p in parts):
        domain, bus, device = parts
        pci = f"{domain:08X}:{bus:02X}:{device:02X}.0"
    return uuid, pci


class _ProcessNvml:
    """nvmlInit once per process. NVML is process-wide and never shut down here: a sampler per
    point must not pay (or race on) init and shutdown each time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tried = False
        self.module: Any = None
        self.error = ""
        self.warned: set[str] = set()

    def get(self) -> tuple[Any, str]:
        with self.lock:
            if not self.tried:
                self.tried = True
                try:
                    module = importlib.import_module("pynvml")
                except ImportError as e:
                    self.error = f"nvidia-ml-py (pynvml) cannot be imported ({e})"
                else:
                    try:
                        module.nvmlInit()
                        self.module = module
                    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded...
                        self.error = f"nvmlInit failed ({e})"
            return self.module, self.error

    def warn_once(self, message: str) -> None:
        """Process-wide reasons (no library, no driver) are said once, not once per point."""
        with self.lock:
            if message in self.warned:
                return
            self.warned.add(message)
        log.warning("%s", message)


_process_nvml = _ProcessNvml()


class _CallFailed(Exception):
    def __init__(self, call: str, error: BaseException) -> None:
        super().__init__(f"{call}: {error}")
        self.call, self.error = call, error


class GpuSampler:
    """Reads one GPU. `read()` returns None once the GPU cannot be read; it never raises.

    Figures the GPU does not support (energy before Volta, power on some boards, the driver's
    sample buffers) are found out by one probing read at start and stay None, quietly. A call
    that worked and then fails turns the whole GPU off, with one warning: a GPU that fell off
    the bus or a driver reset makes every later figure suspect.
    """

    def __init__(
        self,
        *,
        device_index: int,
        identity: tuple[str | None, str | None] | None = None,
    ) -> None:
        if isinstance(device_index, bool) or not isinstance(device_index, int) or device_index < 0:
            raise ValueError(f"device_index must be a CUDA device index >= 0 (got {device_index!r})")
        self.device_index = device_index
        self.reason = ""
        """Why there are no GPU figures ("" while there are)."""
        self._nvml: Any = None
        self._handle: Any = None
        self._last_seen: dict[int, int] = {}
        self._reads: list[tuple[str, Callable[[], Any]]] = []
        self._open(identity)

    @property
    def available(self) -> bool:
        return self._handle is not None

    def read(self, *, memory: bool | None = None, exact: bool = False) -> GpuReading | None:
        """Every figure now (the Sampler protocol, base.py: nothing is deferred here, so
        `memory` and `exact` change nothing)."""
        if self._handle is None:
            return None
        values: dict[str, Any] = {}
        try:
            for name, call in self._reads:
                try:
                    values[name] = call()
                except Exception as e:
                    raise _CallFailed(name, e) from e
        except _CallFailed as e:
            self._give_up(
                f"GPU {self.device_index}: {e.call} failed mid-run ({e.error}); "
                "GPU figures are empty from here on"
            )
            return None
        return _reading(values)

    # -- opening ---------------------------------------------------------------------------------

    def _open(self, identity: tuple[str | None, str | None] | None) -> None:
        nvml, error = _process_nvml.get()
        if nvml is None:
            self.reason = f"no GPU figures: {error}"
            _process_nvml.warn_once(self.reason)
            return
        uuid, pci = identity if identity is not None else cuda_device_identity(self.device_index)
        handle = _find_handle(nvml, uuid, pci)
        if handle is None:
            self.reason = (
                f"no GPU figures: NVML has no GPU matching CUDA device {self.device_index} "
                f"(uuid {uuid}, PCI bus id {pci})"
            )
            _process_nvml.warn_once(self.reason)
            return
        self._nvml, self._handle = nvml, handle
        self._reads = self._probe(nvml, handle)
        if not self._reads:
            self._give_up(f"no GPU figures: GPU {self.device_index} answers none of the NVML queries")

    def _probe(self, nvml: Any, handle: Any) -> list[tuple[str, Callable[[], Any]]]:
        candidates: list[tuple[str, Callable[[], Any]]] = [
            ("nvmlDeviceGetUtilizationRates", lambda: nvml.nvmlDeviceGetUtilizationRates(handle)),
            ("nvmlDeviceGetMemoryInfo", lambda: nvml.nvmlDeviceGetMemoryInfo(handle)),
            ("nvmlDeviceGetPowerUsage", lambda: nvml.nvmlDeviceGetPowerUsage(handle)),
            ("nvmlDeviceGetClockInfo", lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            (
                "nvmlDeviceGetTotalEnergyConsumption",
                lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle),
            ),
        ]
        for name, constant in (
            ("gpu_history", "NVML_GPU_UTILIZATION_SAMPLES"),
            ("mem_history", "NVML_MEMORY_UTILIZATION_SAMPLES"),
        ):
            sampling_type = getattr(nvml, constant, None)
            if sampling_type is not None and hasattr(nvml, "nvmlDeviceGetSamples"):
                candidates.append((name, self._history_reader(nvml, handle, sampling_type)))
        working = []
        for name, call in candidates:
            try:
                call()  # the first history read also drains what the driver buffered before us
            except Exception as e:
                log.info("GPU %d: %s not available (%s); that figure stays empty", self.device_index, name, e)
                continue
            working.append((name, call))
        return working

    def _history_reader(self, nvml: Any, handle: Any, sampling_type: int) -> Callable[[], History]:
        """nvmlDeviceGetSamples from the last timestamp seen: the driver keeps a finer history
        (about 6 samples/s) than a Python thread should poll, so we read it and not faster."""
        self._last_seen[sampling_type] = 0  # 0: everything the driver still holds

        def read() -> History:
            last = self._last_seen[sampling_type]
            try:
                value_type, samples = nvml.nvmlDeviceGetSamples(handle, sampling_type, last)
            except nvml.NVMLError as e:
                if getattr(e, "value", None) == nvml.NVML_ERROR_NOT_FOUND:
                    return ()  # nothing newer than `last` (also: an idle GPU on some boards)
                raise
            member = _VALUE_MEMBERS.get(value_type, "uiVal")
            new = tuple(
                (int(s.timeStamp), float(getattr(s.sampleValue, member)))
                for s in samples
                if int(s.timeStamp) > last
            )
            if new:
                self._last_seen[sampling_type] = max(ts for ts, _ in new)
            return new

        return read

    def _give_up(self, reason: str) -> None:
        self.reason = reason
        self._handle = None
        log.warning("%s", reason)


def _find_handle(nvml: Any, uuid: str | None, pci: str | None) -> Any:
    candidates: list[tuple[str, str]] = []
    if uuid:
        candidates.append(("nvmlDeviceGetHandleByUUID", uuid))
        if uuid.startswith("GPU-"):
            # A MIG instance: CUDA's UUID is the instance's, which NVML spells "MIG-…".
            candidates.append(("nvmlDeviceGetHandleByUUID", "MIG-" + uuid[4:]))
    if pci:
        candidates.append(("nvmlDeviceGetHandleByPciBusId", pci))
    for call, key in candidates:
        try:
            return getattr(nvml, call)(key)
        except Exception as e:
            log.debug("%s(%s): %s", call, key, e)
    return None


def _reading(values: dict[str, Any]) -> GpuReading:
    rates = values.get("nvmlDeviceGetUtilizationRates")
    memory = values.get("nvmlDeviceGetMemoryInfo")
    power_mw = values.get("nvmlDeviceGetPowerUsage")
    energy_mj = values.get("nvmlDeviceGetTotalEnergyConsumption")
    clock = values.get("nvmlDeviceGetClockInfo")
    return GpuReading(
        util=float(rates.gpu) if rates is not None else None,
        mem_util=float(rates.memory) if rates is not None else None,
        mem_used_gb=memory.used / BYTES_PER_GB if memory is not None else None,
        power_w=power_mw / 1000 if power_mw is not None else None,
        sm_clock_mhz=float(clock) if clock is not None else None,
        energy_j=energy_mj / 1000 if energy_mj is not None else None,
        util_history=values.get("gpu_history", ()),
        mem_util_history=values.get("mem_history", ()),
    )


def history_mean(samples: Sequence[tuple[int, float]], wall_s: float) -> float | None:
    """Mean of the driver's samples over a phase of `wall_s` seconds, or None when they do not
    cover enough of it to be trusted (too few, or gaps: see HISTORY_MIN_COVERAGE).

    Only timestamp differences are used: the driver's clock domain varies between platforms."""
    if len(samples) < 2 or wall_s <= 0:
        return None
    stamps = sorted(ts for ts, _ in samples)
    period_us = statistics.median(b - a for a, b in itertools.pairwise(stamps))
    if period_us <= 0:
        return None
    covered_s = len(samples) * period_us / 1e6
    if covered_s < HISTORY_MIN_COVERAGE * wall_s:
        return None
    return statistics.fmean(v for _, v in samples)
