"""python -m harness.backends.worker SWEEP_DIR --index N: run point N of a sweep on this task.

What a standalone sbatch script written by `harness sbatch` runs on every task (srun starts
one per rank); the array index picks the point.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.backends.worker", description=__doc__)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--index", type=int, required=True, help="the point's index (the array task id)")
    args = parser.parse_args(argv)

    from harness.backends.job import PointJob
    from harness.storage.sweep import load_points

    points = load_points(args.sweep_dir)
    if not 0 <= args.index < len(points):
        print(
            f"harness.backends.worker: index {args.index} out of range: the sweep has {len(points)} point(s)",
            file=sys.stderr,
        )
        return 2
    result = PointJob(str(args.sweep_dir))(points[args.index].to_json())
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
