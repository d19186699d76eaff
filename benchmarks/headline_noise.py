"""Does the caching ladder's headline hold under noise? Issue 42's two cases, measured repeatedly.

    .venv/bin/python benchmarks/headline_noise.py [--runs 5] [--burners 1]

Each run measures, beside `--burners` busy-loop processes, two ladders at 2 repeats
(tests/fixtures/headline_runs.py): 30 ms injected per read, whose loader falls short of the
step's demand, and nothing injected, whose loader delivers many times the demand. The headline
(Verdict.costliest) must name the read in every injected run, settled or not, and nothing in
every run with nothing injected. For the second, it also prints what the same rows would have
headlined without the room-to-spare rule (analysis.ladder.headline.ROOM set out of reach): the
noise model alone, as before issue 42. About 25 s a run on a 2-core VM; more on a loaded one.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.ladder import headline
from analysis.ladder.figures import Verdict
from analysis.ladder.verdict import ladder_verdicts
from analysis.load import load_results
from tests.fixtures import headline_runs

READ = "raw data loading"


def said(v: Verdict) -> str:
    """The headline in a few words, with the state and the loader against the demand."""
    if v.costliest is None:
        top = "nothing headlined"
    else:
        top = f"{v.costliest} ({'settled' if v.costliest_settled else 'not yet settled'})"
    loader = ""
    if v.capacity_full is not None and v.demand:
        loader = f", loader {v.capacity_full / v.demand:.1f}× demand"
    room = "" if v.room is None else f", room decided at {v.room:.1f}×"
    return f"{top}; {v.state}{loader}{room}"


def without_room_rule(root: Path) -> Verdict:
    """The verdict on the same rows with the room-to-spare rule out of reach."""
    kept = headline.ROOM
    headline.ROOM = float("inf")
    try:
        (verdict,) = ladder_verdicts(load_results([root]).rows)
    finally:
        headline.ROOM = kept
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--burners", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    warnings.filterwarnings("ignore")
    read = unsettled = nothing = nothing_before = 0
    with tempfile.TemporaryDirectory() as tmp, headline_runs.cpu_burner(args.burners):
        for run in range(args.runs):
            injected = headline_runs.injected(Path(tmp) / f"injected{run}")
            control_root = Path(tmp) / f"control{run}"
            control = headline_runs.control(control_root)
            before = without_room_rule(control_root)
            read += injected.costliest == READ
            unsettled += injected.costliest == READ and not injected.costliest_settled
            nothing += control.costliest is None
            nothing_before += before.costliest is None
            print(f"run {run + 1}: injected read: {said(injected)}")
            print(f"       nothing injected: {said(control)}")
            print(f"       nothing injected, without the room rule: {said(before)}", flush=True)
    print(
        f"\n{args.runs} runs at 2 repeats beside {args.burners} CPU burner(s): the injected read headlined "
        f"in {read}/{args.runs} ({unsettled} of them as not yet settled); nothing headlined with nothing "
        f"injected in {nothing}/{args.runs} (without the room rule: {nothing_before}/{args.runs})"
    )


if __name__ == "__main__":
    main()
