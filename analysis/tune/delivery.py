"""The DataLoader's delivery, batch by batch, as a recurrence: what the model's `queue_period`
(analysis/tune/model.py, whose docstring says what PyTorch's `_MultiProcessingDataLoaderIter`
does and why it matters) computes, for every worker count and prefetch factor of a profile at
once, a numpy column each, over fixed draws of where the stalls fall.

Apart from the model: this is the one part of it that simulates rather than states a rate, with
its own constants (how many batches, how many draws, which seed) and a cache of its answers;
it takes plain figures (seconds, shares, counts), not a Profile.
"""

from __future__ import annotations

import functools
import math

import numpy as np

QUEUE_BATCHES = 1000
"""Batches the delivery recurrence (`queue_period`) measures its period over, in each of its
QUEUE_DRAWS draws, after a warmup of at least twice the outstanding batches."""
QUEUE_DRAWS = 32
"""Independent draws of the stalls' places the recurrence averages (columns of one numpy
loop). A stall-bound configuration's period depends on how close its stalls fall: 4 draws of
2000 batches left the erratic reader's num_workers=4 prefetch_factor=4 1.2 % over a long
simulation's figure (46.8 against 46.3 batches/s), enough to call it tied with the step's 50
where the profile read the stall share a little low; 32 draws of 1000, within 0.3 % there and
within 0.9 % on every configuration of the knee checked (tests/analysis/tune/test_model.py),
for 0.5 s on a 193-point grid with its intervals' 8 corner profiles."""
QUEUE_SEED = 20240607
"""The stalls' places in the recurrence: one fixed draw for every configuration and every
profile (common random numbers: two neighbours of the grid meet the same stalls, so their
ratio is smooth and a prediction is the same each time it is asked)."""


@functools.lru_cache(maxsize=4096)
def family(
    worker_s: float,
    roof: float,
    stall_s: float,
    share: float,
    step_s: float,
    most: int,
    prefetches: tuple[int, ...],
) -> dict[tuple[int, int], float]:
    """queue_period for every worker count up to `most` and each of `prefetches`, at once."""
    pairs = [(n, f) for n in range(1, most + 1) for f in prefetches]
    # A column per configuration and draw of the stalls (QUEUE_DRAWS of them, the same for
    # every configuration), draw-major: column j is pair j mod len(pairs).
    workers = np.tile([n for n, _ in pairs], QUEUE_DRAWS)
    ahead = np.tile([n * f for n, f in pairs], QUEUE_DRAWS)
    # Each worker's period with w workers: its own, or its share of the cores' roof; the
    # stalls (sleeps: no core) are part of the mean and drawn apart below.
    period = np.maximum(worker_s, workers / roof) if math.isfinite(roof) else np.full(len(ahead), worker_s)
    base = np.maximum(0.0, period - share * stall_s)
    draw = np.repeat(np.arange(QUEUE_DRAWS), len(pairs))
    stalls = _stalls(stall_s, share, int(ahead.max()))
    periods = (
        _deliver(workers, ahead, base, stalls, draw, step_s).reshape(QUEUE_DRAWS, len(pairs)).mean(axis=0)
    )
    return {pair: float(x) for pair, x in zip(pairs, periods, strict=True)}


def _stalls(stall_s: float, share: float, most_ahead: int) -> np.ndarray:
    """Each batch's stall (seconds), a column per draw: `share` of the batches of the warmup
    and of the measured part each, exactly (the last one partly, so that the figure is smooth
    in the share), placed by QUEUE_SEED's draws."""
    warm = max(2 * most_ahead, QUEUE_BATCHES // 4)
    out = np.zeros((warm + QUEUE_BATCHES, QUEUE_DRAWS))
    if stall_s <= 0 or share <= 0:
        return out
    rng = np.random.default_rng(QUEUE_SEED)
    for draw in range(QUEUE_DRAWS):
        for start, length in ((0, warm), (warm, QUEUE_BATCHES)):
            rank = rng.permutation(length)  # the stalls take the first ranks: share × length of them
            out[start : start + length, draw] = stall_s * np.clip(share * length - rank, 0.0, 1.0)
    return out


def _deliver(
    workers: np.ndarray,
    ahead: np.ndarray,
    base: np.ndarray,
    stalls: np.ndarray,
    draw: np.ndarray,
    step_s: float,
) -> np.ndarray:
    """The delivery recurrence, every configuration at once (a column each): batch k is dealt
    to worker k mod w when batch k − w × prefetch is taken (the first w × prefetch at once);
    its worker starts it when that worker has finished its previous batch (k − w), and takes
    `base` plus the batch's stall (`stalls[k, draw]`: the column's draw); the main thread
    takes batches in order, each when it is ready and the previous step is done. Returns each
    column's seconds per batch over the measured part (the last QUEUE_BATCHES batches)."""
    total, m = len(stalls), len(workers)
    # Only the last `ring` batches are looked back at: a ring of rows (batch k in row k mod
    # ring; a row not yet written holds time 0, the iterator's start), so that memory does not
    # grow with the batches (64 workers × 6 prefetch factors × 32 draws: 12,288 columns).
    ring = int(ahead.max()) + 1
    ready, taken = np.zeros(ring * m), np.zeros(ring * m)
    cols = np.arange(m)
    free, start_s = np.zeros(m), np.zeros(m)
    for k in range(total):
        row = (k % ring) * m
        dealt = taken[((k - ahead) % ring) * m + cols]
        done = np.maximum(dealt, ready[((k - workers) % ring) * m + cols]) + base + stalls[k, draw]
        ready[row : row + m] = done
        take = np.maximum(done, free)
        taken[row : row + m] = take
        free = take + step_s
        if k == total - 1 - QUEUE_BATCHES:
            start_s = take
    return (take - start_s) / QUEUE_BATCHES
