"""What a process's end costs once its work is done, with and without its objects left to the
exit (harness.exits.leave_objects_to_the_exit, gc.freeze), measured in one run.

    .venv/bin/python benchmarks/process_exit.py [--runs 5]

- **a rank's imports**: a process that imports what a rank of a job holds (torch, torchvision,
  pandas, the runner) and runs a tiny point's worth of work, then exits: the time from its last
  line to its end, as Python's own exit (its last garbage collection) and after
  `leave_objects_to_the_exit()`, alternating, `--runs` of each; the medians and their ratio.
- **a local job's ranks**: a tiny 2-rank point on the local backend (as the code is now): from
  the ranks' result files to the controller's `ranks.json`, written once both ranks ended.

About half a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

# A rank's imports and a few batches of a tiny point, as a rank of a local job holds them.
RANK = """
import sys, time
import pandas, torch, torchvision
from harness.execution import runner
from harness.workloads.fake_cifar import FakeCIFAR
loader = torch.utils.data.DataLoader(FakeCIFAR(size=64, image_size=8, resize=None), batch_size=8)
model = torch.nn.Linear(3 * 8 * 8, 10)
for images, labels in loader:
    model(images.flatten(1)).sum().backward()
if sys.argv[1] == "frozen":
    from harness.exits import leave_objects_to_the_exit
    leave_objects_to_the_exit()
print(time.time(), flush=True)
"""

SPEC = """\
name: exit
workload:
  dataset: fake_cifar
  dataset_args: {size: 32, image_size: 8, resize: null}
  model: linear
  batch_size: 4
  device: cpu
measure: {warmup_steps: 1, steps: 3, repeats: 1}
rungs: [full]
loader: {num_workers: 0}
slurm: {tasks_per_node: 2, gpus_per_node: 0}
"""


def exit_seconds(way: str) -> float:
    out = subprocess.run([sys.executable, "-c", RANK, way], capture_output=True, text=True, check=True).stdout
    return time.time() - float(out.split()[-1])


def local_job_exit() -> float:
    from harness.backends.local import run_local
    from harness.config.plan import expand
    from harness.config.spec import parse_spec
    from harness.storage.sweep import create_sweep

    plan = expand(parse_spec(SPEC))
    with tempfile.TemporaryDirectory() as tmp:
        sweep = create_sweep(plan, Path(tmp), backend="local", world_size=2)
        assert run_local(plan.points, sweep, plan.spec.slurm) == []
        (ranks,) = sweep.rglob("*_ranks.json")
        results = list(ranks.parent.glob("*_result.pkl"))
        return ranks.stat().st_mtime - max(r.stat().st_mtime for r in results)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    seconds: dict[str, list[float]] = {"exit": [], "frozen": []}
    for _ in range(args.runs):
        for way in seconds:
            seconds[way].append(exit_seconds(way))
    plain, frozen = (statistics.median(seconds[w]) for w in ("exit", "frozen"))
    print(f"a rank's imports, Python's own exit:         {plain:.2f} s (median of {args.runs})")
    print(f"a rank's imports, objects left to the exit:  {frozen:.2f} s (median of {args.runs})")
    print(f"ratio: {frozen / plain:.2f}")
    job = local_job_exit()
    print(f"a tiny local job: its ranks' results to their end: {job:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
