"""The names a spec may give a workload's dataset and model: the built-ins (their import
paths, not objects, so that checking a spec imports no torch) and a user's
`package.module:factory`. Here, in the shared schema, because the settings' rules name them;
harness/workloads/registry.py turns a name into its factory."""

from __future__ import annotations

import re

DATASETS: dict[str, str] = {
    "fake_cifar": "harness.workloads.fake_cifar:FakeCIFAR",
    "starved": "harness.workloads.starved:StarvedDataset",
    "image_folder": "harness.workloads.image_folder:ImageFolderDataset",
    "image_shards": "harness.workloads.image_shards:ImageShardsDataset",
}

MODELS: dict[str, str] = {
    "resnet18": "harness.workloads.models:resnet18",
    "resnet50": "harness.workloads.models:resnet50",
    "toy_conv": "harness.workloads.models:toy_conv",
    "linear": "harness.workloads.models:linear",
    "emulated": "harness.workloads.emulated:emulated",
}

FACTORY_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
"""`package.module:factory`, the factory possibly an attribute path (`datasets:Dataset.from_dict`)."""


def is_factory_path(name: str) -> bool:
    return FACTORY_PATH.match(name) is not None
