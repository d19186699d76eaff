"""harness/execution/script_check.py: `harness plan`'s check run of a script, and what it says
back. Here: the probe's note on what it changed (Lightning's sanity validation skipped) reaches
`harness plan` whole, however much the script prints after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec

pytest.importorskip("lightning", reason="the libs extra (pip install -e .[libs]) has Lightning")

CHATTY_SCRIPT = """
import sys

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from harness import probe


def data() -> TensorDataset:
    return TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 2)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.layer(x), y)

    def validation_step(self, batch, batch_idx) -> None:
        pass

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        for k in range(40):  # the script's own chatter, after Lightning's sanity validation
            print(f"class {k:2d}: 400 images, 3 augmentations", file=sys.stderr)
        loader = probe.loader(data(), batch_size=4)
        return probe.measure(loader, self.device) if probe.under_harness() else loader

    def val_dataloader(self):
        return DataLoader(data(), batch_size=4)


trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
trainer.fit(Classifier())
"""


@pytest.mark.slow
def test_the_probes_note_reaches_harness_plan_after_a_script_that_prints_on(tmp_path: Path) -> None:
    """The check run skips Lightning's sanity validation and says so; the script then prints
    1,400 characters before its loop. The stderr excerpt (its last 500 characters) has lost the
    note; `harness plan` reads it from the job's report, whole."""
    from harness.adapters.lightning import SANITY_SKIPPED
    from harness.execution.script_check import check_notes, check_script

    script = tmp_path / "chatty.py"
    script.write_text(CHATTY_SCRIPT)
    spec = (
        f"name: chatty\nworkload: {{script: {script}, batch_size: 4}}\n"
        "measure: {warmup_steps: 1, steps: 2}\nrungs: [full]\nloader: {num_workers: 0}\n"
    )
    (point,) = expand(parse_spec(spec)).points
    ended = check_script(point)
    assert ended.checked and ended.returncode == 0, ended.reason()
    assert "class 39: 400 images" in ended.stderr_tail and "sanity validation" not in ended.stderr_tail
    assert check_notes(ended) == [
        "harness plan's check run skips Lightning's sanity validation (num_sanity_val_steps): "
        "the check neither validates nor trains"
    ]
    assert check_notes(ended) == [SANITY_SKIPPED.removeprefix("harness.probe: ")]
