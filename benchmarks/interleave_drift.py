"""What interleaving repeats does to a decision when the machine drifts, measured in one run.

    .venv/bin/python benchmarks/interleave_drift.py [--repeats 6] [--trials 3]

Two configurations, A and B, each a run of `STEPS` steps of fixed CPU work (a pure-Python loop,
so that other processes on the cores slow it down, as they slow a DataLoader's workers): B does
the same work as A (an A/A comparison: the truth is *tied*), or `--slower` more of it (8 % by
default: the truth is *slower*). Each is measured `--repeats` times, in two orders:

- **back to back** (AAA BBB, as every backend ran repeats before): a point's repeats, then the
  next point's;
- **interleaved** (ABAB..., as inline and local now run them: harness.sweeps.run_points).

The drift is real: during the second half of each sweep (by run count), a CPU burner (one
spinning process by default, `--burners`) runs beside the steps, as another job on a shared node would. Back
to back, the slow spell lands on B's runs only; interleaved, on both.

For each order the B/A ratio of samples/s is judged by the harness's noise model
(analysis/noise.py, ±5 % margin): independent runs (Hodges-Lehmann, Yuen/Welch), and for the
interleaved order also paired by pass (each run labelled with its pass, as the rows' run_pass
labels them, and judged by noise.ratio_by_pass: what the recommendation and compare do with a
sweep run here). Prints one line per trial and order, then for each order and method: the
median error of the ratio against the truth (B's work over A's), the right calls (the truth's
judgement, its interval holding the true ratio), the wrong ones (any other call: a difference
that is not there, or one called far larger than it is; undecided is neither), and the runs a
side the decision needs (the runs it had where decided, else noise's runs_needed, MAX_RUNS
where it cannot tell). Last, measured in this run, on the same interleaved runs, paired over
independent: the runs a decision needs, and the width of the 95 % interval (on the log
scale; at a given spread the runs needed grow with its square, so where both saturate at
MAX_RUNS on a busy machine, the squared width ratio says what pairing saves). About a minute
on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import statistics
import time
from collections.abc import Sequence

from analysis import noise

STEPS = 60
WORK = 30_000
"""Loop iterations of one of A's steps (some 2-5 ms of one core here)."""


def _step(work: int) -> None:
    x = 0
    for i in range(work):
        x += i * i


def _run(work: int) -> float:
    """One run of a configuration: samples/s over STEPS steps (a step is a sample)."""
    start = time.perf_counter()
    for _ in range(STEPS):
        _step(work)
    return STEPS / (time.perf_counter() - start)


def _spin() -> None:
    while True:
        pass


class Burner:
    """`count` spinning processes: another job's load on a shared node."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[mp.Process] = []

    def on(self) -> None:
        if not self.procs:
            self.procs = [mp.Process(target=_spin, daemon=True) for _ in range(self.count)]
            for p in self.procs:
                p.start()
            time.sleep(0.2)  # the burners scheduled before the next run starts

    def off(self) -> None:
        for p in self.procs:
            p.terminate()
            p.join()
        self.procs = []


def sweep(order: Sequence[str], works: dict[str, int], burner: Burner) -> dict[str, list[float]]:
    """The runs in `order` (e.g. AAABBB), the burner on for the second half of them."""
    runs: dict[str, list[float]] = {name: [] for name in works}
    try:
        for i, name in enumerate(order):
            if i == len(order) // 2:
                burner.on()
            runs[name].append(_run(works[name]))
    finally:
        burner.off()
    return runs


def _needed(est: noise.Estimate) -> int:
    """Runs a side the decision needs: those it had where decided, else the formula's."""
    return est.runs_needed() or noise.MAX_RUNS


def _width(est: noise.Estimate) -> float:
    """The 95 % interval's width on the log scale (inf untested)."""
    return math.log(est.high / est.low) if est.low and est.high else math.inf


def _said(est: noise.Estimate) -> str:
    verdict = est.judge()
    needed = est.runs_needed() if verdict == noise.UNDECIDED else None
    more = f", about {needed} runs a side would decide" if needed else ""
    return f"B/A {est.estimate:.3f} ({est.interval_text()}): {verdict}{more}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--burners", type=int, default=1, help="spinning processes during the slow spell")
    ap.add_argument("--slower", type=float, default=0.08, help="B's extra work in the second scenario")
    args = ap.parse_args(argv)
    n = args.repeats
    orders = {"back to back": "A" * n + "B" * n, "interleaved": "AB" * n}
    scenarios = {
        "A/A (truth: within)": (WORK, noise.WITHIN),
        f"B {args.slower:.0%} more work (truth: lower)": (round(WORK * (1 + args.slower)), noise.LOWER),
    }
    burner = Burner(args.burners)
    tally: dict[str, list[tuple[float, bool, bool, int, float]]] = {}
    for title, (work_b, truth) in scenarios.items():
        true_ratio = WORK / work_b
        print(
            f"\n{title}, {n} runs a side, {args.burners} CPU burner(s) on for the second half of each sweep"
        )
        for trial in range(args.trials):
            for order_name, order in orders.items():
                runs = sweep(order, {"A": WORK, "B": work_b}, burner)
                methods = {"independent": noise.independent_ratio(runs["A"], runs["B"])}
                if order_name == "interleaved":
                    passes = [f"trial{trial}#{k}" for k in range(n)]  # A's k-th run took turns with B's
                    methods["paired"] = noise.ratio_by_pass(runs["A"], runs["B"], passes, passes)
                for method, est in methods.items():
                    # A call is right when it is the truth's and its interval holds the true
                    # ratio: "lower by 50 %" where B is 7 % slower is a wrong call.
                    verdict = est.judge()
                    holds = est.low is not None and est.high is not None and est.low <= true_ratio <= est.high
                    right = verdict == truth and holds
                    wrong = verdict != noise.UNDECIDED and not right
                    tally.setdefault(f"{title} | {order_name}, {method}", []).append(
                        (abs(est.estimate / true_ratio - 1), right, wrong, _needed(est), _width(est))
                    )
                    print(f"  trial {trial}: {order_name:12s} {method:11s} {_said(est)}")
    print(
        f"\nof {args.trials} trial(s): the median error of B/A against the truth; right / wrong calls; "
        "runs a side the decision needs (median)"
    )
    for key, marks in tally.items():
        error = statistics.median(m[0] for m in marks)
        right, wrong = sum(m[1] for m in marks), sum(m[2] for m in marks)
        needed = statistics.median(m[3] for m in marks)
        print(f"  {key}: error {error:.1%}; right {right}, wrong {wrong}; runs needed {needed:g}")
    print("\npairing by pass, on the same interleaved runs: paired / independent (medians over trials)")
    for title in scenarios:
        paired, alone = tally[f"{title} | interleaved, paired"], tally[f"{title} | interleaved, independent"]
        runs = statistics.median(m[3] for m in paired), statistics.median(m[3] for m in alone)
        width = statistics.median(m[4] for m in paired) / statistics.median(m[4] for m in alone)
        print(
            f"  {title}: runs needed {runs[0]:g} / {runs[1]:g} = {runs[0] / runs[1]:.2f}; "
            f"interval width {width:.2f}, its square {width**2:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
