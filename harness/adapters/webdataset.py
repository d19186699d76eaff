"""webdataset: its WebLoader is a DataPipeline whose first stage (`.pipeline[0]`) is the torch
DataLoader it iterates; its own stages then run on what that yields, in the main process. The
DataLoader's settings are the loader's. Its batch size is that of the last `batched(n)` stage
after the DataLoader (a re-batching: `.unbatched().shuffle(k).batched(n)`), else the
DataLoader's, else the last `batched(n)` of the pipeline the DataLoader reads (OpenCLIP's: the
workers make the batches, and the DataLoader's batch_size is None). `wds.batched(n)` and
`.batched(n)` are a FilterFunction of `webdataset.filters._batched`, its size the first
argument. Told by its shape, as the core told it before this adapter."""

from __future__ import annotations

from typing import Any

from harness.adapters.base import NoAnswer, module_of, size


class WebDataset(NoAnswer):
    name = "webdataset"

    def recognises(self, thing: Any) -> bool:
        return module_of(thing) == "webdataset" or self.dataloader(thing) is not None

    def dataloader(self, loader: Any) -> Any | None:
        from torch.utils.data import DataLoader

        if isinstance(loader, DataLoader):
            return None
        stages = getattr(loader, "pipeline", None)
        if isinstance(stages, list) and stages and isinstance(stages[0], DataLoader):
            return stages[0]
        return None

    def batch_size(self, loader: Any) -> int | None:
        """n of the last `batched(n)` stage of the pipeline `loader` is (a WebLoader: the
        stages after its DataLoader; the pipeline a DataLoader reads); None where it has none."""
        stages = _stages(loader)
        if stages and self.dataloader(loader) is not None:
            stages = stages[1:]
        return _batched(stages)


def _stages(holder: Any) -> list[Any]:
    """A DataPipeline's stages (`.pipeline`), else none."""
    stages = getattr(holder, "pipeline", None)
    return stages if isinstance(stages, list) else []


def _batched(stages: list[Any]) -> int | None:
    """n of the last `batched(n)` stage among `stages`."""
    for stage in reversed(stages):
        if getattr(getattr(stage, "f", None), "__name__", None) == "_batched":
            args, kw = getattr(stage, "args", ()), getattr(stage, "kw", {})
            return size(args[0] if args else kw.get("batchsize"))
    return None
