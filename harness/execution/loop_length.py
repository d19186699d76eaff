"""How many batches a point yields to the loop that drives it: the length a script's loader
reports under the harness (`len(loader)`), so that code sized by it lands where the script
expects (an LR schedule of `len(loader) * epochs` steps, "the last batch of the epoch").

A rung and repeat yields its warmup and its window (`loop.window`): the spec's warmup, at
least the loader's stock, then up to DRAIN_FACTOR × stock more until the stock is used up,
and `steps` measured batches, rounded up to whole periods of a bursty delivery (a period is at
most the stock: up to stock − 1 more). The drain's and the rounding's lengths are decided while
it runs, so the count here is their longest (with `measure.seconds` the window's length is
known only as it runs, and so is an auto window's (`steps: auto`) past its least blocks: the
count is that without them, and the probe says when more came);
the probe fills what a rung did not take (a short drain, a failed or skipped rung) with
untimed batches after the last window, and one more untimed batch closes the loop: the last
window's clock stops when the loop asks for the batch after its last, so the loop's
last batch (where scripts validate and checkpoint) is never inside a window.

Torch-free: `harness plan` says the count before anything runs.
"""

from __future__ import annotations

from collections.abc import Collection

from harness.config.plan import Point
from harness.execution import steady
from harness_schema import rungs as rung_names
from harness_schema.settings import DRAIN_FACTOR

__all__ = [
    "CLOSING",
    "DRAIN_FACTOR",
    "batches_before_run",
    "batches_per_loop",
    "longest_warmup",
    "longest_window",
    "stock",
    "stock_decided_by_script",
    "unit_batches",
]

CLOSING = 1
"""The untimed batch after the last window (see the module's docstring)."""


def stock(point: Point, rung: str) -> int:
    """Batches the rung's loader can hold ready: num_workers × prefetch_factor for a rung that
    reads through the DataLoader (loader_stream.LoaderStream.stock), none for a cached batch."""
    if not rung_names.is_sample_level(rung) or not point.loader.num_workers:
        return 0
    return point.loader.num_workers * (point.loader.prefetch_factor or 0)


def longest_warmup(point: Point, rung: str) -> int:
    """The most batches `warmup.warm_up` takes for this rung."""
    held = stock(point, rung)
    return max(point.measure.warmup_steps, held) + DRAIN_FACTOR * held


def longest_window(point: Point, rung: str) -> int:
    """The most steps `loop.window` measures for this rung (without `measure.seconds`): `steps`
    rounded up to whole periods of a bursty delivery, a period being at most the stock; with
    steps: auto, its least blocks (steady.auto_least) at the longest period's blocks."""
    if point.measure.auto_window:
        periods = range(1, max(stock(point, rung), 1) + 1)
        return max(steady.auto_least(period) for period in periods)
    return point.measure.steps + max(stock(point, rung) - 1, 0)


def unit_batches(point: Point, rung: str) -> int:
    """The most batches one (rung, repeat) yields: its longest warmup and its window."""
    return longest_warmup(point, rung) + longest_window(point, rung)


def batches_per_loop(point: Point, done: Collection[tuple[str, int]] = ()) -> int:
    """The batches the probe yields to the script's loop for this point, exactly: every
    (rung, repeat) not in `done` at its longest, and the closing batch. `point` as it runs:
    with the script's own num_workers and prefetch_factor where it keeps them (the probe's
    effective point); before the script runs, `batches_before_run`."""
    return CLOSING + sum(
        unit_batches(point, rung)
        for repeat in range(point.measure.repeats)
        for rung in point.rungs
        if (rung, repeat) not in done
    )


def batches_before_run(point: Point) -> int | None:
    """What `harness plan` can say of a point before its script runs: the count, or None where
    it depends on the script's own num_workers or prefetch_factor (Point.script_keeps), which
    only the probe learns (its sample-level rungs' stock)."""
    if stock_decided_by_script(point):
        return None
    return batches_per_loop(point)


def stock_decided_by_script(point: Point) -> tuple[str, ...]:
    """The script's own settings (num_workers, prefetch_factor: Point.script_keeps) on which
    the point's count depends; none where the spec gives no workers (no stock, whatever
    prefetch_factor the script passes: PyTorch's rule makes it None) or no rung reads through
    the DataLoader."""
    own = tuple(k for k in ("num_workers", "prefetch_factor") if k in point.script_keeps)
    if "num_workers" not in own and not point.loader.num_workers:
        return ()
    if not any(rung_names.is_sample_level(rung) for rung in point.rungs):
        return ()
    return own
