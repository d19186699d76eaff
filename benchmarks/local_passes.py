"""What interleaved passes cost on the local backend, measured on a tiny sweep in one run.

    .venv/bin/python benchmarks/local_passes.py [--points 2] [--repeats 3] [--tasks 1]

A sweep of `--points` points of a tiny CPU workload (each rung a few milliseconds), each
measured `--repeats` times by the local backend (submitit's LocalExecutor: every job starts its
rank processes, which import torch and build the workload), three ways:

- **back to back**: one job a point, its repeats one after the other (AAA BBB, the local
  backend before passes);
- **a job a point a pass**: harness.sweeps.run_points, one repeat of every point a pass (ABC
  ABC), a job for each point in each pass (the local backend when passes came);
- **a job a pass**: the same passes, the points of a pass in one job (harness.backends.job.
  PassJob: the local backend now).

Prints the wall time and the jobs started (jobs.json) of each, and their ratios to back to
back: on tiny sweeps the time is the jobs' start-up, so the ratio says what the passes add.
About a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from harness.backends.local import LocalBackend, run_local
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.storage.sweep import create_sweep
from harness.sweeps import run_points

SPEC = """\
name: local-passes
workload:
  dataset: fake_cifar
  dataset_args: {{size: 48, image_size: 8, resize: null}}
  model: linear
  batch_size: [{sizes}]
  device: cpu
measure: {{warmup_steps: 1, steps: 3, repeats: {repeats}}}
loader: {{num_workers: 0}}
slurm: {{tasks_per_node: {tasks}, gpus_per_node: 0}}
"""


class _JobAPoint(LocalBackend):
    """The local backend as passes first ran it: a job for each point of a pass."""

    def run(self, points, sweep_dir, **kwargs):  # type: ignore[no-untyped-def]
        for point in points:
            run_local([point], sweep_dir, self.spec.slurm)


WAYS = ("back to back", "a job a point a pass", "a job a pass")


def _timed(way: str, text: str, root: Path) -> tuple[float, int]:
    spec = parse_spec(text)
    plan = expand(spec)
    sweep = create_sweep(
        plan, root / way.replace(" ", "-"), backend="local", world_size=spec.slurm.tasks_per_node
    )
    started = time.perf_counter()
    if way == "back to back":
        for point in plan.points:
            run_local([point], sweep, spec.slurm)
    else:
        backend = _JobAPoint(spec) if way == "a job a point a pass" else LocalBackend(spec)
        run_points(backend, plan.points, sweep)
    seconds = time.perf_counter() - started
    jobs = {e["job_id"] for e in json.loads((sweep / "jobs.json").read_text())}
    return seconds, len(jobs)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=1, help="local tasks (ranks) a point")
    args = ap.parse_args(argv)
    sizes = ", ".join(str(8 + k) for k in range(args.points))
    text = SPEC.format(repeats=args.repeats, sizes=sizes, tasks=args.tasks)
    print(f"{args.points} point(s) x {args.repeats} repeat(s), {args.tasks} task(s) a point, local backend")
    with tempfile.TemporaryDirectory() as tmp:
        timed = {way: _timed(way, text, Path(tmp)) for way in WAYS}
    base = timed["back to back"][0]
    for way, (seconds, jobs) in timed.items():
        print(f"  {way:20s}: {seconds:6.1f} s, {jobs} job(s), {seconds / base:.2f}x back to back")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
