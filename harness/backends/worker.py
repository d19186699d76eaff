"""python -m harness.backends.worker SWEEP_DIR --index N: run point N of a sweep on this task.

What a standalone sbatch script written by `harness sbatch` runs on every task (srun starts
one per rank); the array index picks the point. With `--spec` (the portable scripts kept in
sbatch/), the first task to start makes the sweep folder from the spec; the others find it
(harness/backends/slurm/sbatch.py, sweep_from_spec).

Not in harness/backends/slurm/: torchrun runs it too (`torchrun -m harness.backends.worker`), and
the committed scripts of sbatch/ and every standalone script already written name this module.
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
    parser.add_argument(
        "--spec",
        type=Path,
        help="make the sweep folder from this spec if no task has yet (the scripts of sbatch/)",
    )
    args = parser.parse_args(argv)

    from harness.extras import MissingExtra, require_run_extra

    try:
        require_run_extra("python -m harness.backends.worker")
    except MissingExtra as e:
        print(f"harness.backends.worker: {e}", file=sys.stderr)
        return 2

    from harness.backends.job import PointJob
    from harness.storage.sweep import load_points

    if args.spec is not None:
        from harness.backends.slurm.sbatch import sweep_from_spec

        sweep_from_spec(args.spec, args.sweep_dir)

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
