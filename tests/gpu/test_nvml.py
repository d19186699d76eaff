"""The NVML sampler on a real GPU: the rank's GPU is found, and its figures are plausible."""

from __future__ import annotations

import re
import time

import pytest
import torch

from harness.sampling.nvml import GpuSampler, cuda_device_identity

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


def test_utilisation_power_and_energy_are_plausible(cuda0: torch.device) -> None:
    sampler = GpuSampler(device_index=0)
    assert sampler.available, sampler.reason
    before = sampler.read()
    busy(cuda0, 2.0)
    after = sampler.read()
    assert before is not None and after is not None
    for reading in (before, after):
        assert reading.util is not None and 0 <= reading.util <= 100
        assert reading.mem_util is not None and 0 <= reading.mem_util <= 100
    assert after.power_w is not None and after.power_w > 0
    assert after.mem_used_gb is not None and after.mem_used_gb > 0  # our context at least
    assert after.sm_clock_mhz is not None and after.sm_clock_mhz > 0
    if before.energy_j is None:
        pytest.skip("this GPU has no energy counter (before Volta): energy comes from power")
    assert after.energy_j is not None and after.energy_j > before.energy_j
    assert all(0 <= value <= 100 for _, value in after.util_history)
