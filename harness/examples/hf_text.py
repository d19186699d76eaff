"""Hugging Face `datasets` pipelines, as their users write them (an example of a user's pipeline).

- **Data**: a `datasets.Dataset` (an Arrow table, memory-mapped from files in real use,
  in memory here), one `text` column: the synthetic corpus of `harness.examples.text`
  (log-normal document lengths, Zipf words), so nothing is downloaded.
- **Tokenizer**: the word vocabulary of that corpus, built in code (`WordTokenizer`). A Hub
  tokenizer (`AutoTokenizer.from_pretrained`) needs `transformers` and a download; the
  tokenizer is not what the ladder measures, where it runs is (`tokenize`):
  - `tokenize: map` does as the Hugging Face course does: `Dataset.map(..., batched=True)`
    once, ahead of training (cached to Arrow), so that the loader reads token ids;
  - `tokenize: transform` tokenizes each sample as it is read, as `set_transform` does.
- **Map-style** (`make_dataset`): `load_raw(i)` reads row i of the table (`{"text": ...}` or
  `{"input_ids": [...]}`), `transform_sample(row)` makes `{"input_ids": LongTensor[L]}`.
- **Streaming** (`make_stream`): `Dataset.to_iterable_dataset(num_shards=...)`, split between
  ranks by `datasets.distributed.split_dataset_by_node` and between DataLoader workers by the
  stream itself (shard by shard: a worker beyond `num_shards` gets nothing, which Hugging Face
  says in a warning); an optional shuffle buffer, reshuffled by `set_epoch`. `iter_raw()` yields
  the rows, `transform_sample` tokenizes: the harness's stream contract.
- **Collate**: `harness.examples.text:make_collate`, padding to the batch's longest sequence
  (rounded up to a multiple of 8) with the attention mask and labels: what `transformers`'
  `DataCollatorWithPadding` does for ids and mask, without a Hub tokenizer to call `.pad` on.

`read_ms` and `transform_ms` add a known cost (a sleep) to each sample's read or transform:
the tests inject them and expect the ladder's verdict to name the stage they were put in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import datasets
import torch
import torch.distributed as dist
from datasets.distributed import split_dataset_by_node
from torch.utils.data import Dataset, IterableDataset

from harness.examples.text import SyntheticCorpus, WordTokenizer

TOKENIZE = ("map", "transform")


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of ranks: torch.distributed's where it is initialised
    (a DDP job's, before its data set is built), else torchrun's RANK and WORLD_SIZE, else 1."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def corpus_table(
    *, size: int, vocab_size: int, median_length: int, max_length: int, seed: int
) -> tuple[datasets.Dataset, WordTokenizer]:
    """The synthetic corpus as a `datasets.Dataset` with a `text` column, and its tokenizer."""
    corpus = SyntheticCorpus(
        size=size, vocab_size=vocab_size, median_length=median_length, max_length=max_length, seed=seed
    )
    return datasets.Dataset.from_dict({"text": corpus.texts}), corpus.tokenizer


def _costs(read_ms: float, transform_ms: float) -> tuple[float, float]:
    for name, value in (("read_ms", read_ms), ("transform_ms", transform_ms)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name} must be a number of milliseconds >= 0 (got {value!r})")
    return read_ms / 1000, transform_ms / 1000


class _Tokenized:
    """The tokenizer and the injected costs both pipelines share."""

    tokenizer: WordTokenizer
    transform_s: float

    def transform_sample(self, raw: dict[str, Any]) -> dict[str, torch.Tensor]:
        """A row (`text`, or `input_ids` tokenized ahead by `map`) -> `{"input_ids": [L]}`."""
        if self.transform_s:
            time.sleep(self.transform_s)
        ids = raw["input_ids"] if "input_ids" in raw else self.tokenizer(raw["text"])
        return {"input_ids": torch.tensor(ids, dtype=torch.long)}


class HFTexts(_Tokenized, Dataset[dict[str, torch.Tensor]]):
    """Map-style: row i of a `datasets.Dataset`, tokenized ahead (`map`) or here (`transform`)."""

    def __init__(
        self,
        *,
        size: int = 2048,
        vocab_size: int = 512,
        median_length: int = 32,
        max_length: int = 128,
        tokenize: str = "map",
        read_ms: float = 0,
        transform_ms: float = 0,
        seed: int = 0,
    ) -> None:
        if tokenize not in TOKENIZE:
            raise ValueError(f"tokenize must be one of {', '.join(TOKENIZE)} (got {tokenize!r})")
        self.read_s, self.transform_s = _costs(read_ms, transform_ms)
        table, self.tokenizer = corpus_table(
            size=size, vocab_size=vocab_size, median_length=median_length, max_length=max_length, seed=seed
        )
        if tokenize == "map":
            tokenizer = self.tokenizer
            table = table.map(
                lambda rows: {"input_ids": [tokenizer(text) for text in rows["text"]]},
                batched=True,
                remove_columns=["text"],
            )
        self.table = table

    def __len__(self) -> int:
        return len(self.table)

    def load_raw(self, index: int) -> dict[str, Any]:
        """Row `index` of the Arrow table, as Python values."""
        if self.read_s:
            time.sleep(self.read_s)
        row: dict[str, Any] = self.table[index]
        return row

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.transform_sample(self.load_raw(index))


class HFTextStream(_Tokenized, IterableDataset[dict[str, torch.Tensor]]):
    """Streaming: the table as a `datasets.IterableDataset` of `num_shards` shards, this rank's
    share (split_dataset_by_node), each DataLoader worker reading its own shards."""

    def __init__(
        self,
        *,
        size: int = 2048,
        vocab_size: int = 512,
        median_length: int = 32,
        max_length: int = 128,
        num_shards: int = 4,
        shuffle_buffer: int = 0,
        read_ms: float = 0,
        transform_ms: float = 0,
        seed: int = 0,
    ) -> None:
        if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
            raise ValueError(f"num_shards must be an integer >= 1 (got {num_shards!r})")
        if isinstance(shuffle_buffer, bool) or not isinstance(shuffle_buffer, int) or shuffle_buffer < 0:
            raise ValueError(f"shuffle_buffer must be an integer >= 0 (got {shuffle_buffer!r})")
        self.read_s, self.transform_s = _costs(read_ms, transform_ms)
        table, self.tokenizer = corpus_table(
            size=size, vocab_size=vocab_size, median_length=median_length, max_length=max_length, seed=seed
        )
        stream = table.to_iterable_dataset(num_shards=num_shards)
        if shuffle_buffer:
            stream = stream.shuffle(seed=seed, buffer_size=shuffle_buffer)
        rank, world = rank_and_world()
        self.stream = split_dataset_by_node(stream, rank=rank, world_size=world) if world > 1 else stream
        self.num_shards = num_shards

    def set_epoch(self, epoch: int) -> None:
        """A new shard order and shuffle buffer seed for the epoch (the same on every rank)."""
        self.stream.set_epoch(epoch)

    def iter_raw(self) -> Iterator[dict[str, Any]]:
        """This reader's rows (`{"text": ...}`); the stream picks the worker's shards itself."""
        for row in self.stream:
            if self.read_s:
                time.sleep(self.read_s)
            yield row

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        return map(self.transform_sample, self.iter_raw())


def make_dataset(**kwargs: Any) -> HFTexts:
    """The spec's `dataset: harness.examples.hf_text:make_dataset`; arguments as HFTexts."""
    return HFTexts(**kwargs)


def make_stream(**kwargs: Any) -> HFTextStream:
    """The spec's `dataset: harness.examples.hf_text:make_stream`; arguments as HFTextStream."""
    return HFTextStream(**kwargs)


def make_bare(
    *,
    size: int = 2048,
    vocab_size: int = 512,
    median_length: int = 32,
    max_length: int = 128,
    transform_ms: float = 0,
    seed: int = 0,
) -> datasets.Dataset:
    """The spec's `dataset: harness.examples.hf_text:make_bare`: a bare `datasets.Dataset`,
    tokenized on each read by `with_transform`, as the Hugging Face documentation writes it
    (no class of the harness's around it); `transform_ms` a sleep per sample in the transform."""
    _, transform_s = _costs(0, transform_ms)
    table, tokenizer = corpus_table(
        size=size, vocab_size=vocab_size, median_length=median_length, max_length=max_length, seed=seed
    )

    def tokenize(batch: dict[str, list[Any]]) -> dict[str, list[torch.Tensor]]:
        if transform_s:
            time.sleep(transform_s * len(batch["text"]))
        return {"input_ids": [torch.tensor(tokenizer(text), dtype=torch.long) for text in batch["text"]]}

    return table.with_transform(tokenize)
