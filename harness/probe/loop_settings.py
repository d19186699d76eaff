"""The DataLoader settings a script's loop runs with (`probe.settings()`): the point's under
the harness, as its rows record them; the script's own alone (its LoaderRecord, with PyTorch's
defaults where it gave none). A LoaderRecord's complete face: a script logs it, writes it as
JSON (`dataclasses.asdict`) and builds its other loaders with it, so it holds the settings
alone, not which of them were known."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from harness.config.plan import Point
from harness.execution.loader_record import LoaderRecord
from harness.workloads.loader_factory import LOADER_SETTINGS
from harness_schema.settings import LoaderSettings


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings(LoaderSettings):
    """The DataLoader settings a loop runs with (every loader setting, and the batch size): the
    point's under the harness (what its rows record), the script's own alone."""

    batch_size: int | None = None

    def dataloader(self) -> dict[str, Any]:
        """The DataLoader keywords among them, for the script's other loaders (validation):
        `DataLoader(val, batch_size=250, shuffle=False, **probe.settings().dataloader())`."""
        return {name: getattr(self, name) for name in LOADER_SETTINGS}


SETTING_NAMES = tuple(f.name for f in fields(Settings))


def settings_alone(record: LoaderRecord) -> Settings:
    """The script's own settings as it gave them, PyTorch's defaults for those it did not."""
    given = record.values()
    pin = bool(given.get("pin_memory", False))
    return Settings(
        batch_size=given.get("batch_size", 1),
        num_workers=int(given.get("num_workers", 0)),
        persistent_workers=bool(given.get("persistent_workers", False)),
        pin_memory=pin,
        non_blocking=bool(given.get("non_blocking", pin)),
        prefetch_factor=given.get("prefetch_factor"),
        drop_last=bool(given.get("drop_last", False)),
    )


def settings_of(point: Point) -> Settings:
    """The point's settings and batch size (None where neither the spec nor the script says one)."""
    return Settings(batch_size=point.workload.batch_size or None, **asdict(point.loader))
