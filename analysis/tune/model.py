"""The pipeline model behind `harness tune`: every DataLoader configuration's throughput, from
the measurements of a few.

**What is profiled** (a `Profile`, fitted by `fit_profile` from two ladder points of the same
settings: `num_workers=0` and `num_workers=k`, rungs `host_batch` and `full`, with the loader's
capacity timed alone; then `with_plateau` from one run of the grid's most workers, the
hand-off):

- the step's demand: `step_s`, seconds a train step computes per batch: the median of the
  bound rung's period (`host_batch`: the step and the copy a fresh batch pays, nothing loaded)
  and the `full` rung's period less its wait for data, at both profile points (one window
  that met a busy spell of a shared machine does not set it);
- the main thread's load: `main_load_s`, the mean wait per batch at `num_workers=0`
  (`loading_time` at `full`: reading, transforms and collation, in series with the step);
- one worker's efficiency: `efficiency`, the loader's capacity at k workers (`loader_capacity`
  at `full`) over k times the main thread's rate (1 / `main_load_s`): what worker IPC, pickling
  and the workers' contention cost a worker against the main thread doing the same work;
- the workers' CPU: `cpu_s_per_batch`, core-seconds per batch in the workers (`loader_cores`
  over steps/s at `full`, k workers), and `cores`, the cores a rank's workers may use
  (`cpus_allotted` less the cores the rank's own process keeps busy on the bound rung);
- the reader's jitter, from the `num_workers=0` wait (where nothing hides it): a stalled
  batch waits `stall_s` longer (`loading_time_p99` − `loading_time_p50`), and a share
  `stall_share` of batches stall, so that the mean equals p50 + share × stall;
- memory: the rank's process tree at 0 workers, and what each worker adds (PSS);
- each further copy mode of the grid (`pin_memory`, `non_blocking`; `with_copy_mode`): the bound
  rung in that mode (the step with the copy it pays: pageable or pinned, blocking or not) over
  the bound rung in the profile's mode scales the step, and a plateau run in that mode gives its
  hand-off (the pin thread's work per batch shows there). Measured, not modelled: whether a
  copy overlaps the step depends on whether the step is bound by the host or the device, which
  no bandwidth figure says;
- where the spec's `rungs` name cached sample-level rungs (raw_sample, transform:<k>...), those
  rungs at the k-worker point, their loader's capacity timed alone: what the loader would
  deliver with that stage's output cached (`with_cache`, Plumber's question);
- an epoch restart without persistent workers: `restart_s`, the first `next()` of a rung at k
  workers (worker start-up and first batch), paid once per epoch of `epoch_steps` batches.

**The model** (`batches_per_s`), per rank:

- `num_workers=0`: the step and the load in series: 1 / (`step_s` + `main_load_s`).
- `num_workers=w`: the loader's capacity grows with the workers at one worker's rate,
  `w × efficiency / main_load_s`, until the workers' cores run out: it never exceeds
  `cores / cpu_s_per_batch` (a roofline: a read that sleeps uses no core, so a reader waiting
  on storage scales past the cores, a CPU-bound transform does not). Each worker then takes
  w / capacity seconds a batch on average, stalls included.
- The delivery, batch by batch (`queue_period`): a deterministic recurrence of what
  PyTorch's `_MultiProcessingDataLoaderIter` does (torch/utils/data/dataloader.py, 2.x):
  `_reset` primes `prefetch_factor × num_workers` indices (`_try_put_index`, which refuses
  more than that many outstanding); each index goes to the next worker of
  `_worker_queue_idx_cycle`, an `itertools.cycle` over the workers (strict turn, with
  `in_order`, the default); `_process_data` puts one new index each time `_next_data`
  returns a batch to the step; `_next_data` returns batch `_rcvd_idx` and no other (a batch
  that arrived early waits in `_task_info`), so a late batch holds the step even where later
  ones are ready; a worker serves its own index queue in order. So batch k is dealt to worker
  k mod w when batch k − w × prefetch is taken (the first w × prefetch at once); that worker
  starts it when it has finished batch k − w, and takes its mean time without stalls plus
  the batch's stall; the step takes batch k when it is ready and the previous step and
  hand-off are done. The stalls: `stall_s` on a share `stall_share` of the batches, placed by
  fixed draws (QUEUE_SEED: the same places for every configuration and every profile, so that
  neighbours compare smoothly and a prediction is the same each time; QUEUE_DRAWS draws of
  QUEUE_BATCHES batches, averaged). The period is the step's in steady state. This is what
  the mean rates alone miss: where the workers only just meet the step (7 workers of 59 ms
  under an 8 ms step on the 193-point grid of benchmarks/tune_truth.py), the step waits for
  a stalled batch while the other workers fill their `prefetch` slots and sit idle: 89 % of
  the step's rate where the mean rate says 95 %. A worker slower than the step is never idle
  and delivers at its mean rate; a prefetch that covers a stall absorbs it; the batches
  queued behind a stalled one on its worker are late too; all fall out of the recurrence.
  `prefetch_needed` is the smallest prefetch_factor whose lead covers one stall. A loss to
  the queue under QUEUE_RESOLUTION of the period is none (`stall_wait`).
- `handoff_s` is what the rank's own thread pays to take each batch from the workers, even a
  ready one (the result queue, unpickling), in series with the step: it keeps the plateau
  under the bound rung's rate. It is measured, not assumed (`with_plateau`): one more profile
  run, in the same round, at the grid's most workers and prefetch (`plateau_config`, the
  likeliest to run on the step's side), its period less the model's; ignored where the fit
  puts that run on the loader's side, or where the hand-off is within the tie margin of the
  step.
- Without `persistent_workers`, each epoch pays `restart_s` once: `restart_s / epoch_steps`
  per batch.
- samples/s = batches/s × batch size × ranks (the ranks are alike and independent).

**What it assumes, and when it is wrong.** The efficiency is fitted at one worker and held for
every count: the sublinear part of the curve comes from the cores' roof, not from a fit over
worker counts (a loader whose workers slow each other down before the cores run out, a lock or
a shared queue, is then overestimated beyond the profile). Workers are alike and their work per
batch does not depend on how many there are (true for reads and transforms; not where workers
share a cache or a disk's bandwidth, which the roofline does not know: a shared resource other
than cores makes the model optimistic beyond the profiled worker count). The main process is
not itself a bottleneck (unpickling: a main thread that saturates makes the model
optimistic for many workers). The copy settings (`pin_memory`, `non_blocking`) change the step's
side only: each mode's step and hand-off are measured (below), its loader side is the profile's;
with `num_workers=0` the main thread pins each batch in series, which the model does not add.
The stalls are independent from batch to batch (the recurrence places them at random,
the profile's share of them), all of one length (p99 − p50 of the wait at num_workers=0), and
independent of which worker reads; bursts of stalls (a storage server busy for seconds, every
worker at once) defeat any prefetch and the model then predicts too much for prefetch. Workers
wait for a free core only on average (the roofline stretches every worker's time alike), not
batch by batch. `in_order=False` (a DataLoader that hands out batches as they come) is not
modelled: the model is the in-order delivery's. Memory is PSS per worker, not the prefetched
batches. Where the model is wrong, `harness tune` finds out by measuring: it measures the
predicted choice and its neighbours on each axis, and where the measurements contradict the
prediction it goes on measuring along that axis (analysis/tune/search.py).

Torch-free (numpy: the recurrence runs every configuration of a profile at once, a column
each; a 193-point grid with its intervals' 8 corner profiles in about 0.5 s): the analysis
imports it, and so do the unit tests, which check it on synthetic profiles against answers
computed by hand and against tests/fixtures/tune_sim.py's event simulation of the DataLoader
(the stalls' queue), with the real DataLoader's figures in docs/concepts/tune.md.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from analysis.noise import MARGIN
from harness_schema.settings import WORKER_ONLY

MODELLED: tuple[str, ...] = ("num_workers", *WORKER_ONLY)
"""The loader settings the model predicts from the loader's side of the profile."""
COPY: tuple[str, ...] = ("pin_memory", "non_blocking")
"""The settings of the host-to-device copy: measured, not modelled. Each copy mode of the grid
gets its own step (its bound rung: the step with the copy that mode pays) and its own hand-off
(a plateau run in that mode: the pin thread's work included); the loader's side is shared."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """One grid point's modelled settings."""

    num_workers: int
    prefetch_factor: int | None = 2
    persistent_workers: bool = False
    pin_memory: bool = False
    non_blocking: bool = False

    def cost(self) -> tuple[int, bool, int, bool, bool]:
        """Cheapest first: fewer workers, then no persistent workers, then less prefetch (the
        recommendation's order: fewer processes, then less memory held), then pageable memory
        (pinned pages are locked out of the host's memory, and pinning takes a thread)."""
        return (
            self.num_workers,
            self.persistent_workers,
            self.prefetch_factor or 0,
            self.pin_memory,
            self.non_blocking,
        )

    def text(self) -> str:
        copy = "".join(f" {k}=true" for k in COPY if getattr(self, k))
        if self.num_workers == 0:
            return f"num_workers=0{copy}"
        return (
            f"num_workers={self.num_workers} prefetch_factor={self.prefetch_factor} "
            f"persistent_workers={str(self.persistent_workers).lower()}{copy}"
        )

    def copy_mode(self) -> str:
        """The copy settings as a key of `Profile.copy_modes`."""
        return " ".join(f"{k}={str(getattr(self, k)).lower()}" for k in COPY)

    @staticmethod
    def of(settings: Mapping[str, Any]) -> Config:
        workers = int(settings["num_workers"])
        prefetch = settings.get("prefetch_factor")
        return Config(
            num_workers=workers,
            prefetch_factor=None if workers == 0 or prefetch is None else int(prefetch),
            persistent_workers=bool(settings.get("persistent_workers", False)) and workers > 0,
            pin_memory=bool(settings.get("pin_memory", False)),
            non_blocking=bool(settings.get("non_blocking", False)),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    """What the model needs, per rank; see the module docstring for where each comes from."""

    batch_size: int
    ranks: int = 1
    step_s: float
    main_load_s: float
    efficiency: float = 1.0
    cpu_s_per_batch: float
    cores: float
    stall_s: float = 0.0
    stall_share: float = 0.0
    memory_gb: float = 0.0
    memory_per_worker_gb: float = 0.0
    restart_s: float = 0.0
    epoch_steps: int | None = None
    profiled_workers: int = 1
    main_cores: float = 0.0
    """Cores the rank's own process keeps busy on the bound rung (taken from `cores` already;
    a what-if takes it from the other node's share too)."""
    handoff_s: float = 0.0
    """Seconds per batch the rank's own thread spends taking a batch from the workers (the
    result queue, unpickling, the loader's bookkeeping), in series with the step even when the
    batch is ready: what keeps the plateau under the bound rung's rate (`with_plateau`)."""
    copy_mode: str = "pin_memory=false non_blocking=false"
    """The copy settings `step_s` and `handoff_s` were measured in (Config.copy_mode)."""
    copy_modes: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Other copy modes of the grid: their (step_s, handoff_s), each measured in its own mode
    (`with_copy_mode`); the loader's side of the profile is shared by all."""
    cached: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Cached sample-level rungs profiled at `profiled_workers`: their loader's (capacity in
    batches/s, core-seconds a batch), for the caching what-if (`with_cache`)."""
    windows: int = 1
    """The windows of each profile point the figures are the median of (analysis/tune/windows.py)."""
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """The 95 % interval of each quantity taken from the windows (windows.UNCERTAIN): the
    step, the worker's rate (main_load_s, efficiency), the stall share, the hand-off."""

    def __post_init__(self) -> None:
        for name in ("step_s", "main_load_s", "efficiency", "cores"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"profile: {name} must be > 0 (got {value})")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Profile:
        modes = {k: (float(v[0]), float(v[1])) for k, v in data.get("copy_modes", {}).items()}
        cached = {k: (float(v[0]), float(v[1])) for k, v in data.get("cached", {}).items()}
        spans = {k: (float(v[0]), float(v[1])) for k, v in data.get("intervals", {}).items()}
        return Profile(**{**data, "copy_modes": modes, "cached": cached, "intervals": spans})

    def in_mode(self, c: Config) -> Profile:
        """The profile of `c`'s copy mode alone: its step and hand-off (the profile itself where
        that is its own mode, or where `c`'s was not profiled)."""
        mode = c.copy_mode()
        if mode == self.copy_mode or mode not in self.copy_modes:
            return self
        step, handoff = self.copy_modes[mode]
        return replace(self, step_s=step, handoff_s=handoff, copy_mode=mode, copy_modes={})


