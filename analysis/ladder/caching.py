"""What caching a stage's output in memory would give: Plumber's question, from the ladder.

Each cached sample-level rung (processed_sample, transform:<k>, raw_sample, raw_bytes) is
already that experiment: the loader serving one stage's output from memory, with the stages
below it cut away, and its capacity timed alone. So where `full`'s loader is not shown to
keep up with the step's demand and a cached rung's loader is shown above it (beyond the
margin, interval and all: the verdict judges it, `keeps_up` here), caching that stage's output
for the whole
data set would lift the loader to that rung's capacity, from the second epoch on (the first
still reads and computes everything) — provided it fits in memory. The rows carry what that
takes: the bytes of one cached value (`cached_sample_bytes`), the data set's samples, the job's
memory limit on the node and the memory the ranks already hold at `full`.

The rung chosen is the lowest of the ladder so shown: it caches the least processing
(the encoded bytes before decoding, the raw samples before the transforms), so the transforms
that stay live keep drawing new random augmentations each epoch. A cache above a random
transform (processed_sample, or a transform:<k> cut below one) would replay the same draw every
epoch, which changes the training; the line names those transforms.

The cache is counted once per node (shared memory, or the page cache of a local copy of the
data): a cache each DataLoader worker fills for itself holds it once per worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness_schema import rungs as rung_names

FIT_SHARE = 0.8
"""Of the job's memory limit, what the ranks' memory and the cache may take together: the rest
is headroom for the page cache, the workers' batches in flight and the allocator's slack."""

RANDOM_TRANSFORMS = (
    "ColorJitter",
    "AutoAugment",
    "RandAugment",
    "TrivialAugmentWide",
    "AugMix",
    "GaussianBlur",
    "GaussianNoise",
    "ElasticTransform",
)
"""torchvision transforms that draw anew at each call without "Random" in their name."""


@dataclass(frozen=True, slots=True)
class CachingWhatIf:
    rung: str
    holds: str
    """What the cache holds, in words."""
    sample_bytes: float | None
    samples: int | None
    """None for a stream without a length: the cache is not sized (its samples would have to
    be read in the rank's own process, see ladder.cached_value_bytes). A stream with one
    (LitData's) is sized from its len()."""
    capacity: float
    """Batches/s of the rung's loader: what the loader would deliver from the cache."""
    demand: float
    limit_gb: float | None
    in_use_gb: float
    frozen: tuple[str, ...]
    """Random transforms above the cut, whose draw the cache would replay every epoch."""

    @property
    def total_gb(self) -> float | None:
        if self.sample_bytes is None or self.samples is None:
            return None
        return self.sample_bytes * self.samples / 1e9

    @property
    def fits(self) -> bool | None:
        if self.limit_gb is None or self.total_gb is None:
            return None
        return self.total_gb + self.in_use_gb <= FIT_SHARE * self.limit_gb


def what_if(
    rungs: Sequence[str],
    capacity: Mapping[str, float],
    keeps_up: Mapping[str, bool],
    demand: float,
    sample_bytes: Mapping[str, float],
    samples: int | None,
    limit_gb: float | None,
    in_use_gb: float,
    transform_names: Sequence[str],
) -> CachingWhatIf | None:
    """The lowest cached rung whose loader keeps up, with what caching its stage would take;
    None where no cached rung keeps up, or a map-style data set's value could not be sized.
    A stream (`samples` None: no length) gets the what-if unsized: its cache holds what an
    epoch of it reads, which nothing here can count."""
    cached = [r for r in rungs if r != "full" and rung_names.is_sample_level(r) and keeps_up.get(r)]
    if not cached or samples == 0:
        return None
    rung = cached[-1]
    size = sample_bytes.get(rung)
    if samples is not None and (size is None or not size > 0):
        return None
    return CachingWhatIf(
        rung=rung,
        holds=holds(rung, len(transform_names)),
        sample_bytes=None if samples is None or size is None else float(size),
        samples=None if samples is None else int(samples),
        capacity=float(capacity[rung]),
        demand=demand,
        limit_gb=limit_gb,
        in_use_gb=in_use_gb,
        frozen=frozen(rung, transform_names),
    )


def holds(rung: str, transforms: int) -> str:
    """What a cache at `rung` holds, in words."""
    if rung == "raw_bytes":
        return "the stored bytes (before decoding)"
    if rung == "raw_sample":
        return "the raw samples (decoded, before the transforms)"
    if rung == "processed_sample":
        return "the processed samples (after every transform)"
    k = rung_names.transform_cut(rung)
    return f"the samples after transform {k}" + (f"/{transforms}" if transforms else "")


def frozen(rung: str, names: Sequence[str]) -> tuple[str, ...]:
    """The random transforms the cache would hold the output of."""
    if rung in ("raw_bytes", "raw_sample"):
        return ()
    cut = len(names) if rung == "processed_sample" else (rung_names.transform_cut(rung) or 0)
    return tuple(n for n in names[:cut] if "Random" in n or n in RANDOM_TRANSFORMS)


def size_text(w: CachingWhatIf, held_at: str = "at full") -> str:
    """The cache's size against the job's memory: "N samples × B = T; fits in ..."; for a
    stream, that it has no size."""
    if w.samples is None or w.sample_bytes is None or w.total_gb is None:
        return (
            "not sized: the data set is a stream, without a length; such a cache holds every "
            "sample an epoch reads, at that stage"
        )
    size = f"{w.samples:,} samples × {_bytes(w.sample_bytes)} = {_bytes(w.total_gb * 1e9)}"
    if w.fits is None:
        return f"{size}; the job's memory limit is not known"
    verb = "fits" if w.fits else "does not fit"
    return (
        f"{size}; {verb} in {FIT_SHARE:.0%} of the job's {w.limit_gb:.1f} GB with the "
        f"{w.in_use_gb:.1f} GB the ranks hold {held_at}"
    )


def replayed(transforms: Sequence[str]) -> str:
    """The clause naming the random transforms whose draw a cache would replay ("" if none)."""
    if not transforms:
        return ""
    return (
        f"; the cache would replay the draw of {', '.join(transforms)} every epoch: "
        f"that changes the training, cache above {'it' if len(transforms) == 1 else 'them'} only knowingly"
    )


def transform_names(value: object) -> list[str]:
    """The rows' `transform_names` column (names joined by commas, "" for none) as a list."""
    return [n for n in str(value or "").split(",") if n]


def sentence(w: CachingWhatIf) -> str:
    """The what-if, in one line: what to cache, its size against the memory, what it gives."""
    text = (
        f"what if: caching {w.holds} in memory ({size_text(w)}) would lift the loader to "
        f"{w.capacity:.1f} batches/s ({w.rung}'s capacity, {w.capacity / w.demand:.1f}× the step's "
        f"demand of {w.demand:.1f}) from the second epoch on, once per node (a cache each worker "
        "fills for itself holds it once per worker)"
    )
    return text + replayed(w.frozen)


def _bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"
