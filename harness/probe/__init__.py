"""A user's own training script, measured by the harness: a probe of a few lines.

```python
import harness.probe as probe

loader = probe.loader(dataset, batch_size=256, num_workers=4, collate_fn=collate)  # your defaults
for i, batch in enumerate(probe.measure(loader, device)):  # batches on the device
    train_step(batch)
    if i == len(loader) - 1:
        with probe.untimed():  # your own periodic work, out of the measured windows
            validate()
```

**Alone** (`python train.py`): `loader` is `DataLoader(dataset, batch_size=256, ...)` with your
arguments, and `measure` yields its batches moved to `device` (`batches.to_device`), one pass
over the loader (or `epochs=`, `steps=`), timing each step as the Jean Zay course's chronometer
does (`next()` plus the copy). At the end it prints one line: what the chronometer saw.

**Under the harness** (a spec whose workload is `script: train.py`): the job sets
`HARNESS_PROBE` (harness/execution/script.py). `loader` records your dataset and your
collate_fn, sampler or batch_sampler and other arguments, and builds the DataLoader with the
point's settings in place of yours for the settings the spec names (batch_size too, where the
spec gives one); those it does not name keep your values (Point.script_keeps).
`measure` opens the point and yields from `runner.measure_point`, the same rungs, window and
rows as a built-in workload: your loop trains on the cached device batch, the cached host
batch, the cached processed sample (and the sample-level rungs your dataset offers), then the
live loader, with the loader's capacity timed alone after each sample-level rung.

The loop contract: the loader's `len()` is the number of batches `measure` yields to the loop
(`loop_length.batches_per_loop`; untimed batches fill what a short warmup did not take, and one
closes the loop), so that code sized by it (an LR schedule, "the last batch of the epoch")
lands where the script expects. When the loop asks for the batch after the last, the point is
measured and written: the probe ends the process (SystemExit(0)) unless `keep_running=True`,
so that no epoch, validation or checkpoint runs after the measurement. A loop that stops early
(`break`) leaves failed rows that say so.

Under DDP, `init_distributed()` joins the process group from the torchrun-style variables the
job sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and returns
the rank's device; a script that calls `torch.distributed.init_process_group` itself works as
well (the probe uses its group, or joins one for its own barriers when there is none). A
script that launches ranks of its own (mp.spawn, a `tcp://` group of another size) is refused.

The package, a module per concept: `alone` (the chronometer), `handshake` (the job: reading
HARNESS_PROBE, telling it the milestones, refusing the script's own ranks, the done set),
`recording` (the script's loader recorded and rebuilt with the point's settings, its
announced length), `harnessed` (the point measured in the script's loop), `session` (what the
probe holds between calls), `loop_settings` and `yielded` (what the loop is given).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader

from harness.execution import batches, dataloader
from harness.execution.loop_length import batches_per_loop
from harness.execution.probe_job import ProbeJob
from harness.probe import alone, handshake, harnessed, recording, session
from harness.probe.alone import summary
from harness.probe.loop_settings import SETTING_NAMES, Settings, settings_alone, settings_of
from harness.probe.recording import loop_length
from harness.probe.yielded import Batches, Copy, mover
from harness.sources.recorded import Recorded
from harness.workloads.loader_factory import LOADER_SETTINGS, one_shot

__all__ = [
    "Settings",
    "batches_per_loop",
    "init_distributed",
    "loader",
    "loop_length",
    "measure",
    "settings",
    "summary",
    "under_harness",
    "untimed",
]


def under_harness() -> bool:
    """Whether this process is a rank of a harness point (HARNESS_PROBE is set)."""
    return handshake.environ_job() is not None


def loader(dataset: Any, batch_size: int | None = 1, **kwargs: Any) -> DataLoader[Any]:
    """Your DataLoader: `DataLoader(dataset, batch_size, **kwargs)` alone; under the harness,
    the same dataset, collate_fn, sampler or batch_sampler and other arguments with the
    point's DataLoader settings in place of yours, and a `len()` that is the number of batches
    `measure` will yield to your loop."""
    job = handshake.this_job()
    session.remember({"batch_size": batch_size, **{k: kwargs[k] for k in LOADER_SETTINGS if k in kwargs}})
    if job is None:
        return DataLoader(dataset, batch_size=batch_size, **kwargs)
    return recording.point_loader(job, dataset, batch_size, kwargs, session.given_non_blocking())


def measure(
    source: Iterable[Any],
    device: torch.device | str,
    *,
    epochs: int = 1,
    steps: int | None = None,
    non_blocking: bool | None = None,
    batch_samples: Callable[[Any], int] | None = None,
    memory_format: torch.memory_format | None = None,
    copy: Copy | None = None,
    keep_running: bool = False,
) -> Iterator[Any]:
    """Yield the batches your loop trains on, on `device`.

    Alone: `epochs` passes over `source` (at most `steps` batches), copied with
    `non_blocking` (default: the one given to `settings()`, else when the loader pins memory),
    then one line on stderr. Under the harness: the point's rungs and window, whatever `epochs`
    and `steps` say, then the process ends (`keep_running=True`: the loop ends and the script
    goes on). The copy is `copy(batch, non_blocking=...)` where given, else every tensor to
    `device` (with `memory_format` on those it applies to): either way timed as loading.
    `batch_samples(batch) -> int` counts the samples of a batch where its tensors' leading
    dimension cannot (batches.count_samples)."""
    if epochs < 1 or (steps is not None and steps < 1):
        raise ValueError(f"epochs and steps must be >= 1 (got epochs={epochs}, steps={steps})")
    job = handshake.this_job()
    if job is not None and (once := one_shot(source)):
        handshake.refuse(job, once)  # before the check run stops: `harness plan` refuses it
    if job is not None and job.check:
        handshake.checked(job)
    count = batch_samples or batches.count_samples
    target = torch.device(device)
    session.state.device = target
    if non_blocking is None:
        non_blocking = session.given_non_blocking()
    if job is None:
        pinned = bool(getattr(source, "pin_memory", False))
        move = mover(target, memory_format, copy, non_blocking if non_blocking is not None else pinned)
        passes = alone.passes(source, target, epochs, steps, move, count)
        return Batches(passes, lambda: alone.passes_length(source, epochs, steps))
    how = harnessed.How(device=target, memory_format=memory_format, copy=copy, keep_running=keep_running)
    return harnessed.harnessed(job, source, how, count, non_blocking)


@contextlib.contextmanager
def untimed() -> Iterator[None]:
    """Your own periodic work (validation, a checkpoint, logging) out of the measured window:
    the window's clock stops inside (the device synchronised on entry, so the step before is
    counted whole, and on exit, so the work's queued kernels are not charged to the next)."""
    device = session.state.device
    session.sync(device)
    session.clock.pause()
    try:
        yield
    finally:
        session.sync(device)
        session.clock.resume()


