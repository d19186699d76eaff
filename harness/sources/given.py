"""A loader the harness did not build, measured as it is (harness/execution/given_loader.py
says which rung reads what): a `workload.loader` factory's, or a script's loader that is not
torch's DataLoader itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.execution import dataloader, given_loader
from harness.sources.base import Stream


@dataclass(frozen=True, kw_only=True, slots=True)
class GivenSource:
    given: given_loader.GivenLoader
    batch_size: Any
    where: dataloader.Placement
    timeout_s: float = 0

    @property
    def dataset(self) -> Any:
        return self.given.dataset

    def stream(self, rung: str) -> Stream:
        timeout_s = self.timeout_s
        return given_loader.build_stream(rung, self.given, self.batch_size, self.where, timeout_s=timeout_s)

    def in_threads(self) -> bool:
        return given_loader.in_threads(self.given.loader)
