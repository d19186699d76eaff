"""A language-model pipeline, as its users write it (an example of a user's pipeline).

- **Data**: a synthetic corpus, seeded. Document lengths are drawn from a log-normal, the shape
  document lengths have in natural-language corpora (many short ones, a long tail), clipped to
  `[min_length, max_length]` tokens; words are drawn from a Zipf law over a made-up lexicon
  (word frequencies in natural language follow one, Zipf 1949), with "," and "." among them.
  The texts live in memory, as a corpus mapped from Arrow files does.
- **Samples** are dicts: `load_raw(i) -> {"text": str}` (the stored record),
  `transform_sample(raw) -> {"input_ids": LongTensor[L]}` (the tokenizer: a regex
  pre-tokenizer and a word vocabulary, in Python, as on-the-fly tokenization is). `self[i]` is
  one then the other, so the caching ladder can cache the raw text (`raw_sample`: what
  tokenizing costs) or the token ids (`processed_sample`).
- **Collate** (`make_collate`): pads to the longest sequence of the batch (rounded up to a
  multiple of 8, as Hugging Face's `pad_to_multiple_of`), or to `max_length`; adds the
  attention mask and the labels (the ids, with -100 on padding: `DataCollatorForLanguageModeling`
  with `mlm=False` does the same).
- **Batch sampler** (`make_batch_sampler`): length bucketing. Samples are grouped by length
  between `boundaries`, batches are made inside a group and shuffled, so a batch pads to
  little more than its own samples' length; `boundaries: []` gives plain random batches.
- **Model** (`make_model`): a small causal transformer; `model(**batch)` returns an object
  with `.loss` and `.logits`, as a Hugging Face model does, and `make_loss` takes that `.loss`.

Which rungs of the caching ladder see the padding: `device_batch` and `host_batch` repeat the
first real batch, padded as the pipeline pads it. `processed_sample` and `raw_sample` serve one
cached sample at every index: the collate still runs on every batch, but its sequences all
have that sample's length, so there is no padding in them. `full` pads every batch to its own
longest sequence. So host_batch -> processed_sample is what collating (and passing batches
between processes) costs; processed_sample -> raw_sample is tokenizing; raw_sample -> full is
reading the record, and the step computing on real, padded shapes. What padding itself costs
is a comparison of points: `padding: max_length` against `longest`, or bucketing against
random batches.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = 4
IGNORE = -100
"""The label PyTorch's cross_entropy (and Hugging Face) skip: padding is not a target."""

VOCAB_SIZE = 2048
"""Default vocabulary size of the corpus and of the model (both take `vocab_size`)."""

TOKEN = re.compile(r"\w+|[^\w\s]")
"""The pre-tokenizer: words and punctuation marks (as BERT's BasicTokenizer splits)."""


class WordTokenizer:
    """Text -> [BOS, word ids..., EOS], truncated to `max_length`; an unknown word is UNK."""

    def __init__(self, words: Sequence[str], max_length: int) -> None:
        self.ids = {word: SPECIALS + k for k, word in enumerate(words)}
        self.max_length = max_length

    def __call__(self, text: str) -> list[int]:
        ids = [self.ids.get(word, UNK) for word in TOKEN.findall(text.lower())]
        return [BOS, *ids[: self.max_length - 2], EOS]


