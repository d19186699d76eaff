from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from PIL import Image

from harness.workloads.contract import BytesDataset, SplitDataset
from harness.workloads.fake_cifar import FakeCIFAR
from harness.workloads.image_folder import ImageFolderDataset
from harness.workloads.make_data import make_image_folder
from harness.workloads.starved import StarvedDataset


def test_fake_cifar_is_load_raw_then_transform() -> None:
    ds = FakeCIFAR(size=10, image_size=32, resize=48)
    assert isinstance(ds, SplitDataset) and not isinstance(ds, BytesDataset)
    raw, target = ds.load_raw(3)
    assert isinstance(raw, Image.Image) and raw.size == (32, 32)
    image, same_target = ds[3]
    assert image.shape == (3, 48, 48) and same_target == target
    assert torch.equal(image, ds.transform(raw))
    assert float(image.min()) >= -1.0 and float(image.max()) <= 1.0  # Normalize(0.5, 0.5)


def test_fake_cifar_without_resize_keeps_the_image_size() -> None:
    assert FakeCIFAR(size=2, image_size=8, resize=None)[0][0].shape == (3, 8, 8)


def test_starved_sample_is_cropped_masked_and_scaled() -> None:
    ds = StarvedDataset(size=4, input_size=96, crop=64)
    raw, target = ds.load_raw(0)
    assert raw.size == (96, 96) and 0 <= target < 10
    image, _ = ds[0]
    assert image.shape == (3, 64, 64) and image.dtype == torch.float32
    # RandomMask zeroes about a quarter of pixels, dilated; ConvertColor then adds Cb/Cr offsets,
    # so masked pixels read (0, 128/255, 128/255).
    masked = (image[0] == 0) & torch.isclose(image[1], torch.tensor(128 / 255))
    assert 0.3 < masked.float().mean() < 0.9
    assert [type(t).__name__ for t in ds.transform.transforms] == [
        "PILToTensor",
        "RandomCrop",
        "RandomMask",
        "ConvertColor",
        "Scale",
    ]


def test_starved_refuses_a_crop_larger_than_the_image() -> None:
    with pytest.raises(ValueError, match=r"crop \(128\) must not exceed input_size \(64\)"):
        StarvedDataset(input_size=64, crop=128)


def test_image_folder_reads_what_make_data_wrote(tmp_path: Path) -> None:
    written = make_image_folder(tmp_path, images=6, classes=2, size=40)
    assert written == sum(f.stat().st_size for f in tmp_path.rglob("*.jpg"))
    ds = ImageFolderDataset(root=str(tmp_path), image_size=32)
    assert isinstance(ds, BytesDataset)
    assert len(ds) == 6 and ds.num_classes == 2
    data, label = ds.read_bytes(1)
    assert data[:2] == b"\xff\xd8"  # a JPEG
    assert ds.decode(data).size == (40, 40)
    image, same = ds[1]
    assert image.shape == (3, 32, 32) and same == label


def test_image_folder_missing_root_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(
        FileNotFoundError, match=r"is not a directory; write one with: harness make-data .*nope"
    ):
        ImageFolderDataset(root=str(tmp_path / "nope"))


def test_image_folder_without_images(tmp_path: Path) -> None:
    (tmp_path / "cats").mkdir()
    with pytest.raises(FileNotFoundError, match="no images"):
        ImageFolderDataset(root=str(tmp_path))


def test_shards_hold_the_same_images_as_the_folder(tmp_path: Path) -> None:
    from harness.workloads.image_shards import ImageShardsDataset
    from harness.workloads.make_data import make_image_shards

    folder_bytes = make_image_folder(tmp_path / "folder", images=7, classes=2, size=32)
    shard_bytes = make_image_shards(tmp_path / "shards", images=7, shards=3, classes=2, size=32)
    assert folder_bytes == shard_bytes  # same seed, same pictures: comparable layouts
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == [
        "index.json",
        "shard-00000.bin",
        "shard-00001.bin",
        "shard-00002.bin",
    ]
    folder = ImageFolderDataset(root=str(tmp_path / "folder"), image_size=16, augment=False)
    shards = ImageShardsDataset(
        root=str(tmp_path / "shards"), image_size=16, augment=False, page_cache="cold"
    )
    assert len(shards) == 7 and shards.num_classes == 2
    by_name = {p.name: p.read_bytes() for p, _ in folder.files}
    for i in range(7):
        data, label = shards.read_bytes(i)
        assert data == by_name[f"img{i:07d}.jpg"] and label == i % 2
    assert torch.equal(
        shards[3][0],
        ImageFolderDataset(
            root=str(tmp_path / "folder"), image_size=16, augment=False, page_cache="cold"
        ).transform(shards.load_raw(3)[0]),
    )


