"""Hugging Face Accelerate's computer-vision example (accelerate's `examples/cv_example.py`),
with the probe's lines: a script whose loader `accelerator.prepare` wraps.

Its shape is cv_example.py's: a folder of JPEGs read by a `Dataset` of its own (PIL open,
`convert("RGB")`, `RandomResizedCrop`, `ToTensor`; a dict batch of `image` and `label`), a
DataLoader with `shuffle=True`, a OneCycleLR sized by `len(train_dataloader)` before `prepare`,
`accelerator.prepare(model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)`, the
batches normalised in the loop, `accelerator.backward`, and an evaluation every epoch with
`gather_for_metrics`. Its model is small (`--width`), its images are `harness make-data`'s
class folders, and `--step-ms` makes the step a GPU's (the thread held, no core used).
`--read-ms` and `--transform-ms` inject a known cost (a sleep per sample).

The probe's lines: the import, `probe.loader(...)` in place of the train DataLoader (prepare
wraps it as it would the DataLoader), `probe.measure(...)` around the train loop, and
`probe.untimed()` around the evaluation.

    python jobs/accelerate_train.py --data_dir data/images --cpu            # alone
    accelerate launch --cpu --num_processes 2 jobs/accelerate_train.py ...  # 2 ranks
    harness run jobs/accelerate_script-cpu.yaml                               # a sweep
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import PIL.Image
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn
from torch.optim.lr_scheduler import OneCycleLR
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import Compose, RandomResizedCrop, Resize, ToTensor

import harness.probe as probe


class PetsDataset(Dataset[dict[str, Any]]):
    """cv_example's dataset: a file per image, its label from its folder here (cv_example: from
    its name). `read_s` and `transform_s` are known costs (a sleep), for the ladder to find."""

    def __init__(
        self,
        file_names: list[str],
        image_transform: Any = None,
        label_to_id: dict[str, int] | None = None,
        read_s: float = 0.0,
        transform_s: float = 0.0,
    ) -> None:
        self.file_names = file_names
        self.image_transform = image_transform
        self.label_to_id = label_to_id
        self.read_s, self.transform_s = read_s, transform_s

    def __len__(self) -> int:
        return len(self.file_names)

    def __getitem__(self, idx: int) -> dict[str, Any]:
        fname = self.file_names[idx]
        time.sleep(self.read_s)
        image = PIL.Image.open(fname).convert("RGB")
        if self.image_transform is not None:
            time.sleep(self.transform_s)
            image = self.image_transform(image)
        label = os.path.basename(os.path.dirname(fname))
        return {"image": image, "label": self.label_to_id[label] if self.label_to_id else label}


def training_function(args: argparse.Namespace) -> None:
    accelerator = Accelerator(cpu=args.cpu)
    set_seed(42)
    file_names = sorted(
        os.path.join(root, f)
        for root, _, files in os.walk(args.data_dir)
        for f in files
        if f.endswith(".jpg")
    )
    label_to_id = {
        lbl: i for i, lbl in enumerate(sorted({os.path.basename(os.path.dirname(f)) for f in file_names}))
    }
    cut = int(0.8 * len(file_names))
    perm = torch.randperm(len(file_names)).tolist()
    size = (args.image_size, args.image_size)
    train_dataset = PetsDataset(
        [file_names[i] for i in perm[:cut]],
        image_transform=Compose([RandomResizedCrop(size, scale=(0.5, 1.0)), ToTensor()]),
        label_to_id=label_to_id,
        read_s=args.read_ms / 1000,
        transform_s=args.transform_ms / 1000,
    )
    eval_dataset = PetsDataset(
        [file_names[i] for i in perm[cut:]],
        image_transform=Compose([Resize(size), ToTensor()]),
        label_to_id=label_to_id,
    )
    train_dataloader = probe.loader(
        train_dataset, shuffle=True, batch_size=args.batch_size, num_workers=args.num_workers
    )  # was: DataLoader(train_dataset, shuffle=True, batch_size=batch_size, num_workers=4)
    eval_dataloader = DataLoader(eval_dataset, shuffle=False, batch_size=args.batch_size, num_workers=0)

    model = nn.Sequential(
        nn.Conv2d(3, args.width, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(args.width, len(label_to_id)),
    ).to(accelerator.device)
    mean = torch.tensor([0.485, 0.456, 0.406])[None, :, None, None].to(accelerator.device)
    std = torch.tensor([0.229, 0.224, 0.225])[None, :, None, None].to(accelerator.device)
    optimizer = torch.optim.Adam(params=model.parameters(), lr=args.lr / 25)
    lr_scheduler = OneCycleLR(
        optimizer=optimizer, max_lr=args.lr, epochs=args.num_epochs, steps_per_epoch=len(train_dataloader)
    )
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    for epoch in range(args.num_epochs):
        model.train()
        for batch in probe.measure(train_dataloader, accelerator.device):  # was: train_dataloader
            inputs = (batch["image"] - mean) / std
            outputs = model(inputs)
            loss = torch.nn.functional.cross_entropy(outputs, batch["label"])
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            time.sleep(args.step_ms / 1000)  # a GPU's step: the thread waits, no core used

        with probe.untimed():  # the evaluation, out of the measured windows
            model.eval()
            accurate, num_elems = 0, 0
            for batch in eval_dataloader:
                with torch.no_grad():
                    outputs = model((batch["image"] - mean) / std)
                predictions, references = accelerator.gather_for_metrics(
                    (outputs.argmax(dim=-1), batch["label"])
                )
                accurate += int((predictions == references).long().sum())
                num_elems += predictions.shape[0]
            accelerator.print(f"epoch {epoch}: {100 * accurate / max(num_elems, 1):.2f}")
    accelerator.end_training()


def main() -> None:
    parser = argparse.ArgumentParser(description="Accelerate's cv_example, under harness.probe")
    parser.add_argument("--data_dir", required=True, help="class folders of .jpg (harness make-data)")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU")
    parser.add_argument("--num_epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--num_workers", type=int, default=4)
    parser.add_argument("--image_size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-2)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--step-ms", type=float, default=0.0, help="a sleep per step: a GPU's step")
    parser.add_argument("--read-ms", type=float, default=0.0, help="a sleep per sample read")
    parser.add_argument("--transform-ms", type=float, default=0.0, help="a sleep per sample transformed")
    training_function(parser.parse_args())


if __name__ == "__main__":
    main()
