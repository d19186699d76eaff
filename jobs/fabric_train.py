"""Lightning Fabric's image classifier example (lightning's `examples/fabric/image_classifier/
train_fabric.py`), with the probe's lines: a script whose loaders `fabric.setup_dataloaders`
wraps.

Its shape is train_fabric.py's: `Fabric(accelerator=..., devices=...)`, `fabric.launch()`, a
torchvision data set (here `ImageFolder` over `harness make-data`'s class folders, where the
example downloads MNIST), `fabric.setup(model, optimizer)`, `fabric.setup_dataloaders(train_loader,
test_loader)`, `fabric.backward(loss)`, a StepLR, and a test pass every epoch with
`fabric.all_gather`. `--step-ms` makes the step a GPU's; `--read-ms` and `--transform-ms` inject a
known cost into each sample's read and transform.

The probe's lines: the import, `probe.loader(...)` in place of the train DataLoader (Fabric
wraps it as it would the DataLoader), `probe.measure(...)` around the train loop, and
`probe.untimed()` around the test pass.

    python jobs/fabric_train.py data/images                  # alone
    harness run jobs/fabric_script-cpu.yaml                  # a sweep
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
import torchvision.transforms as T
from lightning.fabric import Fabric, seed_everything
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import default_loader

import harness.probe as probe


class Slow:
    """A sleep of `ms` before `then` (picklable, for the DataLoader's workers)."""

    def __init__(self, ms: float, then: Any) -> None:
        self.s, self.then = ms / 1000, then

    def __call__(self, x: Any) -> Any:
        time.sleep(self.s)
        return self.then(x)


def run(args: argparse.Namespace) -> None:
    fabric = Fabric(accelerator="cpu", devices=args.devices, strategy="ddp" if args.devices > 1 else "auto")
    fabric.launch()
    seed_everything(args.seed)
    transform = T.Compose(
        [
            T.Resize(args.image_size),
            T.ToTensor(),
            Slow(args.transform_ms, T.Normalize((0.5,) * 3, (0.25,) * 3)),
        ]
    )
    train_dataset = ImageFolder(args.data_dir, transform=transform, loader=Slow(args.read_ms, default_loader))
    test_dataset = ImageFolder(args.data_dir, transform=transform)
    train_loader = probe.loader(
        train_dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.num_workers
    )  # was: DataLoader(train_dataset, batch_size=args.batch_size)
    test_loader = DataLoader(test_dataset, batch_size=args.batch_size)
    train_loader, test_loader = fabric.setup_dataloaders(train_loader, test_loader)

    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, len(train_dataset.classes)),
    )  # fmt: skip
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    model, optimizer = fabric.setup(model, optimizer)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)

    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch_idx, (data, target) in enumerate(
            probe.measure(train_loader, fabric.device)
        ):  # was: in train_loader
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(data), target)
            fabric.backward(loss)
            optimizer.step()
            time.sleep(args.step_ms / 1000)  # a GPU's step: the thread waits, no core used
            if batch_idx % args.log_interval == 0:
                fabric.print(
                    f"Train Epoch: {epoch} [{batch_idx}/{len(train_loader)}] Loss: {loss.item():.6f}"
                )
        scheduler.step()

        with probe.untimed():  # the test pass, out of the measured windows
            model.eval()
            correct = torch.tensor(0)
            with torch.no_grad():
                for data, target in test_loader:
                    correct += (model(data).argmax(dim=1) == target).sum()
            correct = fabric.all_gather(correct).sum()
            fabric.print(f"Test set: Accuracy: {correct}/{len(test_dataset) * fabric.world_size}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Fabric's image classifier, under harness.probe")
    parser.add_argument("data_dir", help="class folders of images (harness make-data)")
    parser.add_argument("--devices", type=int, default=1, help="Fabric's processes (the harness's ranks)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--step-ms", type=float, default=0.0, help="a sleep per step: a GPU's step")
    parser.add_argument("--read-ms", type=float, default=0.0, help="a sleep per sample read")
    parser.add_argument("--transform-ms", type=float, default=0.0, help="a sleep per sample transformed")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
