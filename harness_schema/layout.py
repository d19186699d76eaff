"""The results layout: where every file of a sweep lives.

results/<spec name>/<sweep id>/
  spec.yaml  plan.csv  plan.json  sweep.json  jobs.json
  owner.json                       only while an inline or local sweep runs (the process's pid)
  points/<point id>/rank<k>.csv  meta-rank<k>.json  samples-rank<k>.csv  profile/
                   script-rank<k>.out  script-rank<k>.err   a script point's output, per rank

Torch-free: the analysis reads the same layout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from harness_schema.atomic import atomic_write_text

ROW_FILE = re.compile(r"^rank(\d+)\.csv$")


def new_sweep_id(root: Path) -> str:
    base = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, n = base, 1
    while (root / candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def point_dir(sweep_dir: Path, point_id: str) -> Path:
    return sweep_dir / "points" / point_id


def rank_file(point_path: Path, rank: int) -> Path:
    return point_path / f"rank{rank}.csv"


def script_logs(point_path: Path, rank: int) -> tuple[Path, Path]:
    """A script point's rank's stdout and stderr (appended to by each run of the point)."""
    return point_path / f"script-rank{rank}.out", point_path / f"script-rank{rank}.err"


def write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def write_meta(point_path: Path, rank: int, meta: Mapping[str, Any]) -> None:
    write_json(point_path / f"meta-rank{rank}.json", dict(meta))
