"""timm: its PrefetchLoader wraps a torch DataLoader in `.loader` and moves each batch to the
device, uint8 to float, normalised there. The DataLoader's settings are the loader's; the
sample-level rungs read through a copy of the wrapper around their cached stage's DataLoader,
so the step gets batches of the same kind. Told by its shape (any wrapper that keeps its
DataLoader in `.loader`), as the core told it before this adapter: a look-alike is read alike."""

from __future__ import annotations

from typing import Any

from harness.adapters.base import NoAnswer, module_of


class Timm(NoAnswer):
    name = "timm"

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) == "timm" or self.dataloader(thing) is not None

    def dataloader(self, loader: Any) -> Any | None:
        from torch.utils.data import DataLoader

        if isinstance(loader, DataLoader):
            return None
        inner = getattr(loader, "loader", None)
        return inner if isinstance(inner, DataLoader) else None
