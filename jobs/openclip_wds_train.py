"""OpenCLIP's WebDataset data path (open_clip_train/data.py, `get_wds_dataset`), with the
probe's lines: image-text pairs in tar shards, batched inside the workers, read through
`wds.WebLoader`, and `train_one_epoch`'s loop (a cosine LR schedule stepped per batch and sized
by `dataloader.num_batches`, not `len()`).

Its shape is OpenCLIP's: `wds.DataPipeline` of the shard list (`wds.SimpleShardList` over
`--train-data`, a brace pattern or `::`-separated list), the shards shuffled the same way on
every rank for the epoch (`detshuffle2` with a shared epoch), `wds.split_by_node`,
`wds.split_by_worker`, the tar members grouped into samples, a sample shuffle buffer, the
captions filtered, renamed and tokenized, the images decoded (`decode_pil_rgb`) and
preprocessed, then `wds.batched(batch_size, partial=not is_train)` in the pipeline, so each
worker yields whole batches; `.with_epoch(num_worker_batches)` sizes an epoch per worker, and
`wds.WebLoader(dataset, batch_size=None, shuffle=False, num_workers=args.workers,
persistent_workers=args.workers > 0)` reads it. `--train-num-samples` is required where the
shards have no `sizes.json`, as in OpenCLIP.

A tiny CLIP (a conv image tower, a bag-of-tokens text tower, a learnt logit scale, the
symmetric contrastive loss) stands in for the model; `--step-ms` makes the step a GPU's (the
thread held, no core used), and `--transform-ms` injects a known cost into each sample's
preprocess (in the workers, as the decode and the augmentations are).

The probe's lines: the import, and `probe.measure(dataloader, device)` around the loop. The
WebLoader is measured as given: map OpenCLIP's flags to the point's settings (`workload.flags`,
`--workers`, `--batch-size`), and the point's settings reach `get_wds_dataset`.

    harness make-data data/openclip-wds --images 256 --size 64 --shards 4 --webdataset
    python jobs/openclip_wds_train.py --train-data 'data/openclip-wds/shard-{00000..00003}.tar' \\
        --train-num-samples 256 --text-key cls --epochs 2           # alone
    harness run jobs/openclip_wds_script-cpu.yaml                    # a sweep
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import random
import time
from dataclasses import dataclass
from multiprocessing import Value
from typing import Any

import torch
import webdataset as wds
from PIL import Image
from torch import nn
from torch.utils.data import get_worker_info
from torch.utils.data.dataloader import default_collate
from torchvision import transforms
from webdataset.filters import _shuffle
from webdataset.tariterators import base_plus_ext, tar_file_expander, url_opener, valid_sample

import harness.probe as probe

_logger = logging.getLogger(__name__)

OPENAI_DATASET_MEAN = (0.48145466, 0.4578275, 0.40821073)  # open_clip/constants.py
OPENAI_DATASET_STD = (0.26862954, 0.26130258, 0.27577711)
CONTEXT_LENGTH = 77  # open_clip's tokenizer's default context length

# --- data.py, its WebDataset path -------------------------------------------------------------


class SharedEpoch:
    """The epoch, shared with the DataLoader's workers (data.py)."""

    def __init__(self, epoch: int = 0) -> None:
        self.shared_epoch = Value("i", epoch)

    def set_value(self, epoch: int) -> None:
        self.shared_epoch.value = epoch

    def get_value(self) -> int:
        return int(self.shared_epoch.value)


@dataclass
class DataInfo:
    dataloader: Any
    shared_epoch: SharedEpoch | None = None

    def set_epoch(self, epoch: int) -> None:
        if self.shared_epoch is not None:
            self.shared_epoch.set_value(epoch)


def expand_urls(urls: str) -> list[str]:
    return list(wds.shardlists.expand_urls(urls))


def get_dataset_size(shards: str) -> tuple[int | None, int]:
    """The samples the shards hold, where their folder says (sizes.json, __len__), and how many."""
    shards_list = expand_urls(shards)
    dir_path = os.path.dirname(shards_list[0])
    sizes_filename = os.path.join(dir_path, "sizes.json")
    total_size = None
    if os.path.exists(sizes_filename):
        with open(sizes_filename) as f:
            sizes = json.load(f)
        total_size = sum(int(sizes[os.path.basename(shard)]) for shard in shards_list)
    return total_size, len(shards_list)


