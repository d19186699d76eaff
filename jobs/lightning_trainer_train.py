"""A Lightning `Trainer.fit` image classifier, with the probe's lines: a script whose training
loop is Lightning's, not its own (docs/guides/libraries/lightning-trainer.md).

Its shape is Lightning's own image examples (the ImageNet example and the MNIST one of its
docs): a `LightningModule` with `training_step`, `validation_step`, `configure_optimizers`
returning an optimizer and a StepLR scheduler, the loaders in `train_dataloader()` and
`val_dataloader()`, and `Trainer(max_epochs=..., accelerator=..., devices=...).fit(model)`.
The data set is torchvision's `ImageFolder` over `harness make-data`'s class folders (where
the examples download theirs). `--step-ms` makes the step a GPU's; `--read-ms` puts a known
cost into each sample's read.

The probe's lines: the import, `probe.loader(...)` in place of the train DataLoader, and, under
the harness, `probe.measure(loader, self.device)` returned by `train_dataloader()`: Lightning's
loop then iterates the measured batches. Alone, the loader is returned as it is, and the
Trainer shards it over its devices as it always does.

    python jobs/lightning_trainer_train.py data/images              # alone
    harness run jobs/lightning_trainer_script-cpu.yaml              # a sweep
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import lightning as L
import torch
import torchvision.transforms as T
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import default_loader

import harness.probe as probe


class SlowRead:
    """torchvision's image loader after a sleep of `ms` (picklable, for the loader's workers)."""

    def __init__(self, ms: float) -> None:
        self.s = ms / 1000

    def __call__(self, path: str) -> Any:
        time.sleep(self.s)
        return default_loader(path)


class ImageClassifier(L.LightningModule):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__()
        self.save_hyperparameters(vars(args))
        self.args = args
        transform = T.Compose([T.Resize(args.image_size), T.ToTensor(), T.Normalize((0.5,) * 3, (0.25,) * 3)])
        self.train_set = ImageFolder(args.data_dir, transform=transform, loader=SlowRead(args.read_ms))
        self.val_set = ImageFolder(args.data_dir, transform=transform)
        self.model = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(8, len(self.train_set.classes)),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        images, target = batch
        loss = nn.functional.cross_entropy(self(images), target)
        time.sleep(self.args.step_ms / 1000)  # a GPU's step: the thread waits, no core used
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        images, target = batch
        accuracy = (self(images).argmax(dim=1) == target).float().mean()
        self.log("val_acc", accuracy, sync_dist=True)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.SGD(self.parameters(), lr=self.args.lr, momentum=0.9)
        return [optimizer], [StepLR(optimizer, step_size=1, gamma=0.1)]

    def train_dataloader(self) -> Any:
        loader = probe.loader(
            self.train_set, batch_size=self.args.batch_size, shuffle=True, num_workers=self.args.num_workers
        )  # was: DataLoader(self.train_set, ...)
        # Under the harness Lightning's loop iterates the measured batches, on the device already;
        # alone the Trainer takes the loader as it is (and shards it over its devices).
        return probe.measure(loader, self.device) if probe.under_harness() else loader

    def val_dataloader(self) -> Any:
        return DataLoader(self.val_set, batch_size=self.args.batch_size, num_workers=0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="A Lightning Trainer.fit image classifier, under harness.probe"
    )
    parser.add_argument("data_dir", help="class folders of images (harness make-data)")
    parser.add_argument(
        "--devices", type=int, default=1, help="the Trainer's processes (the harness's ranks)"
    )
    parser.add_argument("--max-epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument(
        "--default-root-dir", default="lightning_logs_root", help="the Trainer's logs, checkpoints"
    )
    parser.add_argument("--step-ms", type=float, default=0.0, help="a sleep per step: a GPU's step")
    parser.add_argument("--read-ms", type=float, default=0.0, help="a sleep per sample read")
    args = parser.parse_args()
    L.seed_everything(1)
    trainer = L.Trainer(
        max_epochs=args.max_epochs,
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        default_root_dir=args.default_root_dir,
        log_every_n_steps=1,
        enable_progress_bar=False,
    )
    trainer.fit(ImageClassifier(args))
    trainer.print(f"trained {trainer.current_epoch} epoch(s), {trainer.global_step} steps")


if __name__ == "__main__":
    main()
