"""`harness tune` over the copy settings on a real GPU: each copy mode's step is its own
bound rung, the copy included (analysis/tune/model.with_copy_mode). On a CPU PyTorch pins
nothing, so this is where the pinned mode first differs from the pageable one.

Batches of 64 images of 3×224×224 floats (38.5 MB): a copy of milliseconds over PCIe or
NVLink-C2C, against a toy model's step of about as much.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.tune.model import Config
from harness.config.plan import expand
from harness.config.spec import load_spec
from harness.tune.driver import tune

pytestmark = pytest.mark.gpu

SPEC = """\
name: tune-copy
workload:
  dataset: fake_cifar
  dataset_args: {size: 512, image_size: 224, resize: null}
  model: toy_conv
  model_args: {width: 8, depth: 2}
  batch_size: 64
  device: cuda
measure: {warmup_steps: 3, steps: 20, repeats: 1}
rungs: [full]
loader:
  num_workers: [0, 2, 4]
  pin_memory: [false, true]
  persistent_workers: true
"""


def test_tune_measures_the_pinned_copy_as_its_own_step(tmp_path: Path) -> None:
    path = tmp_path / "tune-copy.yaml"
    path.write_text(SPEC)
    sweep_dir, summary = tune(expand(load_spec(path)), tmp_path / "results")
    profile = summary["profile"]
    assert profile["copy_mode"] == "pin_memory=false non_blocking=false"
    pinned_step, _ = profile["copy_modes"]["pin_memory=true non_blocking=false"]
    # The copy from pinned memory is a DMA straight from the batch; from pageable memory the
    # driver stages it through a pinned buffer of its own: never faster, within the noise of
    # one window each.
    assert pinned_step <= 1.10 * profile["step_s"], (pinned_step, profile["step_s"])
    answer = Config.of(summary["answer"])
    assert answer.num_workers > 0  # 64 images of 224² a batch: the main thread alone starves
    assert (sweep_dir / "tune.json").exists()