def log_and_continue(exn: Exception) -> bool:
    _logger.warning(f"Handling webdataset error ({exn!r}). Ignoring.")
    return True


def group_by_keys_nothrow(
    data: Any, keys: Any = base_plus_ext, lcase: bool = True, suffixes: Any = None, handler: Any = None
) -> Any:
    """The tar members grouped into samples by their key, without throwing (data.py's)."""
    current_sample: dict[str, Any] | None = None
    for filesample in data:
        fname, value = filesample["fname"], filesample["data"]
        prefix, suffix = keys(fname)
        if prefix is None:
            continue
        if lcase:
            suffix = suffix.lower()
        if current_sample is None or prefix != current_sample["__key__"] or suffix in current_sample:
            if valid_sample(current_sample):
                yield current_sample
            current_sample = dict(__key__=prefix, __url__=filesample["__url__"])
        if suffixes is None or suffix in suffixes:
            current_sample[suffix] = value
    if valid_sample(current_sample):
        yield current_sample


def tarfile_to_samples_nothrow(src: Any, handler: Any = log_and_continue) -> Any:
    streams = url_opener(src, handler=handler)
    # eof_value=None: webdataset 0.2.96 on marks each shard's end with {}, which this grouping
    # would take for a member (KeyError: 'fname'; webdataset#384, open_clip#935)
    files = tar_file_expander(streams, handler=handler, eof_value=None)
    return group_by_keys_nothrow(files, handler=handler)


def pytorch_worker_seed(increment: int = 0) -> int:
    """The DataLoader worker's seed, else webdataset's rank-based one (data.py)."""
    worker_info = get_worker_info()
    if worker_info is not None:
        seed = worker_info.seed
        if increment:
            seed += increment * max(1, worker_info.num_workers)
        return int(seed)
    return int(wds.utils.pytorch_worker_seed())


def wds_shuffle_sizes() -> tuple[int, int, int, int]:
    """OpenCLIP's shuffle buffers (2000/500 shards, 5000/1000 samples), its OPENCLIP_WDS_* to
    override them."""
    env = os.environ.get
    return (
        int(env("OPENCLIP_WDS_SHARD_SHUFFLE_SIZE", 2000)),
        int(env("OPENCLIP_WDS_SHARD_SHUFFLE_INITIAL", 500)),
        int(env("OPENCLIP_WDS_SAMPLE_SHUFFLE_SIZE", 5000)),
        int(env("OPENCLIP_WDS_SAMPLE_SHUFFLE_INITIAL", 1000)),
    )


class detshuffle2(wds.PipelineStage):  # OpenCLIP's name
    """The shard list shuffled the same on every rank and worker for the epoch (data.py)."""

    def __init__(self, bufsize: int = 1000, initial: int = 100, seed: int = 0, epoch: Any = -1) -> None:
        self.bufsize = bufsize
        self.initial = initial
        self.seed = seed
        self.epoch = epoch

    def run(self, src: Any) -> Any:
        if isinstance(self.epoch, SharedEpoch):
            epoch = self.epoch.get_value()
        else:
            self.epoch += 1
            epoch = self.epoch
        rng = random.Random()
        seed = pytorch_worker_seed(epoch) if self.seed < 0 else self.seed + epoch
        rng.seed(seed)
        return _shuffle(src, self.bufsize, self.initial, rng)


def _split_keys(keys: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in keys.split(";") if k.strip())


class FilterValidSample:
    """Keep the samples with an image and a caption (data.py's, picklable)."""

    def __init__(self, text_key: str = "txt", image_key: str = "jpg;png;jpeg;webp") -> None:
        self.image_keys = _split_keys(image_key)
        self.text_keys = _split_keys(text_key)

    def __call__(self, sample: dict[str, Any]) -> bool:
        return any(k in sample for k in self.image_keys) and any(k in sample for k in self.text_keys)


def decode_pil_rgb(data: bytes) -> Image.Image:
    """Raw image bytes to an RGB PIL image (data.py)."""
    with io.BytesIO(data) as stream:
        img = Image.open(stream)
        img.load()
        return img.convert("RGB")


