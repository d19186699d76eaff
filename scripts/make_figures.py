"""Re-make the manual's figures (docs/img/*.png) from real runs, never by hand.

Each figure is drawn by the project's own plotting (analysis/render/plots.py, steps.py) from
results that small real sweeps write here, on the CPU, with the inline backend: the quick
start's sweep, the caching ladder's, `harness tune`'s, and a second quick start with faster
storage to compare against the first. The step diagram comes from a run of the harness's own
timed loop (`loop.window`) that notes each step as it goes, since the results keep no per-step
record. About 5 minutes on 2 cores:

    python scripts/make_figures.py                    # every figure, into docs/img/
    python scripts/make_figures.py --only ladder      # one (its sweep alone)
    python scripts/make_figures.py --results DIR      # keep the sweeps' results in DIR

The runs are small and the machine may be busy: the figures show what this machine measured
the day they were made (each sweep's folder is named in the log), not reference numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: the checkout's packages first
    sys.path.insert(0, str(ROOT))

from analysis.aggregate import summarize, table_rows  # noqa: E402
from analysis.grid.compare import compare  # noqa: E402
from analysis.load import load_results  # noqa: E402
from analysis.render import plots, steps  # noqa: E402
from analysis.samples import load_samples  # noqa: E402

log = logging.getLogger("make_figures")

OUT = ROOT / "docs" / "img"

# The sweeps, as the commands a reader could type (each with its overrides: kept small, so that
# each lasts under a minute on 2 cores). The caption of each figure in the manual names these.
QUICKSTART = ["run", "jobs/quickstart.yaml"]
FASTER = ["run", "jobs/quickstart.yaml", "workload.dataset_args.read_ms=1"]
LADDER = ["run", "jobs/caching_ladder.yaml", "measure.repeats=1"]  # one pass: a timeline that reads
TUNE = ["tune", "jobs/tune.yaml", "loader.num_workers=[0,1,2,3]", "loader.prefetch_factor=[1,4]"]


def harness(args: Sequence[str], results: Path) -> Path:
    """Run `harness ARGS --results RESULTS` (inline backend) and return the sweep it wrote."""
    spec_name = _spec_name(ROOT / args[1])
    before = set((results / spec_name).glob("*"))
    command = [sys.executable, "-m", "harness", *args, "--results", str(results), "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    started = time.monotonic()
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode not in (0, 3):  # 3: ran, with a recommendation left undecided
        raise SystemExit(f"harness {' '.join(args)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    (sweep,) = set((results / spec_name).glob("*")) - before
    log.info("harness %s: %.0f s, %s", " ".join(args), time.monotonic() - started, sweep)
    return sweep


def _spec_name(spec: Path) -> str:
    for line in spec.read_text().splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip()
    raise SystemExit(f"{spec}: no name")


def _write(out: Path, png: bytes | None, what: str) -> Path:
    if png is None:
        raise SystemExit(f"{out.name}: nothing to draw from {what}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    log.info("%s: %d kB", out, len(png) // 1024)
    return out


# The figures: each draws from result folders (or a steps table) into one PNG. The tests call
# these on small fixture folders (tests/test_make_figures.py).


def throughput_figure(sweep: Path, out: Path) -> Path:
    rows = table_rows(summarize(load_results([sweep]).rows))
    title = f"samples/s against num_workers · {sweep.parent.name} · rung {rows['rung'].iloc[0]}"
    return _write(out, plots.throughput_png(rows, title=title), str(sweep))


def ladder_figure(sweep: Path, out: Path) -> Path:
    summary = summarize(load_results([sweep]).rows)
    return _write(out, plots.ladder_png(summary, title=f"caching ladder · {sweep.parent.name}"), str(sweep))


def utilisation_figure(sweep: Path, out: Path) -> Path:
    """The timeline of the sweep's point with the most workers (rank 0; the ladder's one point):
    each rung's phases shaded, the loader's CPU beside the training thread's, and the GPU's
    above them where the machine has one (on a CPU machine, no GPU panel)."""
    summary = summarize(load_results([sweep]).rows)
    point_id = str(summary.sort_values("num_workers")["point_id"].iloc[-1])
    samples = load_samples(sweep / "points" / point_id, 0)
    if samples is None:
        raise SystemExit(f"{sweep / 'points' / point_id}: no samples-rank0.csv")
    title = f"{sweep.parent.name} point {point_id} rank 0"
    return _write(out, plots.timeline_png(samples, title=title), point_id)


def tune_figure(sweep: Path, out: Path) -> Path:
    summary = json.loads((sweep / "tune.json").read_text())
    title = f"harness tune · spec {summary['spec']}: the model (lines) against the runs measured (circles)"
    return _write(out, plots.tune_png(summary, title=title), str(sweep))


def comparison_figure(a: Path, b: Path, out: Path, change: str) -> Path:
    title = f"harness compare A B · {change}"
    return _write(out, plots.comparison_png(compare([a], [b]), title=title), f"{a} and {b}")


def steps_figure(table: pd.DataFrame, out: Path) -> Path:
    title = "one step = next() + the copy + the train step; the workers fill the queue meanwhile"
    return _write(out, steps.steps_png(table, title=title), "the steps recorded")


# The step diagram's run: the quick start's pipeline (fake_cifar, 2 ms a read, batches of 32;
# the emulated accelerator's 40 ms step) through the harness's own loop, noting each step.


def record_steps(workers: int, *, warmup_steps: int = 4, measured: int = 14) -> pd.DataFrame:
    """The steps of one window of `loop.window` over the quick start's pipeline with `workers`
    workers: per step its start, its next() and copy times, its end (the next step's start, as
    the loop times it) and the batches ready in the loader just before next()."""
    import torch
    from torch.utils.data import DataLoader

    from harness.execution import batches, loader_stream, loop
    from harness.workloads.emulated import EmulatedAccelerator
    from harness.workloads.fake_cifar import FakeCIFAR

    torch.manual_seed(0)
    dataset = FakeCIFAR(size=3200, image_size=32, resize=None, read_ms=2)
    loader = DataLoader(
        dataset, batch_size=32, shuffle=True, num_workers=workers, prefetch_factor=2 if workers else None
    )
    model = EmulatedAccelerator(num_classes=10, step_ms=40)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    stream = Noted(loader_stream.LoaderStream(loader), time.perf_counter)

    def copied(batch: Any) -> Any:
        moved = batches.to_device(batch, torch.device("cpu"))
        stream.copied(time.perf_counter())
        return moved

    def mark(region: str) -> None:
        stream.phase = region
        if region == "end":  # the window's end (after its final sync) ends its last step
            stream.finish(time.perf_counter())

    window = loop.window(
        stream,
        warmup_steps=warmup_steps,
        steps=measured,
        sync=lambda: None,
        to_device=copied,
        stock=stream.inner.stock,
        mark=mark,
    )
    try:
        batch = next(window)
        while True:
            optimizer.zero_grad()
            output = model(batch[0])
            model.loss(output, batch).backward()
            optimizer.step()
            batch = window.send(None)
    except StopIteration:
        pass
    finally:
        stream.close()
    stream.finish(time.perf_counter())
    table = pd.DataFrame(stream.rows, columns=list(steps.STEP_COLUMNS[1:]))
    table.insert(0, "run", f"num_workers={workers}")
    # The warmup's last steps only: the first ones wait for the workers to start.
    first_measured = int(table.loc[table["phase"] == "measure", "step"].min())
    return table[table["step"] >= first_measured - 4].reset_index(drop=True)


class Noted:
    """The loop's stream, with each next() noted: its start, its end, the batches ready before."""

    def __init__(self, inner: Any, clock: Callable[[], float]) -> None:
        self.inner, self.clock = inner, clock
        self.phase = "warmup"
        self.rows: list[list[Any]] = []
        self._open: list[Any] | None = None

    @property
    def epoch(self) -> int:
        return int(self.inner.epoch)

    def ready(self) -> int | None:
        """The loader's own answer: the loop's warmup asks it whether the stock is used up."""
        return self.inner.ready()

    def next(self) -> Any:
        ready = self.inner.ready()
        t0 = self.clock()
        batch = self.inner.next()
        t1 = self.clock()
        if self._open is not None:
            self._close(t0)
        # The window's phase turns to "measure" before its first step's next().
        phase = "measure" if self.phase in ("measure", "end") else "warmup"
        self._open = [len(self.rows), phase, t0, t1 - t0, 0.0, None, ready, self.inner.stock]
        return batch

    def copied(self, at: float) -> None:
        if self._open is not None:
            self._open[4] = at - self._open[2] - self._open[3]

    def _close(self, end: float) -> None:
        assert self._open is not None
        self._open[5] = end
        self.rows.append(self._open)
        self._open = None

    def finish(self, end: float) -> None:
        if self._open is not None:
            self._close(end)

    def close(self) -> None:
        self.finish(self.clock())
        self.inner.close()


