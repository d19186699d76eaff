"""timm's train.py, its data path, with the probe's lines: `create_dataset`, `create_loader`
(timm's fast collate into uint8 batches, and its PrefetchLoader, which moves each batch to the
device and normalises it there) and `train_one_epoch`'s loop (an LR schedule updated per step,
sized by `len(loader)`, "the last batch" from `len(loader) - 1`).

Its shape is train.py's: `create_dataset("", root=..., split="train", is_training=True)` over a
folder of class folders, `create_loader(...)` with train.py's arguments (`--workers`,
`--pin-mem`, `--no-prefetcher`, the batch size), a timm model (`--model`, small by default),
SGD with timm's cosine scheduler stepped per update (`step_update`), and validation with its own
`create_loader` every epoch. `--step-ms` makes the step a GPU's (the thread held, no core used);
`--read-ms` injects a known cost into each sample's read.

The probe's lines: the import, `probe.measure(loader_train, device)` around the loop, and
`probe.untimed()` around validation. The loader is timm's own: map train.py's flags to the
point's settings (`workload.flags`), and the point's settings reach `create_loader`.

    python jobs/timm_train.py data/images --epochs 2      # alone
    harness run jobs/timm_script-cpu.yaml                  # a sweep
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
from timm import create_model
from timm.data import create_dataset, create_loader, resolve_data_config
from timm.data.dataset import ImageDataset
from timm.scheduler import CosineLRScheduler

import harness.probe as probe


class SlowReads(ImageDataset):
    """timm's ImageDataset, each sample's read `read_s` longer (a known cost)."""

    read_s = 0.0

    def __getitem__(self, index: int) -> Any:
        time.sleep(self.read_s)
        return super().__getitem__(index)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="timm's train.py data path, under harness.probe")
    parser.add_argument("data_dir", help="a folder with train/ and val/ class folders, or class folders")
    parser.add_argument("--model", default="test_resnet", help="a timm model (test_resnet: a tiny one)")
    parser.add_argument("-b", "--batch-size", type=int, default=16)
    parser.add_argument("-j", "--workers", type=int, default=4)
    parser.add_argument("--pin-mem", action="store_true", default=False)
    parser.add_argument("--no-prefetcher", action="store_true", default=False)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--input-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: torch's default)")
    parser.add_argument("--step-ms", type=float, default=0.0, help="a sleep per step: a GPU's step")
    parser.add_argument("--read-ms", type=float, default=0.0, help="a sleep per sample read")
    return parser.parse_args()


def train_one_epoch(
    epoch: int, model: Any, loader: Any, optimizer: Any, lr_scheduler: Any, args: Any
) -> None:
    """train.py's loop, without its AMP, EMA, mixup and logging."""
    device = next(model.parameters()).device
    model.train()
    updates_per_epoch = len(loader)
    last_batch_idx = len(loader) - 1
    num_updates = epoch * updates_per_epoch
    for batch_idx, (input, target) in enumerate(probe.measure(loader, device)):  # was: in loader
        last_batch = batch_idx == last_batch_idx
        if args.no_prefetcher:
            input, target = input.to(device), target.to(device)
        loss = torch.nn.functional.cross_entropy(model(input), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(args.step_ms / 1000)  # a GPU's step: the thread waits, no core used
        num_updates += 1
        lr_scheduler.step_update(num_updates=num_updates)
        if last_batch or batch_idx % 10 == 0:  # train.py logs here
            print(f"train: {epoch} [{batch_idx:>4d}/{updates_per_epoch}] loss {loss.item():.3f}")


def main() -> None:
    args = parse_args()
    if args.threads:
        # On a shared CPU node, OpenMP threads spin against other work: a 40 ms step took 500.
        torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    dataset_train = create_dataset("", root=args.data_dir, split="train", is_training=True)
    dataset_train.__class__ = SlowReads
    SlowReads.read_s = args.read_ms / 1000
    dataset_eval = create_dataset("", root=args.data_dir, split="validation")
    model = create_model(args.model, num_classes=len(dataset_train.reader.class_to_idx)).to(device)
    data_config = resolve_data_config({"input_size": (3, args.input_size, args.input_size)}, model=model)
    loader_train = create_loader(
        dataset_train,
        input_size=data_config["input_size"],
        batch_size=args.batch_size,
        is_training=True,
        use_prefetcher=not args.no_prefetcher,
        interpolation=data_config["interpolation"],
        mean=data_config["mean"],
        std=data_config["std"],
        num_workers=args.workers,
        pin_memory=args.pin_mem,
        device=device,
    )
    loader_eval = create_loader(
        dataset_eval,
        input_size=data_config["input_size"],
        batch_size=args.batch_size,
        is_training=False,
        use_prefetcher=not args.no_prefetcher,
        mean=data_config["mean"],
        std=data_config["std"],
        num_workers=0,
        device=device,
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    lr_scheduler = CosineLRScheduler(optimizer, t_initial=args.epochs * len(loader_train), warmup_t=2)
    for epoch in range(args.epochs):
        train_one_epoch(epoch, model, loader_train, optimizer, lr_scheduler, args)
        with probe.untimed():  # validation, out of the measured windows
            model.eval()
            correct = total = 0
            with torch.no_grad():
                for input, target in loader_eval:
                    if args.no_prefetcher:
                        input, target = input.to(device), target.to(device)
                    correct += int((model(input).argmax(-1) == target).sum())
                    total += len(target)
            print(f"epoch {epoch}: top-1 {100 * correct / max(total, 1):.2f}")


if __name__ == "__main__":
    main()
