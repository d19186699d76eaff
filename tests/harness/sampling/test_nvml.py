"""The GPU sampler against a fake pynvml (on any machine, with a GPU or without; the real one is
read by tests/gpu/test_nvml.py): the right GPU is found, its figures reach the samples and the
phase summary, and every failure degrades to empty figures with one warning."""

from __future__ import annotations

import logging
import sys
import types
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from harness.sampling import nvml
from harness.sampling.nvml import GpuSampler, cuda_device_identity, history_mean
from harness.sampling.timeline import SUMMARY_KEYS, RankSampler

CUDA0 = torch.device("cuda", 0)


@dataclass
class FakeGpu:
    uuid: str
    pci: str
    util: float = 0.0
    mem_util: float = 0.0
    used_bytes: int = 0
    power_mw: int = 0
    sm_clock: int = 1410
    energy_mj: int | None = 0
    """None: the GPU has no energy counter (pre-Volta)."""
    history: list[tuple[int, float]] | None = None
    """Driver utilization samples (µs, %); None: nvmlDeviceGetSamples not supported."""
    failing: set[str] = field(default_factory=set)


class FakeNvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__({3: "Not Supported", 6: "Not Found", 15: "GPU is lost"}.get(value, f"error {value}"))
        self.value = value


class FakePynvml(types.ModuleType):
    """The subset of nvidia-ml-py the sampler calls, with pynvml's names and units."""

    NVMLError = FakeNvmlError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_CLOCK_SM = 1
    NVML_GPU_UTILIZATION_SAMPLES = 1
    NVML_MEMORY_UTILIZATION_SAMPLES = 2

    def __init__(self, gpus: list[FakeGpu], *, init_error: Exception | None = None) -> None:
        super().__init__("pynvml")
        self.gpus, self.init_error, self.init_calls = gpus, init_error, 0

    def _call(self, name: str, handle: FakeGpu) -> None:
        if name in handle.failing:
            raise FakeNvmlError(self.NVML_ERROR_GPU_IS_LOST)

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise self.init_error

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
        raise FakeNvmlError(self.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> FakeGpu:
        for gpu in self.gpus:
            if gpu.pci == bus_id:
                return gpu
        raise FakeNvmlError(self.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUtilizationRates(self, handle: FakeGpu) -> Any:
        self._call("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=handle.util, memory=handle.mem_util)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu) -> Any:
        self._call("nvmlDeviceGetMemoryInfo", handle)
        return SimpleNamespace(used=handle.used_bytes, total=80e9, free=80e9 - handle.used_bytes)

    def nvmlDeviceGetPowerUsage(self, handle: FakeGpu) -> int:
        self._call("nvmlDeviceGetPowerUsage", handle)
        return handle.power_mw

    def nvmlDeviceGetClockInfo(self, handle: FakeGpu, clock_type: int) -> int:
        assert clock_type == self.NVML_CLOCK_SM
        self._call("nvmlDeviceGetClockInfo", handle)
        return handle.sm_clock

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeGpu) -> int:
        if handle.energy_mj is None:
            raise FakeNvmlError(self.NVML_ERROR_NOT_SUPPORTED)
        self._call("nvmlDeviceGetTotalEnergyConsumption", handle)
        return handle.energy_mj

    def nvmlDeviceGetSamples(self, handle: FakeGpu, sampling_type: int, last_seen: int) -> Any:
        if handle.history is None:
            raise FakeNvmlError(self.NVML_ERROR_NOT_SUPPORTED)
        self._call("nvmlDeviceGetSamples", handle)
        if sampling_type != self.NVML_GPU_UTILIZATION_SAMPLES:
            raise FakeNvmlError(self.NVML_ERROR_NOT_SUPPORTED)
        new = [
            SimpleNamespace(timeStamp=ts, sampleValue=SimpleNamespace(uiVal=v))
            for ts, v in handle.history
            if ts > last_seen
        ]
        if not new:
            raise FakeNvmlError(self.NVML_ERROR_NOT_FOUND)  # what NVML does when nothing is newer
        return 1, new  # NVML_VALUE_TYPE_UNSIGNED_INT


GPU_A = "GPU-a1a1a1a1-0000-1111-2222-333333333333"
GPU_B = "GPU-b2b2b2b2-0000-1111-2222-333333333333"


@pytest.fixture
def fresh_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that has not tried nvmlInit yet (the real guard is process-wide)."""
    monkeypatch.setattr(nvml, "_process_nvml", nvml._ProcessNvml())


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, fresh_nvml: None) -> FakePynvml:
    """One GPU, CUDA's device 0, found by UUID."""
    module = FakePynvml([FakeGpu(uuid=GPU_A, pci="00000000:3B:00.0")])
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(nvml, "cuda_device_identity", lambda index: (GPU_A, None))
    return module


def gpu_sampler(**kwargs: Any) -> RankSampler:
    """Host off; a period of 1000 s so that only the samples a test takes happen."""
    return RankSampler(hz=0.001, host=False, gpu=True, device=CUDA0, **kwargs)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- finding the GPU -----------------------------------------------------------------------------


def test_cuda_identity_spells_uuid_and_bus_id_as_nvml_does(monkeypatch: pytest.MonkeyPatch) -> None:
    class CUuuid:  # torch._C._CUuuid: str() is the bare 8-4-4-4-12 hex form
        def __str__(self) -> str:
            return GPU_A.removeprefix("GPU-")

    props = SimpleNamespace(uuid=CUuuid(), pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    assert cuda_device_identity(0) == (GPU_A, "00000000:3B:00.0")


def test_cuda_identity_of_a_device_cuda_cannot_see_is_unknown() -> None:
    # A real call on any machine: without CUDA torch raises for every index, and with CUDA for
    # an index past the visible devices.
    assert cuda_device_identity(torch.cuda.device_count() + 1) == (None, None)


def test_cuda_identity_without_a_driver_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_driver(index: int) -> None:
        raise RuntimeError("Found no NVIDIA driver on your system.")  # torch's words without one

    monkeypatch.setattr(torch.cuda, "get_device_properties", no_driver)
    assert cuda_device_identity(0) == (None, None)


def test_gpu_found_by_uuid_when_nvml_order_differs_from_cuda(
    monkeypatch: pytest.MonkeyPatch, fresh_nvml: None
) -> None:
    # NVML lists B first (PCI order of the node); this rank's CUDA device 0 is A.
    module = FakePynvml(
        [
            FakeGpu(uuid=GPU_B, pci="00000000:1A:00.0", util=5),
            FakeGpu(uuid=GPU_A, pci="00000000:3B:00.0", util=95),
        ]
    )
    monkeypatch.setitem(sys.modules, "pynvml", module)
    props = SimpleNamespace(
        uuid=GPU_A.removeprefix("GPU-"), pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    reading = GpuSampler(device_index=0).read()
    assert reading is not None and reading.util == 95


def test_gpu_found_by_bus_id_when_uuid_is_unknown(fake: FakePynvml) -> None:
    sampler = GpuSampler(device_index=0, identity=(None, "00000000:3B:00.0"))
    fake.gpus[0].util = 42
    reading = sampler.read()
    assert reading is not None and reading.util == 42


def test_nvml_is_initialised_once_per_process(fake: FakePynvml) -> None:
    for _ in range(3):
        GpuSampler(device_index=0)
    assert fake.init_calls == 1


# -- figures -------------------------------------------------------------------------------------


def test_gpu_figures_reach_samples_and_phase_summary(fake: FakePynvml) -> None:
    gpu = fake.gpus[0]
    gpu.util, gpu.mem_util, gpu.power_mw, gpu.used_bytes = 50, 20, 100_000, 2_000_000_000
    gpu.energy_mj = 1_000_000  # 1000 J
    sampler = gpu_sampler().start()
    with sampler.phase("full/0") as ph:
        sampler.sample()  # util 50
        gpu.util, gpu.mem_util, gpu.power_mw, gpu.used_bytes = 70, 40, 300_000, 5_000_000_000
        gpu.energy_mj = 1_600_000  # the end sample reads util 70 and 1600 J
    sampler.stop()

    summary = ph.summary(samples=60)
    assert list(summary) == list(SUMMARY_KEYS)
    assert summary["gpu_util"] == pytest.approx(60)  # (50 + 70) / 2; the start sample looks back
    assert summary["gpu_mem_util"] == pytest.approx(30)
    assert summary["gpu_power_w"] == pytest.approx(200)
    assert summary["energy_j"] == pytest.approx(600)
    assert summary["energy_per_sample_j"] == pytest.approx(10)
    assert summary["peak_device_memory_gb"] == pytest.approx(5.0)
    assert summary["loader_cores"] is None and summary["cpus_allotted"] is None  # host is off

    rows = sampler.rows()
    assert [r["phase"] for r in rows] == ["", "full/0", "full/0", "full/0"]
    assert [r["gpu_util"] for r in rows] == [50, 50, 50, 70]
    assert [r["gpu_energy_j"] for r in rows] == [0, 0, 0, 600]
    assert rows[-1]["gpu_power_w"] == 300 and rows[-1]["gpu_mem_used_gb"] == 5.0
    assert rows[-1]["gpu_sm_clock_mhz"] == 1410


def test_driver_history_is_preferred_for_a_phase_mean(fake: FakePynvml) -> None:
    gpu = fake.gpus[0]
    gpu.history = [(1_000, 0.0)]  # buffered before the sampler started: not in any phase
    gpu.util = 10  # what polling would see at the instants it samples
    sampler = gpu_sampler().start()
    with sampler.phase("full/0") as ph:
        gpu.history += [(2_000_000, 90.0), (2_166_000, 80.0), (2_332_000, 100.0)]  # ~6/s
    summary = ph.summary()
    assert summary["gpu_util"] == pytest.approx(90)
    assert summary["gpu_mem_util"] == 0  # no memory history here: the polled value
    assert sampler.rows()[-1]["gpu_util"] == 90


def test_driver_history_with_gaps_is_not_trusted() -> None:
    samples = [(0, 90.0), (166_000, 90.0)]
    assert history_mean(samples, wall_s=0.5) == 90  # 2 x 0.166 s cover most of 0.5 s
    # The same two samples in a 10 s phase: the buffer stopped filling (an idle GPU on some
    # boards), so their 90 % says nothing about the other 9.7 s.
    assert history_mean(samples, wall_s=10.0) is None
    assert history_mean(samples[:1], wall_s=0.1) is None


def test_figure_the_gpu_lacks_stays_empty_quietly(fake: FakePynvml, caplog: pytest.LogCaptureFixture) -> None:
    gpu = fake.gpus[0]
    gpu.energy_mj, gpu.power_mw = None, 100_000  # no energy counter: energy comes from power
    sampler = gpu_sampler().start()
    with sampler.phase("full/0") as ph:
        sampler.sample()
    assert warnings_of(caplog) == []
    assert ph.seconds is not None
    assert ph.summary()["energy_j"] == pytest.approx(100 * ph.seconds)
    assert all(r["gpu_util"] == 0 for r in sampler.rows())


# -- degrading -----------------------------------------------------------------------------------


def test_call_failing_mid_run_empties_gpu_figures_with_one_warning(
    fake: FakePynvml, caplog: pytest.LogCaptureFixture
) -> None:
    fake.gpus[0].util = 50
    sampler = gpu_sampler().start()
    sampler.sample()
    fake.gpus[0].failing.add("nvmlDeviceGetPowerUsage")
    with sampler.phase("full/0") as ph:
        for _ in range(5):
            sampler.sample()
    sampler.stop()

    assert warnings_of(caplog) == [
        "GPU 0: nvmlDeviceGetPowerUsage failed mid-run (GPU is lost); GPU figures are empty from here on"
    ]
    rows = sampler.rows()
    assert rows[1]["gpu_util"] == 50
    gpu_columns = [c for c in rows[0] if c.startswith("gpu_")]
    assert all(r[c] is None for r in rows[2:] for c in gpu_columns)
    summary = ph.summary(samples=10)
    assert all(summary[k] is None for k in ("gpu_util", "gpu_power_w", "energy_j", "energy_per_sample_j"))


def test_missing_library_gives_empty_figures_and_one_warning(
    monkeypatch: pytest.MonkeyPatch, fresh_nvml: None, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    first, second = gpu_sampler(), gpu_sampler()  # e.g. two points run in one process
    with first.phase("full/0") as ph:
        pass
    assert all(v is None for v in ph.summary(samples=8).values())
    assert first.rows() == []  # nothing to sample: no samples at all
    (warning,) = warnings_of(caplog)
    assert warning.startswith("no GPU figures: nvidia-ml-py (pynvml) cannot be imported (")
    assert second.gpu_reason == warning


def test_nvml_init_failing_gives_one_warning(
    monkeypatch: pytest.MonkeyPatch, fresh_nvml: None, caplog: pytest.LogCaptureFixture
) -> None:
    module = FakePynvml([], init_error=RuntimeError("NVML Shared Library Not Found"))
    monkeypatch.setitem(sys.modules, "pynvml", module)
    sampler = RankSampler(hz=0.001, host=True, gpu=True, device=CUDA0).start()
    with sampler.phase("full/0") as ph:
        pass
    sampler.stop()
    assert warnings_of(caplog) == ["no GPU figures: nvmlInit failed (NVML Shared Library Not Found)"]
    summary = ph.summary()
    assert summary["gpu_util"] is None
    assert summary["main_cores"] is not None  # the host figures do not depend on the GPU


def test_no_nvml_gpu_matching_cuda_device_gives_one_warning(
    fake: FakePynvml, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(nvml, "cuda_device_identity", lambda index: (GPU_B, "00000000:99:00.0"))
    sampler = GpuSampler(device_index=0)
    assert sampler.read() is None
    assert warnings_of(caplog) == [
        f"no GPU figures: NVML has no GPU matching CUDA device 0 (uuid {GPU_B}, PCI bus id 00000000:99:00.0)"
    ]


def test_cpu_device_has_no_gpu_figures_and_no_warning(
    fake: FakePynvml, caplog: pytest.LogCaptureFixture
) -> None:
    sampler = RankSampler(hz=0.001, host=False, gpu=True, device=torch.device("cpu"))
    assert not sampler.enabled
    assert warnings_of(caplog) == []
    assert fake.init_calls == 0


def test_bad_device_index_is_refused() -> None:
    with pytest.raises(ValueError, match=r"device_index must be a CUDA device index >= 0 \(got -1\)"):
        GpuSampler(device_index=-1)
