"""What a GPU result records: the GPU's identity as NVML knows it, and the rank's memory peaks."""

from __future__ import annotations

import pytest
import torch

from harness.execution.device import peak_memory_gb, reset_peak_memory
from harness.execution.dist import DistEnv, init_process_group
from harness.execution.meta import collect_meta

pytestmark = pytest.mark.gpu


def test_meta_names_the_gpu_as_nvml_does(cuda0: torch.device) -> None:
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    init_process_group(DistEnv(local_world_size=1), cuda0)  # one rank: binds the device only
    meta = collect_meta(cuda0, DistEnv(local_world_size=1))
    assert meta["cuda_current_device"] == 0
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByUUID(meta["gpu_uuid"])
    bus_id = pynvml.nvmlDeviceGetPciInfo(handle).busId
    bus_id = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
    assert bus_id.upper() == meta["gpu_pci_bus_id"].upper()
    assert meta["cpu_affinity"] and meta["cpus_available"] >= 1
    node = meta["gpu_numa_node"]
    assert node is None or (isinstance(node, int) and node >= 0)


def test_peak_memory_is_this_process_own(cuda0: torch.device) -> None:
    reset_peak_memory(cuda0)
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device=cuda0)  # 268 MB
    allocated, reserved = peak_memory_gb(cuda0)
    assert allocated is not None and reserved is not None
    assert allocated >= 0.268 and reserved >= allocated
    del block
