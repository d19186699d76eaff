"""Read the sampler's timeline of one rank of one point (`samples-rank<k>.csv`).

Apart from the rows (analysis/load.py): a timeline is read for one point at a time, for its
plot, never for the whole sweep.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

log = logging.getLogger(__name__)

SAMPLES_FILE = "samples-rank{rank}.csv"


def load_samples(point_path: Path, rank: int) -> pd.DataFrame | None:
    """The sampler's timeline of one rank of one point (`samples-rank<k>.csv`), or None."""
    path = point_path / SAMPLES_FILE.format(rank=rank)
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        log.warning("%s: unreadable (%s); no timeline", path, e)
        return None
    if "t" not in frame.columns or frame.empty:
        return None
    for column in frame.columns:
        if column not in ("phase",):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["phase"] = frame["phase"].fillna("").astype(str) if "phase" in frame else ""
    return frame