def lexicon(words: int, rng: np.random.Generator) -> list[str]:
    """`words` distinct made-up words, "," and "." first (the most frequent in Zipf order)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    found: dict[str, None] = {",": None, ".": None}
    while len(found) < words:
        length = int(rng.integers(2, 10))
        found.setdefault("".join(rng.choice(letters, size=length)), None)
    return list(found)


class SyntheticCorpus(Dataset[dict[str, torch.Tensor]]):
    """`size` documents; `lengths[i]` is document i's length in tokens (BOS and EOS included),
    known without tokenizing, as a length-bucketing sampler needs (Hugging Face precomputes
    them with a `map` pass, fairseq calls them `sizes`)."""

    def __init__(
        self,
        *,
        size: int = 4096,
        vocab_size: int = VOCAB_SIZE,
        median_length: int = 128,
        sigma: float = 0.8,
        min_length: int = 8,
        max_length: int = 512,
        zipf: float = 1.1,
        seed: int = 0,
    ) -> None:
        if size < 1 or vocab_size <= SPECIALS + 2:
            raise ValueError(f"size must be >= 1 and vocab_size > {SPECIALS + 2} (got {size}, {vocab_size})")
        if not 3 <= min_length <= median_length <= max_length:
            raise ValueError(
                "need 3 <= min_length <= median_length <= max_length "
                f"(got {min_length}, {median_length}, {max_length})"
            )
        if sigma < 0 or zipf <= 0:
            raise ValueError(f"sigma must be >= 0 and zipf > 0 (got {sigma}, {zipf})")
        rng = np.random.default_rng(seed)
        words = lexicon(vocab_size - SPECIALS, rng)
        drawn = rng.lognormal(np.log(median_length), sigma, size=size)
        self.lengths: list[int] = np.clip(np.rint(drawn), min_length, max_length).astype(int).tolist()
        frequency = 1.0 / np.arange(1, len(words) + 1) ** zipf
        chosen = rng.choice(len(words), size=sum(self.lengths) - 2 * size, p=frequency / frequency.sum())
        table = np.array(words, dtype=object)
        self.texts: list[str] = []
        start = 0
        for length in self.lengths:
            self.texts.append(" ".join(table[chosen[start : start + length - 2]]))
            start += length - 2
        self.vocab_size, self.max_length = vocab_size, max_length
        self.tokenizer = WordTokenizer(words, max_length)

    def __len__(self) -> int:
        return len(self.texts)

    def load_raw(self, index: int) -> dict[str, str]:
        return {"text": self.texts[index]}

    def transform_sample(self, raw: dict[str, str]) -> dict[str, torch.Tensor]:
        return {"input_ids": torch.tensor(self.tokenizer(raw["text"]), dtype=torch.long)}

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.transform_sample(self.load_raw(index))


def make_dataset(**kwargs: Any) -> SyntheticCorpus:
    """The spec's `dataset: harness.examples.text:make_dataset`; arguments as SyntheticCorpus."""
    return SyntheticCorpus(**kwargs)


