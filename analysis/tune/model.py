"""The pipeline model behind `harness tune`: every DataLoader configuration's throughput, from
the measurements of a few.

**What is profiled**: a `Profile` (below), per rank, made from a few measured runs by
analysis/tune/fit.py, whose docstring says where each of its figures comes from.

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

The delivery recurrence itself (numpy, every configuration at once) is analysis/tune/delivery.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from analysis.noise import MARGIN
from analysis.tune import delivery
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
    """What the model needs, per rank; see analysis/tune/fit.py's docstring for where each comes
    from."""

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
may gain (tune.trust.no_gain): on the erratic reader, 4 workers with prefetch 8 lose 0.4 % to
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
    family = delivery.family(
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
    corner (analysis/tune/trust.py), not one's high against the other's low."""


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
