"""The webdataset adapter: a WebLoader's DataLoader is its first stage, and its batch size the
last `batched(n)` (moved from tests/harness/execution/test_given_loader.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("webdataset", reason="the optional extra `libs` (webdataset) is not installed")


def test_a_webloaders_batch_size_is_the_one_its_pipeline_batches_with() -> None:
    """OpenCLIP's DataLoader has batch_size None: its workers batch (`wds.batched(n)` in the
    pipeline). The batch size a WebLoader delivers is its last batching: a re-batching after
    the DataLoader, else the DataLoader's own, else the pipeline's inside the workers."""
    import webdataset as wds

    from harness.execution.given_loader import batch_size
    from tests.fixtures.loaders import Numbered, web_loader

    assert batch_size(web_loader(batch_size=4, workers=0)) == 4
    assert batch_size(web_loader(batch_size=4, workers=0).unbatched().shuffle(8).batched(6)) == 6
    assert batch_size(wds.WebLoader(Numbered(8), batch_size=3)) == 3
    assert batch_size(wds.WebLoader(Numbered(8), batch_size=None)) is None


def test_a_webloaders_dataloader_is_its_first_stage() -> None:
    from torch.utils.data import DataLoader

    from harness.adapters.webdataset import WebDataset
    from harness.execution.given_loader import wrapped_dataloader
    from tests.fixtures.loaders import web_loader

    loader = web_loader(batch_size=4, workers=0)
    assert isinstance(WebDataset().dataloader(loader), DataLoader)
    assert wrapped_dataloader(loader) is loader.pipeline[0]
    assert WebDataset().dataloader(loader.pipeline[0]) is None  # a DataLoader wraps nothing
