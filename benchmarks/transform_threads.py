"""What one sample's augmentations cost in the training process (num_workers=0) against in a
DataLoader worker, on this machine: the shipped stream's transforms with PyTorch's default
thread pool, which the training process keeps, against one thread, which PyTorch gives each
worker process (torch/utils/data/_utils/worker.py calls torch.set_num_threads(1)).

    .venv/bin/python benchmarks/transform_threads.py [--samples 40] [--rounds 3] [--crop 128]

Writes a few WebDataset shards of 192² JPEGs into a temporary folder, decodes `--samples` of
them with harness.examples.shards_stream (iter_raw), then times transform_sample on them in
alternating rounds (default threads, one thread, ...) and prints ms per sample of each and
their ratio, medians over the rounds. On a small op (a crop of one image) the thread pool's
hand-offs can cost more than the work, more so on a node whose cores are busy: this is the
reason `num_workers=0` rows of jobs/shards_stream-cpu.yaml can be far slower than one worker
doing the same work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.examples.shards_stream import ShardStream
from harness.workloads.make_data import make_webdataset_shards


def per_sample_ms(stream: ShardStream, raw: list, threads: int) -> float:
    torch.set_num_threads(threads)
    start = time.perf_counter()
    for sample in raw:
        stream.transform_sample(sample)
    return (time.perf_counter() - start) / len(raw) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--crop", type=int, default=128)
    args = parser.parse_args()
    default = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as root:
        make_webdataset_shards(Path(root), images=args.samples, shards=2, size=192)
        stream = ShardStream(root=root, crop=args.crop, shuffle_buffer=0)
        raw = list(stream.iter_raw())
        per_sample_ms(stream, raw[:5], default)  # first calls: allocations, lazy imports
        pool, one = [], []
        for _ in range(args.rounds):
            pool.append(per_sample_ms(stream, raw, default))
            one.append(per_sample_ms(stream, raw, 1))
    pool_ms, one_ms = statistics.median(pool), statistics.median(one)
    print(
        f"transform_sample of a 192² JPEG's pixels, crop {args.crop}, "
        f"{len(raw)} samples x {args.rounds} rounds"
    )
    print(f"  training process ({default} threads): {pool_ms:8.2f} ms per sample")
    print(f"  as in a worker (1 thread):      {one_ms:8.2f} ms per sample")
    print(f"  ratio: {pool_ms / one_ms:.1f}x")


if __name__ == "__main__":
    main()
