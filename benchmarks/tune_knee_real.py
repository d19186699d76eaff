"""The tune model against a real DataLoader where the pool of workers only just meets the step.

    .venv/bin/python benchmarks/tune_knee_real.py [--steps 1000] [--repeats 2] [--keep DIR]

The pipeline: `fake_cifar` whose reads sleep 125 ms, 5 % of them 300 ms more (a mean of 140 ms
a batch of one sample, no core used), tiny images (`image_size: 4`, no resize), the `emulated`
step of 20 ms (a sleep), persistent workers. Seven workers' mean rate is the step's (7 / 140
ms = 50 batches/s). The harness (`harness run`, inline) measures num_workers 6, 7, 8 at
prefetch_factor 2, 4, 6, then 1 worker and 16 (the plateau: what tune's profile runs for the
hand-off); the model (analysis/tune/model.py) is fed the injected costs and that plateau run's
hand-off (`with_plateau`, as tune takes it) and predicts each point. Prints measured and
predicted batches/s and the error. About 15 minutes at the defaults (the 1-worker point alone
takes 2 × 154 s); docs/concepts/tune.md holds a run's figures.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabulate import tabulate

from analysis.tune.fit import with_plateau
from analysis.tune.model import Config, Profile, batches_per_s, bound_of

READ_S, STALL_S, STALL_P, STEP_S = 0.125, 0.300, 0.05, 0.020
SPEC = """\
name: knee
workload:
  dataset: fake_cifar
  dataset_args: {{size: 100000, image_size: 4, resize: null, read_ms: {read}, stall_ms: {stall},
                 stall_probability: {p}}}
  model: emulated
  model_args: {{step_ms: {step}}}
  batch_size: 1
  device: cpu
measure: {{warmup_steps: 100, steps: {steps}, repeats: {repeats}}}
sampler: {{gpu: false}}
rungs: [full]
loader:
  num_workers: [6, 7, 8]
  prefetch_factor: [2, 4, 6]
  persistent_workers: true
"""
PLATEAU = (16, 4)


def measure(folder: Path, steps: int, repeats: int) -> dict[tuple[int, int], list[float]]:
    """Each point's runs (batches/s), from the rows `harness run` wrote."""
    spec = folder / "knee.yaml"
    spec.write_text(
        SPEC.format(
            read=READ_S * 1000,
            stall=STALL_S * 1000,
            p=STALL_P,
            step=STEP_S * 1000,
            steps=steps,
            repeats=repeats,
        )
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    harness = [sys.executable, "-m", "harness", "run", str(spec), "-q"]
    for name, extra in (("knee", []), ("ends", ["loader.num_workers=[1,16]", "loader.prefetch_factor=4"])):
        subprocess.run([*harness, "--results", str(folder / name), *extra], check=True, env=env)
    rates: dict[tuple[int, int], list[float]] = {}
    for path in sorted(folder.glob("*/knee/*/points/*/rank0.csv")):
        with path.open() as f:
            for row in csv.DictReader(f):
                key = (int(row["num_workers"]), int(float(row["prefetch_factor"])))
                rates.setdefault(key, []).append(float(row["samples_per_s"]))  # batch_size 1
    return rates


def config(workers: int, prefetch: int) -> Config:
    return Config(num_workers=workers, prefetch_factor=prefetch, persistent_workers=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps of each window")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each point")
    parser.add_argument(
        "--keep", type=Path, default=None, help="write the results here (else a temporary folder)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rates = measure(folder, args.steps, args.repeats)
    profile = Profile(
        batch_size=1,
        step_s=STEP_S,
        main_load_s=READ_S + STALL_P * STALL_S,
        cpu_s_per_batch=0.0,
        cores=float(os.cpu_count() or 1),
        stall_s=STALL_S,
        stall_share=STALL_P,
    )
    plateau = statistics.median(rates[PLATEAU])
    profile = with_plateau(profile, config(*PLATEAU), plateau)
    print(f"plateau run {PLATEAU}: {plateau:.1f} batches/s, a hand-off of {profile.handoff_s * 1000:.2f} ms")
    rows = []
    for (n, f), runs in sorted(rates.items()):
        measured, predicted = statistics.median(runs), batches_per_s(profile, config(n, f))
        runs_text = ", ".join(f"{r:.1f}" for r in runs)
        bound = bound_of(profile, config(n, f))
        rows.append(
            [
                n,
                f,
                f"{measured:.2f} ({runs_text})",
                f"{predicted:.2f}",
                f"{predicted / measured - 1:+.1%}",
                bound,
            ]
        )
    head = ["num_workers", "prefetch_factor", "measured batches/s (runs)", "predicted", "error", "bound"]
    print(tabulate(rows, headers=head))


if __name__ == "__main__":
    main()
