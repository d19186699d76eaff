"""The same images packed into a few large shard files (C. Rand's caching article, its tips: "group
small samples into larger files";
https://towardsdatascience.com/author/chaimrand/):
one open per shard per worker, then positioned reads, instead of an open per image. `harness
make-data DIR --shards K` writes them.

Layout: DIR/shard-<k>.bin (encoded images back to back) and DIR/index.json, a list of
{"shard", "offset", "length", "label"}. A root whose shards are in ROOT/shards/ works too, so
one root can hold both layouts of the same images (`make-data ROOT` and
`make-data ROOT/shards --shards K`).
"""

from __future__ import annotations

import json
import os

from harness.workloads.image_folder import EncodedImages, expand_root

INDEX = "index.json"


class ImageShardsDataset(EncodedImages):
    def __init__(
        self, *, root: str, image_size: int = 224, augment: bool = True, page_cache: str = "warm"
    ) -> None:
        super().__init__(image_size=image_size, augment=augment, page_cache=page_cache)
        base = expand_root(root)
        if not (base / INDEX).is_file() and (base / "shards" / INDEX).is_file():
            base = base / "shards"  # one root for both layouts: images beside, shards/ inside
        index_path = base / INDEX
        if not index_path.is_file():
            raise FileNotFoundError(
                f"image_shards root {str(base)!r} has no {INDEX}; write one with: "
                f"harness make-data {root} --shards 8"
            )
        self.entries: list[dict[str, int]] = json.loads(index_path.read_text())
        if not self.entries:
            raise FileNotFoundError(f"{index_path} lists no image")
        self.root = base
        self.num_classes = max(e["label"] for e in self.entries) + 1
        self._fds: dict[int, int] = {}  # per process: DataLoader workers open their own

    def __len__(self) -> int:
        return len(self.entries)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_fds"] = {}  # file descriptors do not cross a process boundary
        return state

    def sample_path(self, index: int) -> str:
        e = self.entries[index]
        shard = self.root / f"shard-{e['shard']:05d}.bin"
        return f"{shard}, bytes {e['offset']}-{e['offset'] + e['length']}"

    def read_bytes(self, index: int) -> tuple[bytes, int]:
        e = self.entries[index]
        fd = self._fds.get(e["shard"])
        if fd is None:
            fd = self._fds[e["shard"]] = os.open(self.root / f"shard-{e['shard']:05d}.bin", os.O_RDONLY)
        data = os.pread(fd, e["length"], e["offset"])
        self.drop_from_page_cache(fd, e["offset"], e["length"])
        return data, e["label"]
