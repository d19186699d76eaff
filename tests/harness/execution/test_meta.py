"""What a result was measured on: the GPU's identity and where the rank's CPUs sit against it,
read from a fake sysfs and a fake CUDA (there is no GPU here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.execution import meta
from harness.execution.dist import DistEnv
from harness.execution.meta import collect_meta, cpu_list_text, gpu_placement, numa_nodes_of, pci_numa_node


def fake_sysfs(root: Path) -> Path:
    """Two NUMA nodes of four CPUs; a GPU at 3b:00.0 on node 1, one at 1a:00.0 the kernel cannot place."""
    for node, cpus in ((0, "0-3"), (1, "4-7")):
        (root / f"devices/system/node/node{node}").mkdir(parents=True)
        (root / f"devices/system/node/node{node}/cpulist").write_text(cpus + "\n")
    for name, node in (("0000:3b:00.0", "1"), ("0000:1a:00.0", "-1")):
        (root / "bus/pci/devices" / name).mkdir(parents=True)
        (root / "bus/pci/devices" / name / "numa_node").write_text(node + "\n")
    return root


def test_the_gpu_numa_node_from_nvml_bus_id(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    assert pci_numa_node("00000000:3B:00.0", sysfs) == 1
    assert pci_numa_node("00000000:1A:00.0", sysfs) is None  # -1: the kernel does not know
    assert pci_numa_node("00000000:99:00.0", sysfs) is None


def test_the_rank_cpus_and_their_numa_nodes(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    assert numa_nodes_of([4, 5], sysfs) == [1]
    assert numa_nodes_of([3, 4], sysfs) == [0, 1]
    assert cpu_list_text([8, 0, 1, 2, 3, 10, 11]) == "0-3,8,10-11"


def test_a_gpu_rank_records_which_gpu_and_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uuid = "GPU-a1a1a1a1-0000-1111-2222-333333333333"
    monkeypatch.setattr(meta, "cuda_device_identity", lambda index: (uuid, "00000000:3B:00.0"))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    placement = gpu_placement(torch.device("cuda", 2), fake_sysfs(tmp_path))
    assert placement == {
        "gpu_uuid": uuid,
        "gpu_pci_bus_id": "00000000:3B:00.0",
        "gpu_numa_node": 1,
        "cuda_current_device": 2,
    }


def test_a_cpu_rank_has_no_gpu_placement_but_its_affinity() -> None:
    recorded = collect_meta(torch.device("cpu"), DistEnv(local_world_size=1))
    assert recorded["gpu_uuid"] == "" and recorded["gpu_numa_node"] is None
    assert recorded["cpus_available"] == len(meta.parse_cpu_list(recorded["cpu_affinity"]))
    assert recorded["local_world_size"] == 1
