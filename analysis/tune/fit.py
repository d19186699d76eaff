"""The pipeline model's `Profile` made from measured runs: which runs make it (`plateau_config`,
`copy_modes`, `configs_in_mode`) and its figures from their rows (`fit_profile`, then
`with_plateau` and `with_copy_mode`).

Apart from the model (analysis/tune/model.py), which predicts from a profile whatever made it:
this is where each of the profile's figures comes from.

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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

from analysis.noise import MARGIN
from analysis.tune.model import Config, Profile, capacity, step_side


def plateau_config(grid: Sequence[Config], profiled: int = 1) -> Config | None:
    """The grid's most workers with its most prefetch: the configuration likeliest to run at
    the step's side of the bound, where a run shows the hand-off (with_plateau, below).
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


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _or(x: float | None, default: float) -> float:
    return float(x) if _number(x) else default  # type: ignore[arg-type]