def test_shards_missing_index_says_how_to_make_them(tmp_path: Path) -> None:
    from harness.workloads.image_shards import ImageShardsDataset

    with pytest.raises(
        FileNotFoundError, match=r"has no index.json; write one with: harness make-data .* --shards 8"
    ):
        ImageShardsDataset(root=str(tmp_path))


def test_roots_expand_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_image_folder(tmp_path / "imgs", images=2, classes=1, size=16)
    monkeypatch.setenv("MYSCRATCH", str(tmp_path))
    assert len(ImageFolderDataset(root="$MYSCRATCH/imgs")) == 2


class StallDraws(FakeCIFAR):
    """FakeCIFAR whose samples are the reader's draws: (stalled?, worker id), no sleep."""

    def __getitem__(self, index: int) -> tuple[bool, int]:  # type: ignore[override]
        info = torch.utils.data.get_worker_info()
        return self.stalls(), -1 if info is None else info.id


def test_the_erratic_reader_stalls_at_its_rate_from_its_seed() -> None:
    one = StallDraws(size=1, stall_ms=1, stall_probability=0.2, seed=7)
    same = StallDraws(size=1, stall_ms=1, stall_probability=0.2, seed=7)
    other = StallDraws(size=1, stall_ms=1, stall_probability=0.2, seed=8)
    draws = [one[0][0] for _ in range(5000)]
    # 5000 draws at 20 %: a standard deviation of 0.57 %; 3 % is five of them.
    assert 0.17 < sum(draws) / len(draws) < 0.23
    assert [same[0][0] for _ in range(5000)] == draws  # the same seed, the same stalls
    assert [other[0][0] for _ in range(5000)] != draws
    assert not any(StallDraws(size=1, stall_probability=1.0)[0][0] for _ in range(10))  # stall_ms 0: never


def test_workers_and_iterators_draw_stalls_of_their_own() -> None:
    dataset = StallDraws(size=400, stall_ms=1, stall_probability=0.5)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    first, second = list(loader), list(loader)  # two iterators: new workers, new worker seeds
    by_worker = [[stalled for stalled, worker in first if worker == w] for w in (0, 1)]
    assert len(by_worker[0]) == len(by_worker[1]) == 200
    assert by_worker[0] != by_worker[1]  # forked from one parent, yet not in step
    assert [s for s, _ in first] != [s for s, _ in second]  # each repeat meets stalls of its own
    assert 0.4 < sum(s for s, _ in first) / 400 < 0.6


def test_a_stall_waits_without_using_a_core() -> None:
    ds = FakeCIFAR(size=2, image_size=8, resize=None, stall_ms=300, stall_probability=1.0)
    wall, cpu = time.perf_counter(), time.process_time()
    ds.load_raw(0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert wall >= 0.3  # the stall itself
    assert cpu < 0.1  # a third of it at most: a read that burned the stall on a core would use it all


def test_every_read_waits_read_ms_without_using_a_core() -> None:
    ds = FakeCIFAR(size=2, image_size=8, resize=None, read_ms=200)
    wall, cpu = time.perf_counter(), time.process_time()
    for index in (0, 1):
        ds.load_raw(index)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert wall >= 0.4  # two reads of 200 ms
    assert cpu < 0.1  # a quarter of it at most: waiting for storage is not computing
    with pytest.raises(ValueError, match=r"read_ms must be >= 0 \(got -1\)"):
        FakeCIFAR(size=2, read_ms=-1)


def test_the_erratic_reader_refuses_a_probability_outside_0_1() -> None:
    with pytest.raises(
        ValueError, match=r"stall_ms must be >= 0 and stall_probability in \[0, 1\] \(got 50, 1.5\)"
    ):
        FakeCIFAR(size=2, stall_ms=50, stall_probability=1.5)


def test_a_sample_that_cannot_be_decoded_names_its_file(tmp_path: Path) -> None:
    """PIL's own words name a stream of bytes (`cannot identify image file <_io.BytesIO ...>`):
    the error names the data set's file for the index."""
    from harness.workloads.contract import UnreadableSample

    make_image_folder(tmp_path, images=4, classes=2, size=16)
    ds = ImageFolderDataset(root=str(tmp_path), image_size=8)
    bad = ds.files[2][0]
    bad.write_bytes(b"not a jpeg")
    with pytest.raises(UnreadableSample, match=rf"^cannot read sample 2 \({bad}\): UnidentifiedImageError: "):
        ds[2]
    bad.unlink()
    with pytest.raises(UnreadableSample, match=rf"^cannot read sample 2 \({bad}\): FileNotFoundError: "):
        ds[2]
