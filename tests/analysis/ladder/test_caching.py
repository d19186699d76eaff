"""The caching what-if on known figures: which stage to cache, whether it fits, what it gives,
and which random transforms a cache would freeze."""

from __future__ import annotations

import pytest

from analysis.ladder.caching import CachingWhatIf, sentence, what_if

RUNGS = ["host_batch", "processed_sample", "transform:1", "raw_sample", "full"]
NAMES = ["RandomResizedCrop", "ColorJitter", "ToTensor", "Normalize"]


def ask(
    capacity: dict[str, float],
    *,
    demand: float = 10.0,
    sample_bytes: float = 3 * 32 * 32,
    samples: int | None = 50_000,
    limit_gb: float | None = 32.0,
) -> CachingWhatIf | None:
    return what_if(
        RUNGS,
        capacity=capacity,
        keeps_up={r: v >= 1.05 * demand for r, v in capacity.items()},
        demand=demand,
        sample_bytes={r: sample_bytes for r in capacity if r != "full"},
        samples=samples,
        limit_gb=limit_gb,
        in_use_gb=2.0,
        transform_names=NAMES,
    )


def test_a_slow_read_is_answered_by_caching_the_raw_samples() -> None:
    # The raw samples' loader delivers 40 batches/s against a demand of 10; full 8.
    w = ask({"processed_sample": 500.0, "transform:1": 60.0, "raw_sample": 40.0, "full": 8.0})
    assert w is not None and (w.rung, w.frozen, w.fits) == ("raw_sample", (), True)
    assert w.total_gb == pytest.approx(50_000 * 3072 / 1e9)
    assert sentence(w) == (
        "what if: caching the raw samples (decoded, before the transforms) in memory (50,000 samples × "
        "3.1 kB = 153.6 MB; fits in 80% of the job's 32.0 GB with the 2.0 GB the ranks hold at full) "
        "would lift the loader to 40.0 batches/s (raw_sample's capacity, 4.0× the step's demand of "
        "10.0) from the second epoch on, once per node (a cache each worker fills for itself holds it "
        "once per worker)"
    )


def test_a_cache_larger_than_the_memory_is_said_not_to_fit() -> None:
    w = ask({"processed_sample": 500.0, "raw_sample": 40.0, "full": 8.0}, sample_bytes=3 * 512 * 512 * 4)
    assert w is not None and w.fits is False
    assert "(50,000 samples × 3.1 MB = 157.3 GB; does not fit in 80% of the job's 32.0 GB" in sentence(w)


def test_caching_above_a_random_transform_names_the_draws_it_would_freeze() -> None:
    # Only the processed samples keep up: the cache would hold the crops and jitters of one draw.
    w = ask({"processed_sample": 500.0, "transform:1": 9.0, "raw_sample": 9.0, "full": 8.0})
    assert w is not None and w.rung == "processed_sample"
    assert w.frozen == ("RandomResizedCrop", "ColorJitter")
    assert sentence(w).endswith(
        "; the cache would replay the draw of RandomResizedCrop, ColorJitter every epoch: that changes "
        "the training, cache above them only knowingly"
    )
    cut = ask({"processed_sample": 500.0, "transform:1": 30.0, "raw_sample": 9.0, "full": 8.0})
    assert cut is not None and (cut.rung, cut.frozen) == ("transform:1", ("RandomResizedCrop",))
    assert cut.holds == "the samples after transform 1/4"


def test_nothing_to_say_where_no_cached_rung_keeps_up_or_the_size_is_unknown() -> None:
    assert ask({"processed_sample": 10.2, "raw_sample": 9.0, "full": 8.0}) is None  # within 5 %: no
    unknown = ask({"processed_sample": 500.0, "raw_sample": 40.0, "full": 8.0}, limit_gb=None)
    assert unknown is not None and unknown.fits is None
    assert "the job's memory limit is not known" in sentence(unknown)


def test_a_stream_gets_the_what_if_unsized_and_says_why() -> None:
    """A stream has no length: what caching would give is said, its size is not guessed."""
    w = ask({"processed_sample": 500.0, "raw_sample": 40.0, "full": 8.0}, samples=None)
    assert w is not None and (w.rung, w.samples, w.sample_bytes, w.total_gb, w.fits) == (
        "raw_sample",
        None,
        None,
        None,
        None,
    )
    assert sentence(w).startswith(
        "what if: caching the raw samples (decoded, before the transforms) in memory (not sized: the "
        "data set is a stream, without a length; such a cache holds every sample an epoch reads, at "
        "that stage) would lift the loader to 40.0 batches/s"
    )
