"""The Sampler protocol (harness/sampling/base.py): the host's and the GPU's sources both hold
it, so that the sampling thread reads either the same way."""

from __future__ import annotations

import sys

import pytest

from harness.sampling import nvml
from harness.sampling.base import Sampler
from harness.sampling.host import HostReading, HostSampler
from harness.sampling.nvml import GpuSampler


def test_the_host_source_is_a_sampler_whose_exact_read_has_the_memory() -> None:
    host = HostSampler()
    assert isinstance(host, Sampler) and host.available and host.reason == ""
    reading = host.read(exact=True, memory=True)
    assert isinstance(reading, HostReading) and reading.memory_bytes and reading.memory_bytes > 0
    assert host.read(memory=False).memory_bytes is None  # type: ignore[union-attr]


def test_a_gpu_that_cannot_be_read_is_a_sampler_that_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml, "_process_nvml", nvml._ProcessNvml())  # NVML not tried yet here
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML library: `import pynvml` fails
    gpu = GpuSampler(device_index=0)
    assert isinstance(gpu, Sampler)
    assert not gpu.available and gpu.reason.startswith("no GPU figures")
    assert gpu.read() is None and gpu.read(memory=True, exact=True) is None
