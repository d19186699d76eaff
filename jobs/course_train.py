"""A course-style training script (the Jean Zay course's dlojz.py, in small), with the probe.

Its own flags, its own data set (image files in class folders, as `harness make-data` writes
them), its own model and its own training loop. The probe is three lines: the import,
`probe.loader(...)` in place of `DataLoader(...)`, and `probe.measure(...)` around the loop.

    harness make-data data/course --images 512 --size 64
    python jobs/course_train.py --data data/course                # alone: trains, one probe line
    torchrun --nproc-per-node 2 jobs/course_train.py --data data/course  # alone, 2 DDP ranks
    harness run jobs/course_script-cpu.yaml                       # a sweep of this script

Alone it trains with its defaults and prints what the probe's chronometer saw; under the
harness every point runs it with the point's DataLoader settings, rung by rung.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist
import torchvision.transforms as T
from PIL import Image
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler
from torchvision.datasets import ImageFolder

import harness.probe as probe


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train a small CNN on an image folder.")
    parser.add_argument("--data", required=True, help="image folder (harness make-data DIR)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32, help="per GPU")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--width", type=int, default=16, help="channels of the first convolution")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--persistent-workers", action="store_true")
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument("--prefetch-factor", type=int, default=2)
    parser.add_argument("--drop-last", action="store_true")
    parser.add_argument("--slow-read-ms", type=float, default=0.0, help="test: sleep per image read")
    parser.add_argument("--slow-step-ms", type=float, default=0.0, help="test: sleep per train step")
    parser.add_argument("--slow-rank", type=int, default=-1, help="test: only this rank's step is slow")
    return parser.parse_args()


class Images(ImageFolder):
    """torchvision's ImageFolder, with the read and the transforms apart (load_raw and
    transform), so that the harness can also cache a raw image and time the transforms."""

    def __init__(self, root: str, transform: T.Compose, slow_read_ms: float = 0.0) -> None:
        super().__init__(root, transform=transform)
        self.slow_read_s = slow_read_ms / 1000

    def load_raw(self, index: int) -> tuple[Image.Image, int]:
        path, target = self.samples[index]
        if self.slow_read_s:
            time.sleep(self.slow_read_s)
        return self.loader(path), target

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image, target = self.load_raw(index)
        return self.transform(image), target


def model_of(width: int, classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.BatchNorm2d(2 * width),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2 * width, classes),
    )


def main() -> None:
    args = parse_args()
    device = probe.init_distributed()  # torchrun's variables, or one process
    rank = dist.get_rank() if dist.is_initialized() else 0
    world = dist.get_world_size() if dist.is_initialized() else 1

    transform = T.Compose(
        [
            T.RandomResizedCrop(args.image_size, antialias=True),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )
    dataset = Images(args.data, transform, args.slow_read_ms)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank) if world > 1 else None
    loader = probe.loader(
        dataset,
        batch_size=args.batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=args.num_workers,
        persistent_workers=args.persistent_workers and args.num_workers > 0,
        pin_memory=args.pin_memory,
        prefetch_factor=args.prefetch_factor if args.num_workers > 0 else None,
        drop_last=args.drop_last,
    )

    model = model_of(args.width, len(dataset.classes)).to(device)
    if world > 1:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    slow_step_s = args.slow_step_ms / 1000 if args.slow_rank in (-1, rank) else 0.0

    model.train()
    loss = torch.zeros(())
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for images, labels in probe.measure(loader, device):
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            if slow_step_s:
                time.sleep(slow_step_s)
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs}: loss {loss.item():.3f}", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
