"""What the tests of the shipped training scripts (jobs/*_train.py) share: a script's point
measured in this process, on a fresh folder of 40 images."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.workloads.make_data import make_image_folder, make_image_shards, make_webdataset_shards


def measured_rows(
    tmp_path: Path, spec_text: Callable[[Path], str], make: Callable[[Path], object] | None = None
) -> Any:
    """The rows (analysis.load's frame) of the one point `spec_text(images folder)` plans,
    run inline; every unit must have measured. `make(folder)` writes another data set there
    (webdataset shards) instead of the 40 images."""
    from analysis.load import load_results
    from harness.config.plan import expand
    from harness.config.spec import parse_spec
    from harness.execution.dist import DistEnv
    from harness.execution.runner import run_point
    from harness.workloads.make_data import make_image_folder

    if make is None:
        make_image_folder(tmp_path / "images", images=40, size=32)
    else:
        make(tmp_path / "images")
    (point,) = expand(parse_spec(spec_text(tmp_path / "images"))).points
    outcome = run_point(point, tmp_path / "sweep", env=DistEnv(hostname="node-a"))
    assert outcome.failed == 0 and outcome.skipped == 0, [r.error for r in outcome.rows]
    return load_results([tmp_path / "sweep"]).rows


def shrunk(path: Path, tmp_path: Path, measure: str = "{warmup_steps: 1, steps: 2}") -> str:
    """The spec with the window `measure` (1 warmup and 2 measured steps), and its data paths
    under tmp_path."""
    text = re.sub(r"measure: \{[^}]*\}", lambda _: f"measure: {measure}", path.read_text())
    text = text.replace("/dev/shm/harness-data", str(tmp_path / "shm" / "harness-data"))
    text = text.replace("--data, data/course-images", f"--data, {tmp_path / 'course-images'}")
    text = text.replace("results/imagenet-checkpoints", str(tmp_path / "checkpoints"))
    text = text.replace("results/hf-trainer-out", str(tmp_path / "hf-trainer-out"))
    text = text.replace("--data_dir, data/accelerate-images", f"--data_dir, {tmp_path / 'accelerate-images'}")
    text = text.replace("args: [data/timm-images", f"args: [{tmp_path / 'timm-images'}")
    text = text.replace("args: [data/fabric-images", f"args: [{tmp_path / 'fabric-images'}")
    text = text.replace("args: [data/lightning-images", f"args: [{tmp_path / 'lightning-images'}")
    text = text.replace("results/lightning-trainer-out", str(tmp_path / "lightning-trainer-out"))
    text = text.replace('"data/openclip-wds/', f'"{tmp_path / "openclip-wds"}/')
    return text.replace("root: data/harness-data", f"root: {tmp_path / 'harness-data'}")


def make_script_data(path: Path, tmp_path: Path) -> None:
    """The data the shipped spec `path` reads, small, under tmp_path (where `shrunk` points
    it); skips where the spec's library is not installed."""
    if "io_lab" in path.stem:
        for root in (tmp_path / "harness-data", tmp_path / "shm" / "harness-data"):
            make_image_folder(root, images=40, size=64)
            make_image_shards(root / "shards", images=40, shards=4, size=64)
    if "shards_stream" in path.stem:
        make_webdataset_shards(tmp_path / "harness-data" / "wds", images=40, shards=4, size=64)
    if "litdata" in path.stem:
        pytest.importorskip("litdata", reason="the libs extra (pip install -e .[libs])")
        from harness.examples.litdata_images import write_dataset

        write_dataset(tmp_path / "harness-data" / "litdata", images=40, size=32)
    if "course_script" in path.stem:  # the script's own data set
        make_image_folder(tmp_path / "course-images", images=40, size=64)
    if "accelerate_script" in path.stem:
        pytest.importorskip("accelerate", reason="the libs extra (pip install -e .[libs])")
        make_image_folder(tmp_path / "accelerate-images", images=40, size=64)
    if "timm_script" in path.stem:
        pytest.importorskip("timm", reason="the libs extra (pip install -e .[libs])")
        make_image_folder(tmp_path / "timm-images", images=40, size=64)
    if "fabric_script" in path.stem:
        pytest.importorskip("lightning", reason="the libs extra (pip install -e .[libs])")
        make_image_folder(tmp_path / "fabric-images", images=40, size=64)
    if "lightning_trainer_script" in path.stem:
        pytest.importorskip("lightning", reason="the libs extra (pip install -e .[libs])")
        make_image_folder(tmp_path / "lightning-images", images=40, size=64)
    if "openclip_wds_script" in path.stem:
        make_webdataset_shards(tmp_path / "openclip-wds", images=40, shards=4, size=64)
    if "hf_trainer_script" in path.stem:  # its token blocks are made in memory
        pytest.importorskip("transformers", reason="the libs extra (pip install -e .[libs])")
