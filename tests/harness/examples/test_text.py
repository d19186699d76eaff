"""The text example: samples, tokenizer, padding collate, length buckets, and the model and its
loss trained on the pipeline's batches through a plain DataLoader."""

from __future__ import annotations

import statistics
from collections import Counter

import pytest
import torch
from torch.utils.data import DataLoader

from harness.examples.text import (
    BOS,
    EOS,
    IGNORE,
    PAD,
    UNK,
    SyntheticCorpus,
    WordTokenizer,
    make_batch_sampler,
    make_collate,
    make_dataset,
    make_loss,
    make_model,
)


@pytest.fixture(scope="module")
def corpus() -> SyntheticCorpus:
    return make_dataset(size=600, vocab_size=256, median_length=40, max_length=128, seed=3)


def test_samples_are_token_ids_of_the_announced_length(corpus: SyntheticCorpus) -> None:
    for index in (0, 17, 599):
        raw = corpus.load_raw(index)
        sample = corpus[index]
        assert set(sample) == {"input_ids"} and sample["input_ids"].dtype == torch.long
        assert torch.equal(sample["input_ids"], corpus.transform_sample(raw)["input_ids"])
        ids = sample["input_ids"].tolist()
        assert len(ids) == corpus.lengths[index]
        assert ids[0] == BOS and ids[-1] == EOS and UNK not in ids
        assert all(4 <= i < 256 for i in ids[1:-1])


def test_lengths_follow_the_requested_distribution(corpus: SyntheticCorpus) -> None:
    assert min(corpus.lengths) >= 8 and max(corpus.lengths) <= 128
    assert 34 <= statistics.median(corpus.lengths) <= 46  # median_length 40, 600 draws
    # A long tail: the log-normal's mean is above its median.
    assert statistics.mean(corpus.lengths) > statistics.median(corpus.lengths)


def test_the_corpus_is_seeded() -> None:
    one, same, other = (make_dataset(size=20, vocab_size=64, seed=s) for s in (1, 1, 2))
    assert one.texts == same.texts and one.texts != other.texts


def test_tokenizer_splits_punctuation_maps_unknown_words_and_truncates() -> None:
    tokenizer = WordTokenizer(["hello", ",", "world"], max_length=5)
    assert tokenizer("Hello, world") == [BOS, 4, 5, 6, EOS]
    assert tokenizer("hello martian") == [BOS, 4, UNK, EOS]
    assert tokenizer("hello hello hello hello") == [BOS, 4, 4, 4, EOS]


def test_bad_lengths_are_refused_with_the_values() -> None:
    with pytest.raises(ValueError, match=r"min_length <= median_length <= max_length \(got 8, 600, 512\)"):
        SyntheticCorpus(median_length=600)


def ids(*lengths: int) -> list[dict[str, torch.Tensor]]:
    return [{"input_ids": torch.arange(1, n + 1)} for n in lengths]


def test_collate_pads_to_the_longest_rounded_up_with_mask_and_labels() -> None:
    batch = make_collate(pad_to_multiple_of=8)(ids(3, 9, 5))
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert all(t.shape == (3, 16) for t in batch.values())  # 9 rounded up to 16
    assert batch["input_ids"][1, :9].tolist() == list(range(1, 10))
    assert batch["input_ids"][0, 3:].eq(PAD).all()
    assert batch["attention_mask"].sum(dim=1).tolist() == [3, 9, 5]
    assert batch["attention_mask"][2].tolist() == [1] * 5 + [0] * 11
    expected = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, IGNORE)
    assert torch.equal(batch["labels"], expected)


def test_collate_to_max_length_and_truncation() -> None:
    assert make_collate(padding="max_length", max_length=32)(ids(3, 9))["input_ids"].shape == (2, 32)
    truncated = make_collate(max_length=6)(ids(3, 9))
    assert truncated["input_ids"].shape == (2, 6) and truncated["attention_mask"][1].all()
    with pytest.raises(ValueError, match=r"padding must be 'longest' or 'max_length' \(got 'left'\)"):
        make_collate(padding="left")


def bucket_of(length: int, boundaries: list[int]) -> int:
    return sum(length >= b for b in boundaries)


