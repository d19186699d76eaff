"""The rungs of the caching ladder: names, order and what each one still pays.

Torch-free on purpose: the spec validator and the analysis (on a login node) both need the
names and the order, and neither may import torch.
"""

from __future__ import annotations

import re

# From the bound (everything cached on the device) down to the full pipeline; the drop between
# two neighbours is the cost of the stage between them: the method of C. Rand's caching article
# (Towards Data Science, 2025; his articles: https://towardsdatascience.com/author/chaimrand/)
LADDER: tuple[str, ...] = (
    "device_batch",
    "host_batch",
    "processed_sample",
    "raw_sample",
    "raw_bytes",
    "full",
)

BOUND_RUNGS: tuple[str, ...] = ("host_batch", "device_batch")
"""The batch-level rungs, which give the step's demand (the bound), in the order one is chosen:
host_batch first, as it pays the host-to-device copy that a fresh batch pays."""

TRANSFORM_RUNG = re.compile(r"^transform:(\d+)$")


def is_rung(name: str) -> bool:
    return name in LADDER or TRANSFORM_RUNG.match(name) is not None


def transform_cut(name: str) -> int | None:
    """`transform:k` caches the output of the first k transforms; None for other rungs."""
    m = TRANSFORM_RUNG.match(name)
    return int(m.group(1)) if m else None


def ladder_position(name: str) -> float:
    """Sort key, bound first. `transform:k` sits between processed_sample and raw_sample:
    larger k caches more, so it is closer to processed_sample."""
    k = transform_cut(name)
    if k is not None:
        return LADDER.index("raw_sample") - 1 + 1 / (k + 2)
    return float(LADDER.index(name))


def is_sample_level(name: str) -> bool:
    """A rung that still reads from the dataset through the DataLoader (not a cached batch)."""
    return is_rung(name) and name not in BOUND_RUNGS


def allowed_text() -> str:
    return ", ".join(LADDER) + ", transform:<k>"
