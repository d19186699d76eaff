"""How long `harness plan` and `harness submit` take on a 1,000-point sweep, as a user runs them.

    .venv/bin/python benchmarks/plan_scale.py [--points 1000] [--runs 3]

Writes a spec of `--points` points (batch_size × num_workers × prefetch_factor, built-in
dataset and model) into a temporary folder, then times, each in a fresh process (imports
included, as a user pays them):

- plan: `harness plan SPEC` (validation, the plan, its table and the sbatch script);
- submit: `harness submit SPEC`, one job array, against the Slurm cluster that answers (the
  test cluster of tests/slurm/: `bash tests/slurm/cluster.sh up`). The array is submitted held
  (`slurm.extra: {hold: true}`), so that none of its tasks runs, and cancelled right after.
  Without a cluster, it says so and times `harness sbatch SPEC` instead: the same validation
  and rendering, without sbatch.

The targets, on the 2 cores of a development machine: plan under 3 s, submit under 5 s.
Prints the median of `--runs` runs of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLAN_TARGET_S, SUBMIT_TARGET_S = 3.0, 5.0


def spec_text(points: int) -> str:
    """A spec of exactly `points` points: three axes whose product is `points` (or more, cut by
    an exclusion-free choice of lengths: 10 × 10 × points/100)."""
    side = 10
    third = max(1, points // (side * side))
    return (
        "name: scale\n"
        "workload:\n"
        "  dataset: fake_cifar\n"
        "  dataset_args: {size: 64}\n"
        "  model: linear\n"
        f"  batch_size: {list(range(1, side + 1))}\n"
        "loader:\n"
        f"  num_workers: {list(range(1, side + 1))}\n"
        f"  prefetch_factor: {list(range(1, third + 1))}\n"
        'slurm: {tasks_per_node: 1, gpus_per_node: 0, time: "00:05:00", extra: {hold: true}}\n'
    )


def timed(args: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"harness {' '.join(args)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    if args[0] == "submit":
        _cancel(out.stdout)
    return seconds


def _cancel(stdout: str) -> None:
    """scancel the held array that `harness submit` just sent."""
    line = next(line for line in stdout.splitlines() if line.startswith("submitted "))
    job = line.split(" as job array ")[-1].split()[0] if " array " in line else line.split()[-1]
    subprocess.run(["scancel", job], check=False)


def cluster_answers() -> bool:
    try:
        out = subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec = root / "scale.yaml"
        spec.write_text(spec_text(args.points))
        plan = [timed(["plan", str(spec)], root) for _ in range(args.runs)]
        print(f"{args.points} points, {os.cpu_count()} CPUs, median of {args.runs} runs:")
        print(f"  harness plan:   {statistics.median(plan):.2f} s (target < {PLAN_TARGET_S:.0f} s)")
        results = ["--results", str(root / "results")]
        if cluster_answers():
            submit = [timed(["submit", str(spec), *results], root) for _ in range(args.runs)]
            what = "harness submit"
        else:
            print("  no Slurm cluster answers: timing `harness sbatch` (validation and rendering) instead")
            submit = [timed(["sbatch", str(spec), "-o", str(root), *results], root) for _ in range(args.runs)]
            what = "harness sbatch"
        print(f"  {what}: {statistics.median(submit):.2f} s (target < {SUBMIT_TARGET_S:.0f} s)")


if __name__ == "__main__":
    main()