def test_buckets_cover_every_index_once_per_epoch_within_length_bounds(corpus: SyntheticCorpus) -> None:
    boundaries = [16, 32, 64]
    sampler = make_batch_sampler(
        corpus, batch_size=16, drop_last=False, rank=0, world_size=1, seed=0, boundaries=boundaries
    )
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(corpus)))
    assert all(1 <= len(b) <= 16 for b in batches)
    for batch in batches:
        assert len({bucket_of(corpus.lengths[i], boundaries) for i in batch}) == 1, batch
    # one partial batch per bucket at most
    assert sum(len(b) < 16 for b in batches) <= len(boundaries) + 1


def test_buckets_reshuffle_at_set_epoch_and_repeat_an_epoch(corpus: SyntheticCorpus) -> None:
    sampler = make_batch_sampler(corpus, batch_size=16, drop_last=False, rank=0, world_size=1, seed=0)
    first, again = list(sampler), list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert first == again and first != second
    assert sorted(map(sorted, first)) != sorted(map(sorted, second))  # new batches, not only a new order


def test_buckets_give_each_rank_its_share_and_as_many_batches(corpus: SyntheticCorpus) -> None:
    shares = [
        list(make_batch_sampler(corpus, batch_size=16, drop_last=False, rank=r, world_size=2, seed=5))
        for r in (0, 1)
    ]
    assert len(shares[0]) == len(shares[1])
    seen = Counter(i for share in shares for batch in share for i in batch)
    assert set(seen) == set(range(len(corpus)))
    # Only the batches repeated to even the shares (one at most, with 2 ranks) are read twice.
    assert sum(n - 1 for n in seen.values()) <= 16


def test_buckets_with_drop_last_give_full_batches_only(corpus: SyntheticCorpus) -> None:
    sampler = make_batch_sampler(corpus, batch_size=16, drop_last=True, rank=1, world_size=2, seed=0)
    batches = list(sampler)
    assert len(batches) == len(sampler) and all(len(b) == 16 for b in batches)
    assert len({i for b in batches for i in b}) == 16 * len(batches)


def test_bucketing_pads_less_than_random_batches(corpus: SyntheticCorpus) -> None:
    collate = make_collate(max_length=128)

    def padded_share(boundaries: list[int]) -> float:
        sampler = make_batch_sampler(
            corpus, batch_size=16, drop_last=False, rank=0, world_size=1, seed=0, boundaries=boundaries
        )
        masks = [collate([corpus[i] for i in b])["attention_mask"] for b in sampler]
        return sum(int((m == 0).sum()) for m in masks) / sum(m.numel() for m in masks)

    assert padded_share([16, 24, 32, 48, 64, 96]) < 0.5 * padded_share([])


def test_batch_sampler_needs_the_lengths() -> None:
    with pytest.raises(TypeError, match="length bucketing needs the dataset's lengths; list has none"):
        make_batch_sampler([1, 2], batch_size=2, drop_last=False, rank=0, world_size=1, seed=0)


def test_padding_changes_no_loss(corpus: SyntheticCorpus) -> None:
    """Padding is masked out of the labels, and causal attention never lets a real token see it."""
    torch.manual_seed(0)
    model = make_model(vocab_size=256, width=32, layers=1, heads=2, max_length=128).eval()
    samples = [corpus[i] for i in range(4)]
    short = model(**make_collate(max_length=128)(samples)).loss
    long = model(**make_collate(padding="max_length", max_length=128)(samples)).loss
    assert torch.allclose(short, long, atol=1e-5)


def test_the_model_trains_on_the_pipelines_batches(corpus: SyntheticCorpus) -> None:
    torch.manual_seed(0)
    sampler = make_batch_sampler(corpus, batch_size=8, drop_last=False, rank=0, world_size=1, seed=0)
    loader = DataLoader(corpus, batch_sampler=sampler, collate_fn=make_collate(max_length=128), num_workers=2)
    model = make_model(vocab_size=256, width=32, layers=1, heads=2, max_length=128)
    loss_fn = make_loss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = next(iter(loader))
    output = model(**batch)
    assert output.logits.shape == (*batch["input_ids"].shape, 256)
    losses = []
    for _ in range(8):  # the same batch: the loss must fall
        loss = loss_fn(model(**batch), batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_the_loss_says_when_the_batch_has_no_labels(corpus: SyntheticCorpus) -> None:
    model = make_model(vocab_size=256, width=32, layers=1, heads=2, max_length=128)
    batch = make_collate()([corpus[0]])
    del batch["labels"]
    with pytest.raises(ValueError, match="the model returned no loss: the batch has no 'labels'"):
        make_loss()(model(**batch), batch)