def settings(**mine: Any) -> Settings:
    """The DataLoader settings your loop runs with. Give your own values (as your flags say
    them: `settings(num_workers=args.num_workers, non_blocking=args.non_blocking, ...)`; those
    you leave out are your first `probe.loader`'s, else PyTorch's defaults): alone they come
    back as they are; under the harness, the point's, as its rows record them."""
    unknown = sorted(set(mine) - set(SETTING_NAMES))
    if unknown:
        raise TypeError(
            f"probe.settings: unknown setting(s) {', '.join(unknown)}; allowed: {', '.join(SETTING_NAMES)}"
        )
    given = session.remember(mine)
    job: ProbeJob | None = handshake.this_job()
    if job is None:
        return settings_alone(given)
    recorded = Recorded(dataset=None, parts=dataloader.LoaderParts(), own=given)
    return settings_of(recording.effective_point(job, recorded, given.non_blocking))


def init_distributed() -> torch.device:
    """Join the process group of the torchrun-style environment (when WORLD_SIZE > 1 and no
    group is joined yet) and return this rank's device: its own GPU (made the current one),
    or the CPU where no GPU is visible. Alone, one process: the device, and no group."""
    from harness.execution.device import choose_device
    from harness.execution.dist import DistEnv, init_process_group

    job = handshake.this_job()
    env = job.env if job is not None else DistEnv.from_environ()
    device = choose_device("auto", env.local_rank, env.local_world_size)
    init_process_group(env, device)
    return device


handshake.say_imported()
