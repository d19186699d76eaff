"""How long the analysis takes on 10,000 points of results, against a plain pandas.concat.

    .venv/bin/python benchmarks/analysis_scale.py [--points 10000] [--repeats 2] [--keep DIR] [--profile]
                                                  [--plain-sample N] [--reuse DIR]

Writes the result folders of `--points` points (spread over 4 sweeps, 2 node types, 8 nodes;
one rank file per point, `--repeats` rows each, a meta-rank0.json and a plan.json per sweep)
with the harness's own writer (results.csv_text with ROW_COLUMNS) into a temporary folder,
then measures, in this one run:

- plain: `pandas.concat([pandas.read_csv(f) for f in files])`, the reading alone (with
  `--plain-sample N`, of N files spread over the sweep, extrapolated to all and labelled so:
  at 100,000 points the plain reading alone takes minutes);
- report, first: `analysis.render.report.build_report(paths, "terminal")` on folders that have
  no consolidated file yet (analysis/consolidated.py): finding and reading every rank file,
  aggregating ranks and repeats, the per-node tables, stragglers, recommendations, rendered,
  and writing each sweep's consolidated file;
- report: the same again, as a report run in a loop or after the sweep's end reads it (the
  consolidated files, and the rank files changed since: none here; each sweep's summary and
  recommendations kept by the first, analysis/summary_cache.py);
- report --by gpu, first: the same with the meta files joined (node types), every meta file
  read and each sweep's consolidated meta file written;
- report --by gpu: the same again, through the consolidated meta files;
- report, one rank file changed: as a report in a loop while a sweep fills, one rank file
  rewritten since (its time moved): that file read again, its sweep summarized and judged
  again, the other sweeps' summaries taken as kept.

Each report starts as a report in a process of its own would: analysis.noise's cache of the
points' runs, which the reports before would have filled, is emptied first. The load average
is printed beside the figures: the machine's other work counts.

With --reuse DIR, the results a run with `--keep DIR` wrote are measured again instead of
written anew (100,000 point folders take minutes to write): its consolidated files are
deleted first, so that "first" is a first report again.

With --profile, the top entries of cProfile's profile of a report like the second (cumulative
time), made after the timed ones: profiling slows what it times.
Torch-free, like the analysis: runs on a login node. The target is under 10 s for 100,000
points (issue #36).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import noise
from analysis.render.report import Report, build_report
from harness_schema import layout
from harness_schema import rows as results

NODE_TYPES = (("NVIDIA A100-SXM4-80GB", 8), ("NVIDIA V100-SXM2-32GB", 4))


def generate(root: Path, points: int, repeats: int, sweeps: int = 4, nodes: int = 8) -> list[Path]:
    """Write `points` points of results under root/<spec>/<sweep>/; return the sweep folders."""
    rng = random.Random(0)
    sweep_dirs = []
    per_sweep = -(-points // sweeps)
    written = 0
    for s in range(sweeps):
        sweep_dir = root / f"spec{s % 2}" / f"20260101-00000{s}"
        plan_points = []
        for i in range(min(per_sweep, points - written)):
            point_id = f"{s:02d}{i:08x}"
            node = (s * per_sweep + i) % nodes
            device_name, gpu_count = NODE_TYPES[node % len(NODE_TYPES)]
            workers = (0, 1, 2, 4, 8, 16)[i % 6]
            row = _row(sweep_dir.name, point_id, i, f"node{node:02d}", f"{1000 + s}_{i}", workers)
            rows = []
            for repeat in range(repeats):
                t = 10.0 / (1 + workers) ** 0.5 * rng.uniform(0.97, 1.03)
                rows.append(
                    row
                    | {
                        "repeat": repeat,
                        "training_time": t,
                        "samples_per_s": row["samples"] / t,
                        "loading_time": t / 50 * rng.uniform(0.1, 0.5),
                    }
                )
            point_path = layout.point_dir(sweep_dir, point_id)
            point_path.mkdir(parents=True)
            # results.RankWriter would fsync each file; plain writes keep the set-up short.
            (point_path / "rank0.csv").write_text(results.csv_text(rows, results.ROW_COLUMNS))
            meta = {"hostname": f"node{node:02d}", "device_name": device_name, "gpu_count": gpu_count}
            (point_path / "meta-rank0.json").write_text(json.dumps(meta))
            plan_points.append(
                {"id": point_id, "index": i, "rungs": ["full"], "measure": {"repeats": repeats}}
            )
            written += 1
        (sweep_dir / "plan.json").write_text(json.dumps({"points": plan_points}))
        sweep_dirs.append(sweep_dir)
    return sweep_dirs


def _row(sweep_id: str, point_id: str, index: int, host: str, jobid: str, workers: int) -> dict[str, Any]:
    """A row as the runner writes it: every column of ROW_COLUMNS ("" where not measured)."""
    row: dict[str, Any] = dict.fromkeys(results.ROW_COLUMNS, "")
    row.update(
        sweep_id=sweep_id,
        point_id=point_id,
        point_index=index,
        rung="full",
        repeat=0,
        rank=0,
        world_size=1,
        hostname=host,
        jobid=jobid,
        device="cuda:0",
        status="ok",
        dataset="fake_cifar",
        model="resnet18",
        batch_size=32 * (1 + index % 4),
        amp="false",
        num_workers=workers,
        persistent_workers=bool(index % 2) and workers > 0,
        pin_memory=bool(index % 3),
        non_blocking=bool(index % 3),
        prefetch_factor=2 if workers else None,
        warmup_steps=5,
        steps=50,
        samples=1600,
        first_step_loading_time=0.1,
        loading_time_median=0.01,
        loading_time_total=0.5,
        step_time=0.2,
        step_time_median=0.2,
        steps_per_s=5.0,
        cpu_memory_gb=2.0 + workers * 0.3,
        gpu_util=50.0,
    )
    for flag in ("compile", "channels_last", "zero_grad_set_to_none", "gpu_normalize", "drop_last"):
        if flag in row:
            row[flag] = False
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="write the results here and keep them")
    parser.add_argument(
        "--reuse", type=Path, metavar="DIR", help="measure the results a run with --keep DIR wrote"
    )
    parser.add_argument("--profile", action="store_true", help="print the report's top cProfile entries")
    parser.add_argument(
        "--plain-sample", type=int, metavar="N", help="time plain on N files and extrapolate to all"
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="analysis-scale-") as tmp:
        root = args.reuse or args.keep or Path(tmp)
        if args.reuse:
            removed = _forget_consolidated(args.reuse)
            print(f"reusing {args.reuse} ({removed} consolidated files deleted)")
        else:
            started = time.perf_counter()
            generate(root, args.points, args.repeats)
            took = time.perf_counter() - started
            print(f"wrote {args.points} points × {args.repeats} repeats in {took:.1f} s")

        started = time.perf_counter()
        files = sorted(root.glob("*/*/points/*/rank*.csv"))
        sample = files if not args.plain_sample else files[:: max(1, len(files) // args.plain_sample)]
        plain = pd.concat([pd.read_csv(f) for f in sample], ignore_index=True)
        plain_s = (time.perf_counter() - started) * len(files) / len(sample)
        plain_label = "plain pandas.concat(read_csv per file):"
        if len(sample) < len(files):
            plain_label = f"plain, extrapolated from {len(sample)} of {len(files)} files:"

        first_s, first = _timed(lambda: build_report([root], "terminal"))
        report_s, report = _timed(lambda: build_report([root], "terminal"))
        gpu_first_s, gpu_first = _timed(lambda: build_report([root], "terminal", by="gpu"))
        gpu_s, by_gpu = _timed(lambda: build_report([root], "terminal", by="gpu"))
        os.utime(files[0])  # rewritten now, the same rows: its sweep is made again, the others kept
        changed_s, changed = _timed(lambda: build_report([root], "terminal"))
        # The profile of one more report like the second, apart: profiling slows what it times.
        profile = cProfile.Profile() if args.profile else None
        if profile is not None:
            _timed(lambda: build_report([root], "terminal"), profile)

    assert report.points == args.points == by_gpu.points, (report.points, by_gpu.points)
    assert report.text == first.text, "the report through the consolidated files differs"
    assert by_gpu.text == gpu_first.text, "the report --by gpu through the consolidated files differs"
    assert changed.text == first.text, "the report after a rank file changed differs"
    print(f"{len(files)} files, {len(plain)} rows read by plain")
    lines = [
        (plain_label, plain_s),
        ("analysis report, first (every rank file read):", first_s),
        ("analysis report (read, aggregate, table, render):", report_s),
        ("analysis report --by gpu, first (meta files read):", gpu_first_s),
        ("analysis report --by gpu (+ meta files):", gpu_s),
        ("analysis report, one rank file changed since:", changed_s),
    ]
    for label, seconds in lines:
        ratio = "reading only" if seconds is plain_s else f"{seconds / plain_s:.2f}× plain"
        print(f"{label:<52} {seconds:6.2f} s ({ratio})")
    print("load average (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"report lines: {report.text.count(chr(10)) + 1}")
    if profile is not None:
        print("\nprofile of the report (top entries by cumulative time):")
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(PROFILE_ENTRIES)
        print(out.getvalue().split("\n\n", 1)[-1].rstrip())
    return 0 if max(report_s, gpu_s) < 10 else 1


def _forget_consolidated(root: Path) -> int:
    """Delete the sweeps' consolidated files (and what is kept beside them) under root."""
    removed = 0
    for path in root.glob("*/*/consolidated-*"):
        path.unlink()
        removed += 1
    return removed


def _timed(make: Callable[[], Report], profile: cProfile.Profile | None = None) -> tuple[float, Report]:
    """Seconds to make the report, starting as a process of its own would (noise's cache empty)."""
    noise.clear_cache()
    started = time.perf_counter()
    if profile is not None:
        profile.enable()
    report = make()
    if profile is not None:
        profile.disable()
    return time.perf_counter() - started, report


PROFILE_ENTRIES = 25


if __name__ == "__main__":
    sys.exit(main())
