"""A loader the harness builds from the spec: the workload's dataset and the user's collate,
sampler or batch sampler (dataloader.LoaderParts), with the point's DataLoader settings
(ladder.build_stream makes each rung's DataLoader, dataloader.make_loader)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.execution import dataloader, ladder
from harness.sources.base import Stream
from harness_schema.settings import LoaderSettings


@dataclass(frozen=True, kw_only=True, slots=True)
class BuiltSource:
    dataset: Any
    settings: LoaderSettings
    batch_size: Any
    """The point's batch size (the script's where the spec gives none; None where a batch
    sampler of its own says none)."""
    where: dataloader.Placement
    parts: dataloader.LoaderParts = field(default_factory=dataloader.LoaderParts)
    timeout_s: float = 0

    def stream(self, rung: str) -> Stream:
        return ladder.build_stream(
            rung,
            self.dataset,
            self.settings,
            self.batch_size,
            self.where,
            self.parts,
            timeout_s=self.timeout_s,
        )

    def in_threads(self) -> bool:
        return False  # a DataLoader: its workers are processes
