"""`harness tune`'s verb (cli.cmd_tune): a tune of a spec, or the what-if of a tune's sweep."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.backends.registry import BACKENDS
from harness.config.plan import Plan
from harness.tune.driver import tune
from harness.tune.rounds import TuneError
from harness.tune.summary import load_summary


def parse_what_if(text: str) -> tuple[int, int]:
    """ "gpus=8,cores=64" -> (8, 64)."""
    try:
        parts = dict(item.split("=", 1) for item in text.split(","))
        gpus, cores = int(parts.pop("gpus")), int(parts.pop("cores"))
        if parts or gpus < 1 or cores < 1:
            raise ValueError
    except (ValueError, KeyError):
        raise TuneError(
            f"--what-if: expected gpus=G,cores=C with integers >= 1 (e.g. gpus=8,cores=64), got {text!r}"
        ) from None
    return gpus, cores


def run_tune_verb(args: argparse.Namespace, load_plan: Callable[[Path, Sequence[str]], Plan]) -> int:
    """`harness tune SPEC` or `harness tune --what-if gpus=G,cores=C SWEEP` (cli.cmd_tune)."""
    from analysis.tune.report import render, render_what_if

    if args.what_if:
        gpus, cores = parse_what_if(args.what_if)
        if args.overrides:
            raise TuneError("--what-if reads a tune's sweep folder and takes no KEY=VALUE overrides")
        print(render_what_if(load_summary(args.spec), gpus=gpus, cores=cores))
        return 0
    if args.budget is not None and args.budget < 0:
        raise TuneError(
            f"--budget: the point-runs the confirmations may spend, an integer >= 0 (0: the profile "
            f"alone, its choice unconfirmed); got {args.budget}"
        )
    from harness.sweeps import check_backend, require_torch_here

    require_torch_here(BACKENDS[args.backend], "tune")  # on Slurm the jobs run the points
    plan = load_plan(args.spec, args.overrides)
    backend = BACKENDS[args.backend](plan.spec)
    check_backend(backend, plan, args.spec)
    sweep_dir, summary = tune(plan, args.results, backend=backend, repeats=args.repeats, budget=args.budget)
    print(render(summary))
    print(f"\nresults: {sweep_dir} (the tables: harness report {sweep_dir})")
    return 0