FIGURES = ("steps", "throughput", "utilisation", "ladder", "tune", "compare")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=FIGURES, action="append", help="this figure only (repeatable)")
    parser.add_argument("--results", type=Path, help="where the sweeps write (default: a temporary folder)")
    parser.add_argument(
        "--out", type=Path, default=OUT, help=f"where the PNGs go (default: {OUT.relative_to(ROOT)})"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    wanted = set(args.only or FIGURES)
    with tempfile.TemporaryDirectory(prefix="figures-") as scratch:
        results = args.results or Path(scratch)
        if "steps" in wanted:
            table = pd.concat([record_steps(1), record_steps(2)], ignore_index=True)
            steps_figure(table, args.out / "step-timing.png")
        if wanted & {"throughput", "compare"}:
            quick = harness(QUICKSTART, results)
            if "throughput" in wanted:
                throughput_figure(quick, args.out / "throughput-workers.png")
            if "compare" in wanted:
                change = "A reads a sample in 2 ms, B in 1 ms (workload.dataset_args.read_ms)"
                comparison_figure(quick, harness(FASTER, results), args.out / "compare.png", change)
        if wanted & {"ladder", "utilisation"}:
            rungs = harness(LADDER, results)
            if "ladder" in wanted:
                ladder_figure(rungs, args.out / "caching-ladder.png")
            if "utilisation" in wanted:
                utilisation_figure(rungs, args.out / "utilisation.png")
        if "tune" in wanted:
            tune_figure(harness(TUNE, results), args.out / "tune-model.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
