"""Optional torch.profiler capture of a few training steps of one rung, one trace per rank.

    config = ProfileConfig(rung="full", wait=1, warmup=1, active=3, repeat=1)
    if config.rung == rung:
        with TraceCapture(config, point_dir / "profile", rank=env.rank) as capture:
            for ...: train_step(batch); capture.step()
    analysis.profiles.time_breakdown(point_dir / "profile")   # HTA's breakdown, on a login node

Traces are Chrome-trace JSON files named rank<k>.<ns>.pt.trace.json (TensorBoard and HTA read
them), written to a hidden temporary name and renamed into place like every result file.

HolisticTraceAnalysis reads a folder as one trace per rank, keyed by the trace's
`distributedInfo.rank`. So with `repeat > 1` each cycle's traces go to a folder of their own
(`profile/cycle<k>/`; with one cycle, `profile/` itself), and a rank without a process group
(one GPU, inline) writes the `distributedInfo` the profiler only writes under one, else HTA
refuses the trace.
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from harness_schema import rungs

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileConfig:
    """torch.profiler.schedule's cycle: skip `wait` steps, trace `warmup` steps and drop them
    (the profiler's own start-up), record `active` steps; `repeat` cycles."""

    rung: str = "full"
    """The rung whose steps are profiled."""
    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    """At least 1: torch's 0 means "until the loop ends", one trace every cycle."""

    def __post_init__(self) -> None:
        if not isinstance(self.rung, str) or not rungs.is_rung(self.rung):
            raise ValueError(f"profile.rung must be one of {rungs.allowed_text()} (got {self.rung!r})")
        for name, low in (("wait", 0), ("warmup", 0), ("active", 1), ("repeat", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"profile.{name} must be an integer >= {low} (got {value!r})")

    @property
    def steps(self) -> int:
        """Steps the whole capture spans; a loop shorter than this records less."""
        return (self.wait + self.warmup + self.active) * self.repeat

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ProfileConfig:
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise ValueError(f"profile.{unknown[0]}: unknown key; valid keys: {', '.join(valid)}")
        return cls(**data)


class TraceCapture:
    """Context manager around torch.profiler.profile; call `step()` after each training step.
    CPU activity always, CUDA activity when CUDA is available. `traces` lists the files written."""

    def __init__(self, config: ProfileConfig | Mapping[str, Any], out_dir: Path, *, rank: int) -> None:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"rank must be an integer >= 0 (got {rank!r})")
        self.config = config if isinstance(config, ProfileConfig) else ProfileConfig.from_mapping(config)
        self.out_dir, self.rank = Path(out_dir), rank
        self.traces: list[Path] = []
        self.cycles = 0
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        c = self.config
        self._profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=c.wait, warmup=c.warmup, active=c.active, repeat=c.repeat),
            on_trace_ready=self._save,
        )
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            # The profiler writes distributedInfo only under a process group; HTA needs it.
            self._profiler.preset_metadata_json(
                "distributedInfo", json.dumps({"rank": rank, "world_size": 1, "backend": ""})
            )

    def __enter__(self) -> TraceCapture:
        self._profiler.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Leaving while recording still saves what was recorded (torch calls on_trace_ready).
        self._profiler.__exit__(exc_type, exc, tb)

    def step(self) -> None:
        with warnings.catch_warnings():
            # Each cycle's trace is saved as the cycle ends: clearing events between cycles
            # (what torch warns about when repeat > 1) is what we want.
            warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
            self._profiler.step()

    def cycle_dir(self, cycle: int) -> Path:
        """Where cycle `cycle`'s traces go: HTA keeps one trace per rank and folder."""
        return self.out_dir if self.config.repeat == 1 else self.out_dir / f"cycle{cycle}"

    def _save(self, prof: torch.profiler.profile) -> None:
        out_dir = self.cycle_dir(self.cycles)
        self.cycles += 1
        out_dir.mkdir(parents=True, exist_ok=True)
        # The rank in the name: every rank of a point writes into the same folder.
        name = f"rank{self.rank}.{time.time_ns()}.pt.trace.json"
        tmp = out_dir / f".{name}.tmp"
        try:
            prof.export_chrome_trace(str(tmp))
            os.replace(tmp, out_dir / name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self.traces.append(out_dir / name)
        log.info("rank %d: profiler trace %s", self.rank, out_dir / name)