def worker_rate(p: Profile) -> float:
    """Batches/s one worker delivers, alone with its cores."""
    return p.efficiency / p.main_load_s


def core_roof(p: Profile) -> float:
    """Batches/s the workers' cores allow at most (inf for a loader that uses none)."""
    return math.inf if p.cpu_s_per_batch <= 0 else p.cores / p.cpu_s_per_batch


def capacity(p: Profile, workers: int) -> float:
    """Batches/s the loader delivers with no step: w workers at one's rate, under the cores."""
    if workers == 0:
        return 1 / p.main_load_s
    return min(workers * worker_rate(p), core_roof(p))


def stall_wait(p: Profile, workers: int, prefetch: int) -> float:
    """Mean seconds per batch the delivery loses to its queue: the recurrence's period
    (`queue_period`) over the larger of the step's side (the step and its hand-off) and the
    loader's mean period (1 / capacity). The stalls the prefetch does not absorb, the batches
    queued behind a stalled one on its worker, and the workers that sit idle with their
    `prefetch` batches done while the step waits for a late one (in order): what neither the
    step nor the loader's mean rate says."""
    floor = max(p.step_s + p.handoff_s, 1 / capacity(p, workers))
    excess = queue_period(p, workers, prefetch) - floor
    return excess if excess > QUEUE_RESOLUTION * floor else 0.0


