"""make_data's WebDataset layout: tar shards webdataset reads back, the same pictures as the
other layouts for the same seed."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import webdataset as wds
from PIL import Image

from harness.cli import main
from harness.workloads.make_data import make_image_folder, make_webdataset_shards


def test_webdataset_shards_hold_every_image_and_label_once(tmp_path: Path) -> None:
    written = make_webdataset_shards(tmp_path, images=7, shards=3, classes=2, size=40)
    paths = sorted(tmp_path.iterdir())
    assert [p.name for p in paths] == ["shard-00000.tar", "shard-00001.tar", "shard-00002.tar"]
    with tarfile.open(paths[0]) as tar:
        assert tar.getnames() == [f"000000{i}.{ext}" for i in range(3) for ext in ("cls", "jpg")]
    samples = list(wds.WebDataset([str(p) for p in paths], shardshuffle=False).decode("pil"))
    assert [s["__key__"] for s in samples] == [f"{i:07d}" for i in range(7)]
    assert [s["cls"] for s in samples] == [i % 2 for i in range(7)]
    assert all(s["jpg"].size == (40, 40) for s in samples)
    assert written == sum(
        len(jpg) for (jpg,) in wds.WebDataset([str(p) for p in paths], shardshuffle=False).to_tuple("jpg")
    )


def test_webdataset_shards_hold_the_image_folders_pictures(tmp_path: Path) -> None:
    make_webdataset_shards(tmp_path / "wds", images=4, shards=2, size=32, seed=3)
    make_image_folder(tmp_path / "files", images=4, classes=10, size=32, seed=3)
    stored = {
        s["__key__"]: s["jpg"]
        for s in wds.WebDataset(sorted(map(str, (tmp_path / "wds").iterdir())), shardshuffle=False)
    }
    for i in range(4):
        assert stored[f"{i:07d}"] == (tmp_path / "files" / f"class{i:03d}" / f"img{i:07d}.jpg").read_bytes()
    assert Image.open(io.BytesIO(stored["0000000"])).format == "JPEG"


def test_make_data_writes_webdataset_shards_and_needs_a_shard_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["make-data", str(tmp_path), "--images", "6", "--size", "32", "--shards", "2", "--webdataset"])
        == 0
    )
    assert "6 images" in capsys.readouterr().out and len(list(tmp_path.glob("*.tar"))) == 2
    assert main(["make-data", str(tmp_path / "x"), "--images", "6", "--webdataset"]) == 2
    assert "make-data: --webdataset needs --shards N (how many tar files)" in capsys.readouterr().err
