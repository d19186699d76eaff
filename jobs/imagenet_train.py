"""An ImageNet-style training script (the shape of pytorch/examples' imagenet/main.py), with the
probe's lines: the one example everyone has copied, under the harness as it is.

Its shape is main.py's: `data` with `train/` and `val/` class folders read by torchvision's
ImageFolder (RandomResizedCrop, flip, normalise; Resize and CenterCrop to validate), or
`--dummy` synthetic images for a CPU node (torchvision's FakeData through the same transforms);
a torchvision model by name (`--arch`, or `tiny` for a laptop); SGD with an LR schedule sized by
`len(train_loader)` (a warmup, then a cosine decay: per step, as most recipes since do);
validation every epoch; a checkpoint saved by rank 0 (`checkpoint.pth.tar`, and
`model_best.pth.tar`). Its DataLoader settings are its own flags (`-j/--workers`,
`--pin-memory`...), which a spec maps to the point's settings (`workload.flags`), so the
validation loader, the copy and its DATALOADER line follow the point. DDP as torchrun starts
it (`env://`), not main.py's own `mp.spawn`.

The probe's lines: the import, `probe.loader(...)` in place of the train DataLoader,
`probe.measure(...)` around the train loop, `with probe.untimed():` around validation and the
checkpoint (their time is kept out of the measurement).

    python jobs/imagenet_train.py --dummy --arch tiny --image-size 32 --epochs 2   # alone
    torchrun --nproc-per-node 2 jobs/imagenet_train.py --dummy --arch tiny            # 2 ranks
    harness run jobs/imagenet_script-cpu.yaml                                          # a sweep
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import time
from typing import Any

import torch
import torch.distributed as dist
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as T
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

import harness.probe as probe


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ImageNet-style training (pytorch/examples' shape)")
    parser.add_argument("data", nargs="?", default="imagenet", help="folder with train/ and val/")
    parser.add_argument("-a", "--arch", default="resnet18", help="a torchvision model, or tiny")
    parser.add_argument("-j", "--workers", type=int, default=4, help="data loading workers")
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("-b", "--batch-size", type=int, default=256, help="per rank")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--wd", "--weight-decay", type=float, default=1e-4, dest="weight_decay")
    parser.add_argument("--warmup-epochs", type=float, default=0.1, help="of linear LR warmup")
    parser.add_argument("-p", "--print-freq", type=int, default=10)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--dummy", action="store_true", help="synthetic images (FakeData)")
    parser.add_argument("--dummy-images", type=int, default=1024, help="train images with --dummy")
    parser.add_argument("--checkpoint-dir", default=".", help="where rank 0 saves its checkpoints")
    parser.add_argument("--pin-memory", default=True, action=argparse.BooleanOptionalAction)
    parser.add_argument("--non-blocking", default=True, action=argparse.BooleanOptionalAction)
    parser.add_argument("--persistent-workers", default=False, action=argparse.BooleanOptionalAction)
    parser.add_argument("--prefetch-factor", type=int, default=2)
    parser.add_argument("--drop-last", default=False, action=argparse.BooleanOptionalAction)
    parser.add_argument("--seed", type=int, default=None)
    return parser.parse_args()


def datasets_of(args: argparse.Namespace) -> tuple[Any, Any, int]:
    """(train, val, classes): ImageFolder over data/train and data/val, or FakeData images."""
    normalize = T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    size = args.image_size
    train_transform = T.Compose(
        [T.RandomResizedCrop(size, antialias=True), T.RandomHorizontalFlip(), T.ToTensor(), normalize]
    )
    val_transform = T.Compose(
        [T.Resize(size * 8 // 7, antialias=True), T.CenterCrop(size), T.ToTensor(), normalize]
    )
    if args.dummy:
        shape = (3, size * 8 // 7, size * 8 // 7)
        train = datasets.FakeData(args.dummy_images, shape, 10, train_transform)
        val = datasets.FakeData(max(args.dummy_images // 8, 1), shape, 10, val_transform, random_offset=1)
        return train, val, 10
    train = datasets.ImageFolder(os.path.join(args.data, "train"), train_transform)
    val = datasets.ImageFolder(os.path.join(args.data, "val"), val_transform)
    return train, val, len(train.classes)


def model_of(arch: str, classes: int) -> nn.Module:
    if arch == "tiny":  # a laptop's: two convolutions
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(16, classes),
        )
    return models.__dict__[arch](num_classes=classes)  # type: ignore[no-any-return]


def warmup_cosine(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int) -> Any:
    """The LR per step: linear warmup, then cosine decay to 0 at `total_steps`."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def main() -> None:
    args = parse_args()
    if args.seed is not None:
        torch.manual_seed(args.seed)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world > 1:  # torchrun's variables (env://): one process per rank, started for us
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method="env://")
    rank = dist.get_rank() if dist.is_initialized() else 0

    train_dataset, val_dataset, classes = datasets_of(args)
    train_sampler = DistributedSampler(train_dataset) if world > 1 else None
    val_sampler = DistributedSampler(val_dataset, shuffle=False, drop_last=True) if world > 1 else None
    loader_settings = dict(
        num_workers=args.workers,
        pin_memory=args.pin_memory,
        persistent_workers=args.persistent_workers and args.workers > 0,
        prefetch_factor=args.prefetch_factor if args.workers > 0 else None,
    )
    if rank == 0:  # the course's line, which its profiler parses
        print(
            f"DATALOADER {args.workers} {args.persistent_workers} {args.pin_memory} "
            f"{args.non_blocking} {args.prefetch_factor} {args.drop_last}",
            flush=True,
        )
    train_loader = probe.loader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=train_sampler is None,
        sampler=train_sampler,
        drop_last=args.drop_last,
        **loader_settings,
    )
    val_loader = DataLoader(
        val_dataset, batch_size=args.batch_size, shuffle=False, sampler=val_sampler, **loader_settings
    )

    model = model_of(args.arch, classes).to(device)
    if world > 1:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay
    )
    steps_per_epoch = len(train_loader)  # under the harness: the batches its loop receives
    scheduler = warmup_cosine(
        optimizer, max(1, int(args.warmup_epochs * steps_per_epoch)), args.epochs * steps_per_epoch
    )

    best_acc1 = 0.0
    for epoch in range(args.epochs):
        if train_sampler is not None:
            train_sampler.set_epoch(epoch)
        model.train()
        end = time.time()
        for i, (images, target) in enumerate(
            probe.measure(train_loader, device, non_blocking=args.non_blocking)
        ):
            loss = criterion(model(images), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            if rank == 0 and i % args.print_freq == 0:
                print(
                    f"Epoch: [{epoch}][{i + 1}/{steps_per_epoch}]\tLoss {loss.item():.4e}\t"
                    f"Time {time.time() - end:.3f}"
                )
            end = time.time()
            if i == steps_per_epoch - 1:  # the epoch's last batch: validate, save
                with probe.untimed():  # out of the measured windows
                    acc1 = validate(val_loader, model, criterion, device, args)
                    best_acc1 = max(acc1, best_acc1)
                    if rank == 0:
                        save_checkpoint(model, optimizer, scheduler, epoch, acc1 >= best_acc1, args)
    if dist.is_initialized():
        dist.destroy_process_group()


def validate(
    loader: DataLoader[Any], model: nn.Module, criterion: nn.Module, device: torch.device, args: Any
) -> float:
    """Top-1 accuracy over the validation set, with the script's own copy (its --non-blocking)."""
    model.eval()
    correct = total = 0
    loss = torch.zeros(())
    with torch.no_grad():
        for images, target in loader:
            images = images.to(device, non_blocking=args.non_blocking)
            target = target.to(device, non_blocking=args.non_blocking)
            output = model(images)
            loss = criterion(output, target)
            correct += int((output.argmax(1) == target).sum())
            total += int(target.numel())
    counts = torch.tensor([correct, total], dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(counts)
    model.train()
    acc1 = float(100 * counts[0] / max(counts[1], 1))
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(f" * Acc@1 {acc1:.3f} (loss {loss.item():.4f})", flush=True)
    return acc1


def save_checkpoint(
    model: nn.Module, optimizer: Any, scheduler: Any, epoch: int, is_best: bool, args: Any
) -> None:
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    filename = os.path.join(args.checkpoint_dir, "checkpoint.pth.tar")
    state = {
        "epoch": epoch + 1,
        "arch": args.arch,
        "state_dict": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, os.path.join(args.checkpoint_dir, "model_best.pth.tar"))


if __name__ == "__main__":
    main()