QUEUE_RESOLUTION = 0.01
"""A loss to the queue under this share of the period is reported as none (`stall_wait`). The
recurrence's figure is the mean over a finite draw of stalls (QUEUE_DRAWS × QUEUE_BATCHES
batches: ±0.7 % from one set of draws to another at the 193-point grid's knee), so it cannot
tell a configuration that absorbs its stalls from one that loses a few tenths of a percent
to them; and the search reads a dearer neighbour predicted above the choice at all as one that
may gain (tune.search.no_gain): on the erratic reader, 4 workers with prefetch 8 lose 0.4 % to
the queue (49.8 batches/s against the step's 50), and without this every draw measured 6
workers too, for 20 % more device time."""


def prefetch_needed(p: Profile, workers: int) -> int:
    """The smallest prefetch_factor whose lead absorbs a stall with `workers` workers."""
    if workers == 0:
        raise ValueError("prefetch_needed: num_workers=0 has no prefetch")
    typical = max(0.0, 1 / worker_rate(p) - p.stall_share * p.stall_s)
    need = (typical + (p.stall_s if p.stall_share > 0 else 0.0)) / (workers * p.step_s)
    return max(1, math.ceil(need - 1e-9))


def step_side(p: Profile, c: Config) -> float:
    """Seconds per batch the delivery takes with workers (`queue_period`): the step, the
    hand-off of each batch, and what the queue loses to stalls and in-order waits."""
    workers, prefetch = c.num_workers, c.prefetch_factor or 2
    return max(p.step_s + p.handoff_s, 1 / capacity(p, workers)) + stall_wait(p, workers, prefetch)


