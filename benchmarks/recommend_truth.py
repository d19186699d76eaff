"""How often is the recommendation right, on grids whose answer is known? The old rule against
the new, in one run.

    .venv/bin/python benchmarks/recommend_truth.py [--seeds 50] [--repeats 3]

The grids are tests/fixtures/truth_grids.py's: 4 worker counts, a true throughput each, runs
with seeded noise, steady (1 % gaussian) or erratic (and a 10-50 % stall in 15 % of runs), four
scenarios, `--seeds` grids of each. The truth's answer is the cheapest configuration within 5 %
of the best's true throughput. For each method, the share of grids where its recommendation:

- **matched** the answer (and, for the new rule, was not provisional);
- was **wrong**: it offered a configuration whose true throughput is more than 5 % below the
  best's (the new rule's provisional offers, which say the best is undecided, are counted
  apart, as **provisional**);
- **undecided**: the new rule recommended a dearer configuration than the answer and named
  the cheaper ones it could not decide, with the runs that would decide (`runs` is the median
  of the most any grid's undecided point needs).

The old rule is issue 19's (analysis/grid/recommend.py before the three-way judgement), in a few
lines below: tied when Welch's t on the logs does not call the difference (its 95 % interval
holds no change, or the change is under 3 %), the cheapest of the tied recommended. The new
rule is analysis.grid.recommend as it stands. Runs on the analysis alone (no torch): about 10 s for
the default 50 seeds with fixed repeats, a minute or so more for the adaptive repeats (each
round reads its grid again).

Adaptive repeats (`measure.repeats: auto`) are the third method: after the first round, the
rounds of harness/backends/adaptive.py (plan_round on undecided_points' judgement, up to
DEFAULT_MAX_REPEATS runs a point), each new run drawn from the grid's own law
(truth_grids.add_runs), then the new rule on all the runs. `spent` is the runs each method
measured per point, on average: the fixed methods' `--repeats`, the adaptive repeats' own.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import noise
from analysis.aggregate import summarize
from analysis.grid.recommend import recommend, undecided_points
from analysis.load import load_results
from harness.backends.adaptive import plan_round
from harness_schema.settings import DEFAULT_MAX_REPEATS
from tests.fixtures import truth_grids

Outcome = tuple[str, bool, int | None]
"""The recommended point id, whether it is provisional, the most runs an undecided one needs."""
Grids = dict[str, tuple[str, tuple[float, ...]]]
"""Sweep folder -> (scenario, true throughputs), as truth_grids.write_grids returns them."""
Method = Callable[[Grids, int], tuple[dict[str, Outcome], float]]
"""(grids, repeats) -> (the outcome per sweep, the runs spent per point on average)."""


def new_rule(grids: Grids, repeats: int) -> tuple[dict[str, Outcome], float]:
    sweeps = [Path(s) for s in grids]
    out = {}
    for rec in recommend(summarize(load_results(sweeps).rows)):
        needs = [u.runs or noise.MAX_RUNS for u in (*rec.undecided, *rec.challengers)]
        assert rec.cheapest is not None  # these grids have no failed runs
        out[rec.sweep_dir] = (rec.cheapest.point_id, rec.provisional, max(needs, default=None))
    runs = summarize(load_results(sweeps).rows)["runs"]
    return out, float(runs.mean())


def old_rule(grids: Grids, repeats: int) -> tuple[dict[str, Outcome], float]:
    """Issue 19's rule: not called different by Welch's t (or under 3 %) counts as tied."""
    summary = summarize(load_results([Path(s) for s in grids]).rows)
    out = {}
    for sweep_dir, rows in summary.groupby("sweep_dir"):
        best = rows.loc[rows["samples_per_s"].idxmax()]
        tied = [
            row
            for _, row in rows.iterrows()
            if row["point_id"] == best["point_id"]
            or not _welch_called(best["run_samples_per_s"], row["run_samples_per_s"])
        ]
        cheapest = min(tied, key=lambda r: (r["num_workers"], -r["samples_per_s"]))
        out[str(sweep_dir)] = (str(cheapest["point_id"]), False, None)
    return out, float(repeats)


def adaptive(grids: Grids, repeats: int) -> tuple[dict[str, Outcome], float]:
    """measure.repeats: auto on each grid (see the module), then the new rule."""
    for sweep_dir, (_, truths) in grids.items():
        sweep = Path(sweep_dir)
        rng = random.Random(f"adaptive-{sweep.parent.name}-{sweep.name}")  # parent: the kind
        have = {f"p{workers}": repeats for workers in truth_grids.WORKERS}
        while step := plan_round(
            undecided_points(summarize(load_results([sweep]).rows)),
            have,
            {p: DEFAULT_MAX_REPEATS - n for p, n in have.items()},
        ):
            for point_id, target in step.targets.items():
                more = range(have[point_id], target)
                truth_grids.add_runs(sweep, point_id, truths, sweep.parent.name, rng, more)
                have[point_id] = target
    return new_rule(grids, repeats)


def _welch_called(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    la, lb = [math.log(x) for x in a], [math.log(y) for y in b]
    center = statistics.fmean(lb) - statistics.fmean(la)
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    half = noise.t_quantile(max(1.0, df)) * math.sqrt(va + vb)
    return (center - half > 0 or center + half < 0) and abs(center) >= math.log1p(0.03)


METHODS: dict[str, Method] = {"old rule": old_rule, "new rule": new_rule, "adaptive": adaptive}
"""The rows of the table, per kind of grid: adaptive last (it adds runs to the grids)."""


def score(outcomes: dict[str, Outcome], truth: dict[str, tuple[str, tuple[float, ...]]]) -> dict[str, float]:
    counts = {"matched": 0, "wrong": 0, "provisional": 0, "undecided": 0}
    needs = []
    for sweep, (point_id, provisional, runs) in outcomes.items():
        _, truths = truth[sweep]
        picked = truth_grids.WORKERS.index(int(point_id.removeprefix("p")))
        right = truth_grids.WORKERS[truth_grids.answer(truths)]
        if truths[picked] < (1 - truth_grids.MARGIN) * max(truths):
            counts["provisional" if provisional else "wrong"] += 1
        elif truth_grids.WORKERS[picked] == right and not provisional:
            counts["matched"] += 1
        else:
            counts["undecided"] += 1
        if runs is not None:
            needs.append(runs)
    total = len(outcomes)
    shares = {k: v / total for k, v in counts.items()}
    shares["runs"] = statistics.median(needs) if needs else float("nan")
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    header = ("grids", "method", "matched", "wrong", "provisional", "undecided", "runs", "spent")
    print("{:<8} {:<10} {:>8} {:>6} {:>12} {:>10} {:>5} {:>6}".format(*header))
    with tempfile.TemporaryDirectory() as tmp:
        for kind in truth_grids.KINDS:
            truth = truth_grids.write_grids(Path(tmp), kind, range(args.seeds), repeats=args.repeats)
            for name, method in METHODS.items():
                outcomes, spent = method(truth, args.repeats)
                s = score(outcomes, truth)
                print(
                    f"{kind:<8} {name:<10} {s['matched']:>8.0%} {s['wrong']:>6.0%} {s['provisional']:>12.0%} "
                    f"{s['undecided']:>10.0%} {s['runs']:>5.0f} {spent:>6.1f}"
                )
    grids = args.seeds * len(truth_grids.SCENARIOS)
    print(
        f"{grids} grids of each kind ({len(truth_grids.SCENARIOS)} scenarios × {args.seeds} seeds), "
        f"{len(truth_grids.WORKERS)} worker counts, {args.repeats} repeats; "
        f"{time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
