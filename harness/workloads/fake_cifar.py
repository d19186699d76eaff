"""FakeCIFAR: CIFAR-shaped uint8 images held in memory; Resize, ToTensor, Normalize (C. Rand,
"PyTorch Model Performance Analysis and Optimization",
https://towardsdatascience.com/author/chaimrand/).

Optionally a reader that waits for storage: with `read_ms`, every read (load_raw, the storage stage
of the caching ladder) waits that long, as on a network file system; with `stall_ms` and
`stall_probability`, a read stalls now and then, as on a busy shared file system ("IOs on Jean Zay
are erratic": the IDRIS course, https://github.com/IDRIS-CNRS/DLO-JZ). Both are sleeps, as a read
waiting for storage uses no core: the loader's other workers keep theirs, and more workers overlap
more reads. Each read draws afresh whether it stalls, as storage that is busy now and then would:
from `seed` in the training process, and in a worker from `seed` and PyTorch's seed of that worker
(new at every iterator), so that workers do not stall in step and each repeat meets stalls of its
own, at the same rate for every configuration.
"""

from __future__ import annotations

import random
import time

import numpy as np
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import get_worker_info

from harness.workloads.contract import Normalization, PipelineDataset

MEAN = STD = (0.5, 0.5, 0.5)  # the article's normalisation constants


class FakeCIFAR(PipelineDataset):
    def __init__(
        self,
        *,
        size: int = 10000,
        image_size: int = 32,
        resize: int | None = 224,
        num_classes: int = 10,
        seed: int = 0,
        read_ms: float = 0.0,
        stall_ms: float = 0.0,
        stall_probability: float = 0.0,
    ) -> None:
        if size < 1 or image_size < 1 or num_classes < 1:
            raise ValueError(
                f"size, image_size and num_classes must be >= 1 (got {size}, {image_size}, {num_classes})"
            )
        if resize is not None and resize < 1:
            raise ValueError(f"resize must be >= 1 or null (got {resize})")
        if not stall_ms >= 0 or not 0 <= stall_probability <= 1:
            raise ValueError(
                f"stall_ms must be >= 0 and stall_probability in [0, 1] (got {stall_ms}, {stall_probability})"
            )
        if not read_ms >= 0:
            raise ValueError(f"read_ms must be >= 0 (got {read_ms})")
        self.read_s = read_ms / 1000
        self.seed, self.stall_s, self.stall_probability = seed, stall_ms / 1000, stall_probability
        self._draws = random.Random(seed)
        self._draws_of: int | None = None
        rng = np.random.default_rng(seed)
        self.data = rng.integers(0, 256, size=(size, image_size, image_size, 3), dtype=np.uint8)
        self.targets = rng.integers(0, num_classes, size=size).tolist()
        self.num_classes = num_classes
        self.resize = resize
        steps: list[object] = [T.Resize(resize)] if resize else []
        steps += [T.ToTensor(), T.Normalize(MEAN, STD)]
        self.transform = T.Compose(steps)

    def to_uint8(self) -> Normalization:
        """Yield uint8 tensors; the returned normalisation is applied on the device (its step 4)."""
        self.transform = T.Compose([*([T.Resize(self.resize)] if self.resize else []), T.PILToTensor()])
        return Normalization(MEAN, STD)

    def __len__(self) -> int:
        return len(self.data)

    def stalls(self) -> bool:
        """Whether this read stalls: a draw of its own (see the module)."""
        if self.stall_s == 0:
            return False
        worker = get_worker_info()
        of = None if worker is None else worker.seed
        if of != self._draws_of:  # a worker starts from a fork of the parent's draws: reseed
            self._draws, self._draws_of = random.Random(f"{self.seed}/{of}"), of
        return self._draws.random() < self.stall_probability

    def load_raw(self, index: int) -> tuple[Image.Image, int]:
        wait = self.read_s + (self.stall_s if self.stalls() else 0.0)
        if wait:
            time.sleep(wait)  # storage keeps the reader waiting; no core is used
        return Image.fromarray(self.data[index]), self.targets[index]
