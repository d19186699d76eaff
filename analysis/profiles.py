"""What the profiler traces of a sweep say: HolisticTraceAnalysis's time breakdown per rank.

Torch-free like the rest of analysis/: HTA reads the Chrome-trace JSON files that
harness/execution/profiling.py writes under points/<id>/profile/ (and profile/cycle<k>/ with
a profiler repeat > 1: one folder per cycle, since HTA keeps one trace per rank and folder).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

log = logging.getLogger(__name__)


def _has_traces(folder: Path) -> bool:
    return folder.is_dir() and any(
        p.name.endswith((".json", ".json.gz")) and not p.name.startswith(".") for p in folder.iterdir()
    )


def trace_dirs(sweep_dir: Path, points: Iterable[str] | None = None) -> list[Path]:
    """The folders that hold a set of traces (one per rank): each point's `profile/`, or with a
    profiler `repeat` > 1 each of its `profile/cycle<k>/` (HTA reads one trace per rank and
    folder, so every cycle is a folder of its own). `points`: the point folders to look in
    (those whose listing showed a `profile` entry, analysis.load.Loaded.profiled), rather than
    every point folder of the sweep: 100,000 of them took seconds."""
    if points is None:
        folders = [
            *Path(sweep_dir).glob("points/*/profile"),
            *Path(sweep_dir).glob("points/*/profile/cycle*"),
        ]
    else:
        profiles = [Path(p) / "profile" for p in points]
        folders = [*profiles, *(c for p in profiles for c in p.glob("cycle*"))]
    return sorted(d for d in folders if _has_traces(d))


def time_breakdown(trace_dir: Path) -> pd.DataFrame | None:
    """HolisticTraceAnalysis's temporal breakdown (idle, compute, non-compute GPU time per rank)
    of the traces in `trace_dir`; None, with the reason logged, when HTA is not installed (it is
    not a dependency) or cannot analyse them (it needs GPU kernels: CPU-only traces fail)."""
    trace_dir = Path(trace_dir)
    if not _has_traces(trace_dir):
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
        if "distributedInfo" in str(e):
            # Traces of a rank without a process group, from a harness before it wrote one.
            log.warning(
                "time breakdown skipped: the traces in %s carry no distributedInfo (a single rank "
                'profiled without a process group); HTA needs {"distributedInfo": {"rank": k}} '
                "in each: profile again with this harness, which writes it",
                trace_dir,
            )
            return None
        log.warning(
            "time breakdown skipped: HolisticTraceAnalysis cannot analyse %s (%s: %s)",
            trace_dir,
            type(e).__name__,
            e,
        )
        return None
    return frame
