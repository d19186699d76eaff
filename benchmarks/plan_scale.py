"""How long `harness plan` and `harness submit` take on a sweep of 1,000 or 100,000 points, as a
user runs them (issue #36).

    .venv/bin/python benchmarks/plan_scale.py [--points 1000] [--runs 3] [--plan-only]

Writes a spec of `--points` points (batch_size × num_workers × prefetch_factor, built-in
dataset and model) into a temporary folder, then times, each in a fresh process (imports
included, as a user pays them):

- plan: `harness plan SPEC` (validation, the plan, its table and the sbatch script);
- submit: `harness submit SPEC`, one job array, against the Slurm cluster that answers (the
  test cluster of tests/slurm/: `bash tests/slurm/cluster.sh up`). The array is submitted held
  (`slurm.extra: {hold: true}`), so that none of its tasks runs, and cancelled right after.
  Without a cluster, it says so and times `harness sbatch SPEC` instead: the same validation
  and rendering, without sbatch. `--plan-only` skips it (100,000 points make a sweep folder of
  as many job pickles). Each cancelled array stays in slurmctld as 1,000 job records for
  MinJobAge (300 s on the test cluster, whose MaxJobCount is 10,000): about ten submissions in
  five minutes and sbatch refuses every job, the test suite's included, until they age out.

The targets, on the 2 cores of a development machine (issue #36): 1,000 points planned in under
1 s and submitted in under 2 s; 100,000 points planned in under 30 s. Prints, for each, the
median of `--runs` runs against its target (none for other counts), the CPU seconds of the same
run (user + system: what the command costs on a machine shared with other work, where the wall
time is also waiting for a core) and the most memory a run held. As issue #36 found them, before
its fix: 1,000 points planned in 5.7 s and submitted in 9.0 s; 100,000 planned in 81 to 104 s.
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
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
PLAN_TARGETS_S = {1_000: 1.0, 100_000: 30.0}
SUBMIT_TARGETS_S = {1_000: 2.0}


class Run(NamedTuple):
    wall_s: float
    cpu_s: float
    """User and system seconds of the harness process."""
    peak_mb: float
    """The most memory the harness process held (its maximum resident set)."""


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


def timed(args: list[str], cwd: Path) -> Run:
    """Run `harness ARGS` once; its wall time, and its own CPU time and peak memory (os.wait4
    reports them for this child alone)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "harness", *args], cwd=cwd, env=env, stdout=stdout, stderr=stderr
        )
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    if child.returncode != 0:
        raise SystemExit(f"harness {' '.join(args)} failed ({child.returncode}):\n{err[-2000:]}")
    if args[0] == "submit":
        _cancel(out)
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)  # ru_maxrss: KiB on Linux


def said(what: str, runs: list[Run], target: float | None) -> str:
    """One line: the median wall time against its target, CPU seconds, memory."""
    wall = statistics.median(r.wall_s for r in runs)
    cpu = statistics.median(r.cpu_s for r in runs)
    if target is None:
        verdict = "no target for this many points"
    else:
        verdict = f"target < {target:g} s: {'met' if wall < target else 'MISSED'}"
    return f"  {what}: {wall:.2f} s ({verdict}); CPU {cpu:.2f} s; peak {max(r.peak_mb for r in runs):.0f} MB"


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
    parser.add_argument("--plan-only", action="store_true", help="time `harness plan` alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec = root / "scale.yaml"
        spec.write_text(spec_text(args.points))
        plan = [timed(["plan", str(spec)], root) for _ in range(args.runs)]
        load = os.getloadavg()[0]
        print(f"{args.points:,} points, {os.cpu_count()} CPUs (load {load:.1f}), median of {args.runs} runs:")
        print(said("harness plan", plan, PLAN_TARGETS_S.get(args.points)))
        if args.plan_only:
            return
        results = ["--results", str(root / "results")]
        if cluster_answers():
            submit = [timed(["submit", str(spec), *results], root) for _ in range(args.runs)]
            what = "harness submit"
        else:
            print("  no Slurm cluster answers: timing `harness sbatch` (validation and rendering) instead")
            submit = [timed(["sbatch", str(spec), "-o", str(root), *results], root) for _ in range(args.runs)]
            what = "harness sbatch"
        print(said(what, submit, SUBMIT_TARGETS_S.get(args.points)))


if __name__ == "__main__":
    main()
