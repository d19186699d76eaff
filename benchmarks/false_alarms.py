"""How often does `harness compare` call a change where there is none? A/A pairs, measured.

    .venv/bin/python benchmarks/false_alarms.py [--pairs 20]

Each pair is one spec measured twice by the harness (run_point, in this process): one point
whose step is a 50 ms sleep (the emulated accelerator: no core needed, so the loaded machine
moves it less), in-process loading, 3 repeats a side, measured in turn (first, second, first,
...) as a careful A/A is, so that a slow spell of the machine falls on either side rather than
on one. analysis.grid.compare then judges B against A. Any call (faster, slower) is a false alarm
of the noise model: at most 5 % of pairs by the 95 % interval's design, fewer with its
practical floor. Prints each pair's change, interval and judgement, then the share called.
This was a test (tests/analysis/grid/test_compare.py) that, by its own docstring, failed in about
one run in twenty; a rate is what it can tell. About 15 s a pair on a busy 2-core VM.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.grid.compare import compare, comparison_table
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point
from harness.storage.sweep import create_sweep
from harness_schema import layout
from harness_schema import rows as results
from harness_schema.atomic import atomic_write_text

SPEC = """\
name: same
workload:
  dataset: fake_cifar
  dataset_args: {size: 48, image_size: 8, resize: null}
  model: emulated
  model_args: {step_ms: 50}
  batch_size: 8
  device: cpu
measure: {warmup_steps: 1, steps: 8, repeats: REPEATS}
loader: {num_workers: 0}
sampler: {host: false, gpu: false}
"""
REPEATS = 3


def a_a_pair(root: Path) -> tuple[Path, Path]:
    """The same spec measured twice, a repeat at a time in turn: two sweeps of one point."""
    plan = expand(parse_spec(SPEC.replace("REPEATS", str(REPEATS))))
    once = expand(parse_spec(SPEC.replace("REPEATS", "1")))
    sides = {name: create_sweep(plan, root, sweep_id=name) for name in ("first", "second")}
    measured: dict[str, list[dict[str, str]]] = {name: [] for name in sides}
    (point,) = once.points
    for repeat in range(REPEATS):
        for name, sweep in sides.items():
            scratch = create_sweep(once, root / "scratch", sweep_id=f"{name}{repeat}")
            run_point(point, scratch, env=DistEnv(hostname="node-a"), skip_done=False)
            for row in results.read_rows(scratch / "points" / point.id / "rank0.csv"):
                measured[name].append(row | {"sweep_id": sweep.name, "repeat": str(repeat)})
    (planned,) = plan.points
    for name, sweep in sides.items():
        rows = [row | {"point_id": planned.id} for row in measured[name]]
        atomic_write_text(
            layout.rank_file(sweep / "points" / planned.id, 0), results.csv_text(rows, results.ROW_COLUMNS)
        )
    return sides["first"], sides["second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    called = 0
    started = time.perf_counter()
    print(f"{'pair':>4}  {'change':>8}  {'interval':<18}  judgement")
    for pair in range(args.pairs):
        with tempfile.TemporaryDirectory() as tmp:
            first, second = a_a_pair(Path(tmp))
            (row,) = comparison_table(compare([first], [second])).itertuples()
        called += row.judgement in ("faster", "slower")
        print(f"{pair:>4}  {row.change:>+8.2%}  {row.interval:<18}  {row.judgement}")
    print(
        f"false alarms: {called} of {args.pairs} A/A pairs called faster or slower "
        f"({called / args.pairs:.0%}; by design at most 5 %) in {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