def tokenize(text: str | bytes, context_length: int = CONTEXT_LENGTH) -> torch.Tensor:
    """A stand-in for open_clip's SimpleTokenizer: start, the caption's bytes, end, zero padding."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    ids = [49406, *(b + 1 for b in text.encode("utf-8"))][: context_length - 1]
    ids.append(49407)
    out = torch.zeros(context_length, dtype=torch.long)
    out[: len(ids)] = torch.tensor(ids)
    return out


class TokenizeText:
    def __call__(self, text: str | bytes) -> torch.Tensor:
        return tokenize(text)


class Preprocess:
    """open_clip's training transform (RandomResizedCrop at scale 0.9-1, to tensor, the OpenAI
    normalisation), each sample `transform_s` longer (a known cost)."""

    def __init__(self, image_size: int, transform_s: float = 0.0) -> None:
        self.transform_s = transform_s
        self.inner = transforms.Compose(
            [
                transforms.RandomResizedCrop(
                    image_size, scale=(0.9, 1.0), interpolation=transforms.InterpolationMode.BICUBIC
                ),
                transforms.ToTensor(),
                transforms.Normalize(OPENAI_DATASET_MEAN, OPENAI_DATASET_STD),
            ]
        )

    def __call__(self, image: Image.Image) -> torch.Tensor:
        time.sleep(self.transform_s)
        return self.inner(image)


def get_wds_dataset(
    args: Any, preprocess_img: Any, is_train: bool, epoch: int = 0, floor: bool = False
) -> DataInfo:
    """data.py's get_wds_dataset, its plain image-text path (no resampling, NaFlex, bucketing)."""
    input_shards = args.train_data
    num_shards = None
    if args.train_num_samples is not None:
        num_samples = args.train_num_samples
    else:
        num_samples, num_shards = get_dataset_size(input_shards)
        if not num_samples:
            raise RuntimeError(
                "Currently, the number of dataset samples must be specified for the training dataset. "
                "Please specify it via `--train-num-samples` if no dataset length info is present."
            )
    shared_epoch = SharedEpoch(epoch=epoch)
    pipeline: list[Any] = [wds.SimpleShardList(input_shards)]
    shard_size, shard_initial, sample_size, sample_initial = wds_shuffle_sizes()
    pipeline.extend(
        [
            detshuffle2(bufsize=shard_size, initial=shard_initial, seed=args.seed, epoch=shared_epoch),
            wds.split_by_node,
            wds.split_by_worker,
            tarfile_to_samples_nothrow,
            wds.shuffle(bufsize=sample_size, initial=sample_initial),
            wds.select(FilterValidSample(text_key=args.text_key)),
            wds.rename(image="jpg;png;jpeg;webp", text=args.text_key, keep=False),
            wds.map_dict(text=TokenizeText()),
            wds.map_dict(image=decode_pil_rgb, handler=log_and_continue),
            wds.map_dict(image=preprocess_img),
            wds.to_tuple("image", "text"),
            wds.batched(args.batch_size, partial=not is_train, collation_fn=default_collate),
        ]
    )
    dataset = wds.DataPipeline(*pipeline)
    num_shards = num_shards or len(expand_urls(input_shards))
    assert num_shards >= args.workers * args.world_size, "number of shards must be >= total workers"
    # roll over and repeat a few samples to get same number of full batches on each node
    round_fn = math.floor if floor else math.ceil
    global_batch_size = args.batch_size * args.world_size
    num_batches = round_fn(num_samples / global_batch_size)
    num_workers = max(1, args.workers)
    num_worker_batches = round_fn(num_batches / num_workers)  # per dataloader worker
    num_batches = num_worker_batches * num_workers
    num_samples = num_batches * global_batch_size
    dataset = dataset.with_epoch(num_worker_batches)  # each worker is iterating over this
    dataloader = wds.WebLoader(
        dataset,
        batch_size=None,
        shuffle=False,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
    )
    # add meta-data to dataloader instance for convenience
    dataloader.num_batches = num_batches
    dataloader.num_samples = num_samples
    return DataInfo(dataloader=dataloader, shared_epoch=shared_epoch)


# --- a tiny CLIP and train.py's loop ----------------------------------------------------------