def batches_per_s(p: Profile, c: Config) -> float:
    """One rank's batches per second under configuration `c` (the module's model)."""
    p = p.in_mode(c)
    if c.num_workers == 0:
        return 1 / (p.step_s + p.main_load_s)
    period = step_side(p, c)
    if not c.persistent_workers and p.epoch_steps:
        period += p.restart_s / p.epoch_steps
    return 1 / period


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
_PREFETCH = (1, 2, 3, 4, 6, 8)
"""The prefetch factors one evaluation of the recurrence covers beside the one asked (every
worker count up to 16 or the one asked): a grid's configurations share a profile, so the first
asks for the whole family at numpy's cost of one."""


def queue_period(p: Profile, workers: int, prefetch: int) -> float:
    """Seconds per batch the DataLoader's delivery takes in steady state with `workers` workers
    and `prefetch` (the step and its hand-off included, the epoch restarts not): the
    recurrence of the module docstring, over QUEUE_BATCHES batches."""
    if workers < 1 or prefetch < 1:
        raise ValueError(f"queue_period: needs workers >= 1 and prefetch >= 1 (got {workers}, {prefetch})")
    family = _family(
        _worker_s(p),
        core_roof(p),
        p.stall_s if p.stall_share > 0 else 0.0,
        p.stall_share if p.stall_s > 0 else 0.0,
        p.step_s + p.handoff_s,
        max(16, workers),
        tuple(sorted({prefetch, *_PREFETCH})),
    )
    return family[(workers, prefetch)]


