"""What the profiler traces of a sweep say: HolisticTraceAnalysis's time breakdown per rank.

Torch-free like the rest of analysis/: HTA reads the Chrome-trace JSON files that
harness/profiling.py writes under points/<id>/profile/.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

log = logging.getLogger(__name__)


def trace_dirs(sweep_dir: Path) -> list[Path]:
    """The points' profile folders that hold at least one trace."""
    return sorted(
        d
        for d in Path(sweep_dir).glob("points/*/profile")
        if any(p.name.endswith((".json", ".json.gz")) and not p.name.startswith(".") for p in d.iterdir())
    )


def time_breakdown(trace_dir: Path) -> pd.DataFrame | None:
    """HolisticTraceAnalysis's temporal breakdown (idle, compute, non-compute GPU time per rank)
    of the traces in `trace_dir`; None, with the reason logged, when HTA is not installed (it is
    not a dependency) or cannot analyse them (it needs GPU kernels: CPU-only traces fail)."""
    trace_dir = Path(trace_dir)
    if not trace_dir.is_dir() or not any(
        not p.name.startswith(".") and p.name.endswith((".json", ".json.gz")) for p in trace_dir.iterdir()
    ):
        log.info("time breakdown skipped: no trace in %s", trace_dir)
        return None
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        log.info("time breakdown skipped: HolisticTraceAnalysis (hta) is not installed")
        return None
    try:
        frame: pd.DataFrame = TraceAnalysis(trace_dir=str(trace_dir)).get_temporal_breakdown(visualize=False)
    except Exception as e:
        log.warning(
            "time breakdown skipped: HolisticTraceAnalysis cannot analyse %s (%s: %s)",
            trace_dir,
            type(e).__name__,
            e,
        )
        return None
    return frame
