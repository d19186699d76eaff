from __future__ import annotations

import pytest
import torch

from harness.execution.device import (
    DeviceError,
    choose_device,
    device_sync,
    peak_memory_gb,
    reset_peak_memory,
)

CPU = torch.device("cpu")


def test_devices_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without one
    assert choose_device("auto") == CPU
    assert choose_device("cpu", local_rank=3) == CPU
    with pytest.raises(
        DeviceError, match=r"device cuda requested, but torch.cuda.is_available\(\) is False here"
    ):
        choose_device("cuda")
    device_sync(CPU)()  # a no-op on the CPU, and it must not fail


def test_auto_takes_the_ranks_gpu_where_one_is_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert choose_device("auto", local_rank=1, local_world_size=2) == torch.device("cuda", 1)
    assert choose_device("cpu", local_rank=1, local_world_size=2) == CPU


def test_peak_memory_reads_the_caching_allocator_of_the_rank_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda1 = torch.device("cuda", 1)
    reset: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset.append)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d: 2_500_000_000 if d == cuda1 else 0)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d: 4_000_000_000 if d == cuda1 else 0)
    reset_peak_memory(cuda1)
    assert reset == [cuda1]
    assert peak_memory_gb(cuda1) == (2.5, 4.0)
    reset_peak_memory(CPU)
    assert reset == [cuda1] and peak_memory_gb(CPU) == (None, None)
