"""The NVML sampler on a real GPU: the rank's GPU is found, its figures are read, and its
utilisation follows the work: high under matrix products, back to idle after."""

from __future__ import annotations

import re
import time

import pytest
import torch

from harness.sampling.nvml import GpuSampler, cuda_device_identity
from harness.sampling.timeline import RankSampler

pytestmark = pytest.mark.gpu


def busy(device: torch.device, seconds: float) -> None:
    """Matrix products for `seconds`, synchronised often so that the work really lasts that long."""
    x = torch.randn(4096, 4096, device=device)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(20):
            x = x @ x
            x = x / x.norm()
        torch.cuda.synchronize(device)


def test_the_sampler_finds_the_gpu_cuda_calls_device_0() -> None:
    uuid, pci = cuda_device_identity(0)
    assert uuid is not None and uuid.startswith(("GPU-", "MIG-"))
    assert pci is not None and re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.0", pci)
    sampler = GpuSampler(device_index=0)
    assert sampler.available, sampler.reason


def test_power_memory_clock_and_energy_are_read(cuda0: torch.device) -> None:
    sampler = GpuSampler(device_index=0)
    assert sampler.available, sampler.reason
    before = sampler.read()
    busy(cuda0, 2.0)
    after = sampler.read()
    assert before is not None and after is not None
    assert after.power_w is not None and after.power_w > 0
    assert after.mem_used_gb is not None and after.mem_used_gb > 0  # our context at least
    assert after.sm_clock_mhz is not None and after.sm_clock_mhz > 0
    if before.energy_j is None:
        pytest.skip("this GPU has no energy counter (before Volta): energy comes from power")
    assert after.energy_j is not None and after.energy_j > before.energy_j


BUSY = 80.0
"""% utilisation a GPU doing nothing but 4096² matrix products must show (the kernels leave it
idle only between a few launches and a sync every 20 products)."""
IDLE = 20.0
"""% it must fall back under once no kernel runs (NVML's figure covers the last 1/6 s to 1 s)."""


def test_utilisation_rises_under_matrix_products_and_falls_back_after(cuda0: torch.device) -> None:
    """The sampler's phases as the harness summarises them (the driver's sample history where
    it keeps one, else the polled figure): a busy phase, then an idle one after a pause long
    enough for NVML's window to forget the busy one."""
    busy(cuda0, 0.5)  # CUDA and cuBLAS start-up outside the phases
    sampler = RankSampler(hz=10.0, host=False, gpu=True, device=cuda0)
    assert sampler.enabled, sampler.gpu_reason
    with sampler:
        with sampler.phase("busy") as loaded:
            busy(cuda0, 3.0)
        time.sleep(2.0)
        with sampler.phase("idle") as idle:
            time.sleep(3.0)
    busy_util, idle_util = loaded.summary()["gpu_util"], idle.summary()["gpu_util"]
    assert busy_util is not None and idle_util is not None
    assert busy_util >= BUSY, f"busy {busy_util} %, idle {idle_util} %"
    assert idle_util <= IDLE, f"busy {busy_util} %, idle {idle_util} % (another process on this GPU?)"
    samples = [r["gpu_util"] for r in sampler.rows() if r["phase"] == "busy"]
    assert samples and all(0 <= v <= 100 for v in samples)