def _worker_s(p: Profile) -> float:
    return 1 / worker_rate(p)


@functools.lru_cache(maxsize=4096)
def _family(
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


def plateau_config(grid: Sequence[Config], profiled: int = 1) -> Config | None:
    """The grid's most workers with its most prefetch: the configuration likeliest to run at
    the step's side of the bound, where a run shows the hand-off (tune.model.with_plateau).
    None where the grid has no more workers than the fit's profile point."""
    beyond = [c for c in grid if c.num_workers > profiled]
    return max(
        beyond, key=lambda c: (c.num_workers, c.prefetch_factor or 0, c.persistent_workers), default=None
    )


def copy_modes(grid: Sequence[Config]) -> list[Config]:
    """One configuration of each copy mode of the grid, in the grid's order (the first is the
    mode the profile's fit is taken in)."""
    seen: dict[str, Config] = {}
    for c in grid:
        seen.setdefault(c.copy_mode(), c)
    return list(seen.values())


def configs_in_mode(grid: Sequence[Config], mode: Config) -> list[Config]:
    """The grid's configurations in `mode`'s copy mode."""
    return [c for c in grid if c.copy_mode() == mode.copy_mode()]


def with_plateau(p: Profile, c: Config, measured_batches_per_s: float) -> Profile:
    """The profile with `handoff_s` from a run of configuration `c`, one the model puts on the
    step's side of the bound (its loader faster than the step): the run's period less the step,
    the unabsorbed stalls and the epoch restarts the model counts, where that exceeds the tie
    margin of the step. A run the model puts on the loader's side says nothing of the hand-off:
    the profile is returned as it is."""
    if c.num_workers == 0 or not measured_batches_per_s > 0:
        return p
    if 1 / capacity(p, c.num_workers) > p.step_s + p.handoff_s:
        return p
    period = 1 / measured_batches_per_s
    if not c.persistent_workers and p.epoch_steps:
        period -= p.restart_s / p.epoch_steps
    handoff = period - step_side(p, c) + p.handoff_s
    # One run cannot tell a hand-off within the tie margin of the step from the machine's
    # noise (nor would the recommendation act on it): the plateau is then the step's.
    if handoff < MARGIN * p.step_s:
        return replace(p, handoff_s=0.0)
    return replace(p, handoff_s=handoff)


def with_copy_mode(
    p: Profile, mode: Config, bound_ratio: float, plateau: Config | None = None, plateau_rate: float = 0.0
) -> Profile:
    """The profile with `mode`'s copy mode added (`Profile.copy_modes`): its step is the
    profile's times `bound_ratio`, the bound rung's period in that mode over its period in the
    profile's own mode (what the copy costs the step, pinned or pageable, blocking or not, as
    measured: no bandwidth figure stands in for whether the copy overlaps); its hand-off from
    one run of `plateau`, a configuration in that mode, at `plateau_rate` batches/s
    (with_plateau: the pin thread's work shows there)."""
    if not bound_ratio > 0:
        raise ValueError(f"with_copy_mode: the bound rungs' ratio must be > 0 (got {bound_ratio})")
    own = replace(p, step_s=p.step_s * bound_ratio, handoff_s=0.0, copy_mode=mode.copy_mode(), copy_modes={})
    if plateau is not None:
        own = with_plateau(own, plateau, plateau_rate)
    return replace(p, copy_modes={**p.copy_modes, own.copy_mode: (own.step_s, own.handoff_s)})


def with_cache(p: Profile, capacity_at_profiled: float, cpu_s_per_batch: float) -> Profile:
    """The pipeline with a stage's output cached in memory (Plumber's what-if): the loader of a
    cached rung, profiled at `profiled_workers` workers, delivered `capacity_at_profiled`
    batches/s on `cpu_s_per_batch` core-seconds a batch. A worker then loads a batch in
    profiled_workers × efficiency / capacity (the efficiency held, as for every count); nothing
    is read from storage, so nothing stalls. The step, the hand-off, the copy modes, the
    cores and the restarts are the profile's. From the second epoch on: the first fills it."""
    if not capacity_at_profiled > 0:
        raise ValueError(f"with_cache: the cached rung's capacity must be > 0 (got {capacity_at_profiled})")
    return replace(
        p,
        main_load_s=p.profiled_workers * p.efficiency / capacity_at_profiled,
        cpu_s_per_batch=max(0.0, cpu_s_per_batch),
        stall_s=0.0,
        stall_share=0.0,
    )


def samples_per_s(p: Profile, c: Config) -> float:
    return batches_per_s(p, c) * p.batch_size * p.ranks


def memory_gb(p: Profile, c: Config) -> float:
    """The rank's process tree: the main process and one PSS share per worker."""
    return p.memory_gb + c.num_workers * p.memory_per_worker_gb


@dataclass(frozen=True, slots=True)
class Prediction:
    config: Config
    samples_per_s: float
    memory_gb: float
    bound: str
    """What limits it: "step" (the demand), "workers", "cores", "stalls" or "series"."""
    low: float | None = None
    high: float | None = None
    """The prediction's 95 % interval from the profile's (analysis/tune/windows.py); None
    where the profile has none."""
    corners: tuple[float, ...] = ()
    """samples/s under each corner profile (windows.corners, the same order for every
    configuration): two configurations share the profile, so their ratio is judged corner by
    corner (analysis/tune/search.py), not one's high against the other's low."""


def bound_of(p: Profile, c: Config) -> str:
    p = p.in_mode(c)
    if c.num_workers == 0:
        return "series"
    cap = capacity(p, c.num_workers)
    if 1 / cap > p.step_s + p.handoff_s:
        return "cores" if cap == core_roof(p) else "workers"
    return "stalls" if stall_wait(p, c.num_workers, c.prefetch_factor or 2) > 0 else "step"


def predict(p: Profile, grid: Iterable[Config]) -> list[Prediction]:
    return [Prediction(c, samples_per_s(p, c), memory_gb(p, c), bound_of(p, c)) for c in grid]


def cheapest_meeting(predictions: list[Prediction], margin: float = MARGIN) -> Prediction:
    """The cheapest configuration predicted within `margin` of the best prediction: the
    recommendation's rule (cheapest tied with the best), applied to the model."""
    if not predictions:
        raise ValueError("cheapest_meeting: no predictions")
    best = max(x.samples_per_s for x in predictions)
    meeting = [x for x in predictions if x.samples_per_s >= (1 - margin) * best]
    return min(meeting, key=lambda x: x.config.cost())


def fit_profile(
    zero: Mapping[str, float], some: Mapping[str, float], *, workers: int, batch_size: int, ranks: int = 1
) -> Profile:
    """A Profile from two profile points' figures (per rank, median over runs): `zero` at
    num_workers=0 and `some` at `workers` workers, each a mapping of row column → value with
    the bound rung's `bound_steps_per_s` and `bound_main_cores` added. Missing figures fall back
    to neutral values (no stalls, no memory growth, no restart)."""
    if workers < 1:
        raise ValueError(f"fit_profile: the second profile point needs workers >= 1 (got {workers})")
    main_load = zero["loading_time"]
    step = statistics.median(_step_estimates(zero) + _step_estimates(some))
    p50, p99 = _or(zero.get("loading_time_p50"), math.nan), _or(zero.get("loading_time_p99"), math.nan)
    stall_s = max(0.0, p99 - p50) if _number(p99 - p50) else 0.0
    share = min(1.0, max(0.0, (main_load - p50) / stall_s)) if stall_s > 0 else 0.0
    rate = some["steps_per_s"]
    cpu = some.get("loader_cores")
    main_cores = min(_or(zero.get("bound_main_cores"), 0.0), _or(some.get("bound_main_cores"), 0.0))
    mem0, memk = _or(zero.get("cpu_memory_gb"), math.nan), _or(some.get("cpu_memory_gb"), math.nan)
    per_worker = max(0.0, (memk - mem0) / workers) if _number(memk - mem0) else 0.0
    return Profile(
        batch_size=batch_size,
        ranks=ranks,
        step_s=step,
        main_load_s=main_load,
        efficiency=min(1.0, some["loader_capacity"] * main_load / workers),
        cpu_s_per_batch=_or(cpu, 0.0) / rate if rate > 0 else 0.0,
        cores=max(0.5, _or(some.get("cpus_allotted"), 1.0) - main_cores),
        stall_s=stall_s,
        stall_share=share,
        memory_gb=_or(mem0, 0.0),  # nan when unmeasured: _or turns it to 0
        memory_per_worker_gb=per_worker,
        restart_s=_or(some.get("first_step_loading_time"), 0.0),
        epoch_steps=int(some["epoch_steps"]) if _number(some.get("epoch_steps")) else None,
        profiled_workers=workers,
        main_cores=main_cores,
    )


def _step_estimates(figures: Mapping[str, float]) -> list[float]:
    """The step's compute per batch, two ways from one profile point: the bound rung's period,
    and the full rung's period less its wait for data. The fit takes the median of the four,
    so that one window that met a busy spell of the machine does not set the demand."""
    out = [1 / figures["bound_steps_per_s"]]
    rate, wait = figures.get("steps_per_s"), figures.get("loading_time")
    if _number(rate) and _number(wait) and rate > 0 and 1 / rate > wait:  # type: ignore[operator]
        out.append(1 / rate - wait)  # type: ignore[operator]
    return out


def what_if(p: Profile, *, gpus: int, cores: int, main_cores: float | None = None) -> Profile:
    """The same pipeline on a node with `gpus` ranks sharing `cores` cores: each rank's workers
    get cores // gpus less what its own process keeps busy (the profile's, unless given). The
    step and the per-batch costs are the profile's (a GPU's step from `step_ms: {from: ...}`
    on an emulated profile)."""
    if gpus < 1 or cores < 1:
        raise ValueError(f"what-if: gpus and cores must be >= 1 (got gpus={gpus}, cores={cores})")
    main = p.main_cores if main_cores is None else main_cores
    return replace(p, cores=max(0.5, cores // gpus - main), ranks=gpus)


def lightning_workers(cores: int, ranks: int) -> int:
    """PyTorch Lightning's suggestion: cpus // ranks - 1 (at least 0)."""
    return max(0, cores // ranks - 1)


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _or(x: float | None, default: float) -> float:
    return float(x) if _number(x) else default  # type: ignore[arg-type]