class PadCollate:
    """A list of `{"input_ids": [L_i]}` -> `{"input_ids", "attention_mask", "labels"}`, each
    `[B, T]`: T is the longest L_i rounded up to `pad_to_multiple_of` (padding "longest"), or
    `max_length` (padding "max_length", the fixed shape some compilers want)."""

    def __init__(self, padding: str, max_length: int, pad_to_multiple_of: int) -> None:
        if padding not in ("longest", "max_length"):
            raise ValueError(f"padding must be 'longest' or 'max_length' (got {padding!r})")
        if max_length < 1 or pad_to_multiple_of < 1:
            raise ValueError(
                f"max_length and pad_to_multiple_of must be >= 1 (got {max_length}, {pad_to_multiple_of})"
            )
        self.padding, self.max_length, self.multiple = padding, max_length, pad_to_multiple_of

    def width(self, longest: int) -> int:
        if self.padding == "max_length":
            return self.max_length
        return min(self.max_length, -(-longest // self.multiple) * self.multiple)

    def __call__(self, samples: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        sequences = [s["input_ids"][: self.max_length] for s in samples]
        width = self.width(max(len(s) for s in sequences))
        ids = torch.full((len(sequences), width), PAD, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, sequence in enumerate(sequences):
            ids[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1
        labels = ids.masked_fill(mask == 0, IGNORE)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def make_collate(
    *, padding: str = "longest", max_length: int = 512, pad_to_multiple_of: int = 8
) -> PadCollate:
    """The spec's `collate: harness.examples.text:make_collate`."""
    return PadCollate(padding, max_length, pad_to_multiple_of)


class LengthBuckets:
    """Batches of indices of similar length, this rank's share, reshuffled at each set_epoch.

    Every epoch: each bucket (lengths in `[boundaries[k-1], boundaries[k])`) is shuffled and
    cut into batches of `batch_size` (the last one kept unless `drop_last`); all batches are
    shuffled together; rank r takes batches r, r + world_size, ... Every rank draws the same
    order (the seed and the epoch decide it) and gets as many batches as the others: without
    drop_last the list is completed with its first batches, as DistributedSampler completes
    its indices, so that no rank waits for another at an epoch's end.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        *,
        batch_size: int,
        drop_last: bool,
        boundaries: Sequence[int],
        rank: int,
        world_size: int,
        seed: int,
    ) -> None:
        if batch_size < 1 or not 0 <= rank < world_size:
            raise ValueError(
                f"need batch_size >= 1 and 0 <= rank < world_size (got {batch_size}, {rank}, {world_size})"
            )
        if list(boundaries) != sorted(set(boundaries)):
            raise ValueError(f"boundaries must be increasing (got {list(boundaries)})")
        self.buckets: list[list[int]] = [[] for _ in range(len(boundaries) + 1)]
        for index, length in enumerate(lengths):
            self.buckets[bisect.bisect_right(boundaries, length)].append(index)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.rank, self.world_size, self.seed, self.epoch = rank, world_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _per_bucket(self, size: int) -> int:
        return size // self.batch_size if self.drop_last else -(-size // self.batch_size)

    def __len__(self) -> int:
        total = sum(self._per_bucket(len(bucket)) for bucket in self.buckets)
        return total // self.world_size if self.drop_last else -(-total // self.world_size)

    def epoch_batches(self) -> list[list[int]]:
        """Every rank's batches of this epoch, in order, before the rank takes its share."""
        rng = np.random.default_rng((self.seed, self.epoch))
        batches: list[list[int]] = []
        for bucket in self.buckets:
            order = [bucket[k] for k in rng.permutation(len(bucket))]
            cuts = range(0, self._per_bucket(len(order)) * self.batch_size, self.batch_size)
            batches += [order[k : k + self.batch_size] for k in cuts]
        batches = [batches[k] for k in rng.permutation(len(batches))]
        whole = len(self) * self.world_size
        return (batches * (1 + whole // max(1, len(batches))))[:whole]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.epoch_batches()[self.rank :: self.world_size])


def make_batch_sampler(
    dataset: Any,
    *,
    batch_size: int,
    drop_last: bool,
    rank: int,
    world_size: int,
    seed: int,
    boundaries: Sequence[int] = (32, 64, 96, 128, 192, 256, 384),
) -> LengthBuckets:
    """The spec's `batch_sampler: harness.examples.text:make_batch_sampler`; reads the
    dataset's `lengths`."""
    lengths = getattr(dataset, "lengths", None)
    if lengths is None:
        raise TypeError(f"length bucketing needs the dataset's lengths; {type(dataset).__name__} has none")
    return LengthBuckets(
        lengths,
        batch_size=batch_size,
        drop_last=drop_last,
        boundaries=boundaries,
        rank=rank,
        world_size=world_size,
        seed=seed,
    )


@dataclass
class CausalLMOutput:
    """What the model returns, as Hugging Face's CausalLMOutput: the loss when labels were
    given, and the logits. A dataclass: DDP finds the tensors in it."""

    loss: torch.Tensor | None
    logits: torch.Tensor


class TinyCausalLM(nn.Module):
    """A pre-norm transformer decoder (GPT-shaped), tied input and output embeddings."""

    def __init__(self, vocab_size: int, width: int, layers: int, heads: int, max_length: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width ({width}) must be a multiple of heads ({heads})")
        self.embed = nn.Embedding(vocab_size, width)
        self.position = nn.Embedding(max_length, width)
        block = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size, bias=False)
        self.head.weight = self.embed.weight
        # GPT-2's initialisation: with tied weights, N(0, 1) embeddings would make logits of
        # size ~width and a first loss far above log(vocab_size).
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.position.weight, std=0.02)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> CausalLMOutput:
        steps = input_ids.shape[1]
        x = self.embed(input_ids) + self.position(torch.arange(steps, device=input_ids.device))
        causal = nn.Transformer.generate_square_subsequent_mask(steps, device=x.device, dtype=x.dtype)
        padding = None
        if attention_mask is not None:
            # Float like the causal mask (PyTorch deprecates mixing bool and float masks). No
            # row is all -inf: position 0 is BOS, never padding, and every query sees it.
            padding = torch.zeros_like(attention_mask, dtype=x.dtype).masked_fill(
                attention_mask == 0, -torch.inf
            )
        x = self.blocks(x, mask=causal, src_key_padding_mask=padding, is_causal=True)
        logits = self.head(self.norm(x))
        loss = None
        if labels is not None:
            # Each position predicts the next token; padding's labels are IGNORE.
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=IGNORE)
        return CausalLMOutput(loss=loss, logits=logits)


def make_model(
    *, vocab_size: int = VOCAB_SIZE, width: int = 128, layers: int = 2, heads: int = 4, max_length: int = 512
) -> TinyCausalLM:
    """The spec's `model: harness.examples.text:make_model`; `vocab_size` and `max_length`
    must be at least the dataset's."""
    return TinyCausalLM(vocab_size, width, layers, heads, max_length)


def make_loss() -> Callable[[CausalLMOutput, Any], torch.Tensor]:
    """The spec's `loss: harness.examples.text:make_loss`: the loss the model computed."""

    def loss(output: CausalLMOutput, batch: Any) -> torch.Tensor:
        if output.loss is None:
            raise ValueError("the model returned no loss: the batch has no 'labels' (use make_collate)")
        return output.loss

    return loss
