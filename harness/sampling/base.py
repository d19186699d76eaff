"""The `Sampler` protocol: one source of figures that a rank's sampling thread
(timeline.RankSampler) reads at `hz` while the point runs, and once more at each phase's edges.

Two sources hold it: the host's (host.HostSampler: CPU time of the rank and its workers,
memory) and the rank's GPU (nvml.GpuSampler). A reading is cumulative where differences are
what mean something (CPU seconds, energy), so that the timeline's phases are differences of
two readings. A third source (a network's counters, say) is one class of this protocol, and a
field of timeline_file.Sample for its reading.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

ReadingT_co = TypeVar("ReadingT_co", covariant=True)


@runtime_checkable
class Sampler(Protocol[ReadingT_co]):
    @property
    def available(self) -> bool:
        """Whether there are figures to read at all (False: `reason` says why)."""
        ...

    @property
    def reason(self) -> str:
        """Why there are no figures ("" while there are)."""
        ...

    def read(self, *, memory: bool | None = None, exact: bool = False) -> ReadingT_co | None:
        """One reading; None once the source cannot be read. `memory`: True reads the costly
        figures (a process tree's memory) now, False skips them, None reads them when due;
        `exact`: at a phase's edge, everything read now rather than when due. A source with
        nothing costly or deferred ignores both."""
        ...