class TinyCLIP(nn.Module):
    def __init__(self, embed_dim: int = 32, vocab: int = 49408) -> None:
        super().__init__()
        self.visual = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(16, embed_dim),
        )
        self.token_embedding = nn.EmbeddingBag(vocab, embed_dim, mode="mean", padding_idx=0)
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))

    def forward(
        self, images: torch.Tensor, texts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        image_features = nn.functional.normalize(self.visual(images), dim=-1)
        text_features = nn.functional.normalize(self.token_embedding(texts), dim=-1)
        return image_features, text_features, self.logit_scale.exp()


def clip_loss(
    image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor
) -> torch.Tensor:
    """open_clip's ClipLoss on one rank: the symmetric cross-entropy of the pairs' similarities."""
    logits_per_image = logit_scale * image_features @ text_features.T
    labels = torch.arange(logits_per_image.shape[0], device=logits_per_image.device)
    return (
        nn.functional.cross_entropy(logits_per_image, labels)
        + nn.functional.cross_entropy(logits_per_image.T, labels)
    ) / 2


def cosine_lr(optimizer: Any, base_lr: float, warmup_length: int, steps: int) -> Any:
    """open_clip_train/scheduler.py's cosine_lr: a function of the step that sets the LR."""

    def _lr_adjuster(step: int) -> float:
        if step < warmup_length:
            lr = base_lr * (step + 1) / warmup_length
        else:
            e, es = step - warmup_length, steps - warmup_length
            lr = 0.5 * (1 + math.cos(math.pi * e / es)) * base_lr
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        return lr

    return _lr_adjuster


def train_one_epoch(
    model: Any, data: dict[str, DataInfo], epoch: int, optimizer: Any, scheduler: Any, args: Any
) -> None:
    """train.py's train_one_epoch, without AMP, gradient accumulation, distillation and logging
    to TensorBoard."""
    device = torch.device(args.device)
    model.train()
    data["train"].set_epoch(epoch)  # set epoch in process safe manner via sampler or shared_epoch
    dataloader = data["train"].dataloader
    num_batches_per_epoch = dataloader.num_batches
    sample_digits = math.ceil(math.log(dataloader.num_samples + 1, 10))
    for i, batch in enumerate(probe.measure(dataloader, device)):  # was: enumerate(dataloader)
        step = num_batches_per_epoch * epoch + i
        scheduler(step)
        images, texts = batch
        images = images.to(device=device, non_blocking=True)
        texts = texts.to(device=device, non_blocking=True)
        optimizer.zero_grad()
        total_loss = clip_loss(*model(images, texts))
        total_loss.backward()
        optimizer.step()
        time.sleep(args.step_ms / 1000)  # a GPU's step: the thread waits, no core used
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        batch_count = i + 1
        if i % args.log_every_n_steps == 0 or batch_count == num_batches_per_epoch:
            num_samples = batch_count * args.batch_size * args.world_size
            percent_complete = 100.0 * batch_count / num_batches_per_epoch
            print(
                f"Train Epoch: {epoch} [{num_samples:>{sample_digits}}/{dataloader.num_samples} "
                f"({percent_complete:.0f}%)] Loss: {total_loss.item():.4f}"
            )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="OpenCLIP's WebDataset data path, under harness.probe")
    parser.add_argument("--train-data", required=True, help="tar shards: a brace pattern or '::'-separated")
    parser.add_argument("--train-num-samples", type=int, default=None)
    parser.add_argument("--text-key", default="txt", help="the caption's member (harness make-data: cls)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every-n-steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: torch's default)")
    parser.add_argument("--step-ms", type=float, default=0.0, help="a sleep per step: a GPU's step")
    parser.add_argument("--transform-ms", type=float, default=0.0, help="a sleep per sample's preprocess")
    args = parser.parse_args()
    args.world_size = int(os.environ.get("WORLD_SIZE", 1))
    args.device = "cpu"
    return args


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = TinyCLIP().to(args.device)
    preprocess_train = Preprocess(args.image_size, args.transform_ms / 1000)
    data = {"train": get_wds_dataset(args, preprocess_train, is_train=True)}
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.2)
    total_steps = data["train"].dataloader.num_batches * args.epochs
    scheduler = cosine_lr(optimizer, args.lr, args.warmup, total_steps)
    for epoch in range(args.epochs):
        train_one_epoch(model, data, epoch, optimizer, scheduler, args)


if __name__ == "__main__":
    main()
