"""What `measure` hands the script's loop, alone and under the harness: its batches with a
`len()` where the number is known (`Batches`), each copied to the device by the copy the
chronometer times (`mover`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from harness.execution import batches

Copy = Callable[..., Any]
"""`copy(batch, non_blocking=...) -> batch on the device`: the script's own copy, timed as
loading (the course's `images.to(gpu, non_blocking=..., memory_format=torch.channels_last)`)."""


class Batches(Iterator[Any]):
    """What `measure` returns: its batches, and a `len()` where the number is known. Loops
    wrapped around it ask it (torchvision's references, DETR, DeiT, MAE...:
    `MetricLogger.log_every(iterable, ...)` calls `len(iterable)` before and at every step), as
    they ask the loader; a bare generator has none. Under the harness it is the number of
    batches the probe yields, as `len()` of `probe.loader`'s loader says."""

    def __init__(self, batches: Iterator[Any], length: Callable[[], int | None]) -> None:
        self._batches = batches
        self._length = length  # asked only when len() is: a loader's own len() may cost or fail
        self._retired = ""

    def __next__(self) -> Any:
        if self._retired:
            raise RuntimeError(self._retired)
        return next(self._batches)

    def retire(self, why: str) -> None:
        """A later `measure` took this one's place before it yielded a batch (a framework's
        `iter()` that only checks the loader can be iterated): asked for a batch after all, it
        raises `RuntimeError(why)` rather than measure the point a second time."""
        self._retired = why
        self.close()

    def __len__(self) -> int:
        length = self._length()
        if length is None:
            raise TypeError("len() of probe.measure(...): its loader has no len() (a stream)")
        return length

    def close(self) -> None:
        """As a generator's close(): the loop lets go of the probe (a break)."""
        closing = getattr(self._batches, "close", None)
        if closing is not None:
            closing()


def mover(
    device: torch.device, memory_format: Any, copy: Copy | None, non_blocking: bool
) -> Callable[[Any], Any]:
    """The copy the chronometer times: the script's own, else the generic one."""
    if copy is not None:
        own = copy
        return lambda batch: own(batch, non_blocking=non_blocking)
    return lambda batch: batches.to_device(
        batch, device, non_blocking=non_blocking, memory_format=memory_format
    )
