from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point
from harness.sampling.timeline_file import SAMPLE_COLUMNS
from harness.storage.sweep import create_sweep
from harness_schema import layout
from harness_schema import rows as results
from harness_schema.atomic import atomic_write_text
from tests.conftest import TINY_WORKLOAD
from tests.fixtures.rows import synthetic_row  # noqa: F401  (the tests import it from here)

# The fixture sweeps are measured without the samplers, so that the tables hold exactly the
# course's columns; sampled figures are covered by tests/harness/test_runner_sampling.py and by
# the timelines these tests write themselves.
UNSAMPLED = "sampler: {host: false, gpu: false}\n"


@pytest.fixture(scope="session")
def real_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep measured by the harness itself: 3 points, on two "nodes"."""
    spec = parse_spec("name: grid\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1, 2]}\n" + UNSAMPLED)
    plan = expand(spec)
    sweep = create_sweep(plan, tmp_path_factory.mktemp("results"))
    for point in plan.points:
        for host in ("node-b", "node-a"):
            # Same point, another node: a sweep folder gathered from two machines.
            run_point(point, sweep, env=DistEnv(hostname=host), skip_done=False)
            (sweep / "points" / point.id / "rank0.csv").rename(
                sweep / "points" / point.id / f"rank0-{host}.csv"
            )
    for point in plan.points:
        for host in ("node-a", "node-b"):
            target = sweep / "points" / point.id / ("rank0.csv" if host == "node-a" else "rank1.csv")
            (sweep / "points" / point.id / f"rank0-{host}.csv").rename(target)
    return sweep


def write_rows(sweep: Path, *rows: results.RungRow) -> None:
    """Append rows to their rank files with the harness's writer, as the runner does."""
    for row in rows:
        writer = results.RankWriter(sweep / "points" / row.point_id, row.rank)
        if writer.path.exists():
            writer.rows = [dict(r) for r in results.read_rows(writer.path)]
        writer.append(row)


def write_node_meta(
    sweep: Path, point_id: str, rank: int, hostname: str, device_name: str = "cpu", gpu_count: int = 0
) -> None:
    """meta-rank<k>.json with the keys the analysis reads (the runner writes more)."""
    meta = {"hostname": hostname, "rank": rank, "device_name": device_name, "gpu_count": gpu_count}
    meta |= {"torch_version": "2.5.0", "cuda_version": "12.4" if gpu_count else "", "git_commit": "abc"}
    layout.write_meta(sweep / "points" / point_id, rank, meta)


def write_timeline(point_path: Path, rank: int = 0, gpu: bool = True, hz: float = 10.0) -> Path:
    """A sampler timeline: idle, then per rung a warmup and a measured phase, as phases nest
    ("full/0/warmup" inside "full/0"). On the CPU (gpu=False) the GPU columns are empty."""
    phases = [("", 0.5), ("host_batch/0/warmup", 0.5), ("host_batch/0", 2.0), ("", 0.3)]
    phases += [("full/0/warmup", 0.7), ("full/0", 3.0), ("", 0.2)]
    rows: list[dict[str, object]] = []
    t = 0.0
    for phase, length in phases:
        for i in range(round(length * hz)):
            busy = phase.startswith("host_batch")
            rows.append(
                {
                    "t": round(t, 3),
                    "wall_time": 1_763_770_000 + t,
                    "rank": rank,
                    "phase": phase,
                    "gpu_util": (95.0 if busy else 40.0 + 10 * (i % 3))
                    if gpu and phase
                    else (0.0 if gpu else None),
                    "gpu_mem_util": 30.0 if gpu else None,
                    "gpu_mem_used_gb": 12.5 if gpu else None,
                    "gpu_power_w": 250.0 if gpu else None,
                    "gpu_sm_clock_mhz": 1410 if gpu else None,
                    "gpu_energy_j": 250.0 * t if gpu else None,
                    "main_cpu_percent": 100.0 if phase else 5.0,
                    "loader_cpu_percent": 0.0 if busy or not phase else 380.0,
                    "system_cpu_percent": 60.0,
                    "host_memory_gb": 3.2 if i % 10 == 0 else None,
                }
            )
            t += 1 / hz
    path = point_path / f"samples-rank{rank}.csv"
    atomic_write_text(path, results.csv_text(rows, SAMPLE_COLUMNS))
    return path


def real_sweep_pair_spec(batch_size: int) -> str:
    workload = TINY_WORKLOAD.replace("batch_size: 8", f"batch_size: {batch_size}")
    workload = workload.replace("repeats: 1", "repeats: 2")
    return "name: pair\n" + workload + "loader: {num_workers: [0, 1]}\n" + UNSAMPLED


@pytest.fixture(scope="session")
def real_sweep_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two sweeps measured by the harness, before and after a change (batch_size 8 -> 4),
    two repeats each, so that the comparison has a spread to judge against."""
    root = tmp_path_factory.mktemp("pair")
    sweeps = []
    for sweep_id, batch in (("before", 8), ("after", 4)):
        plan = expand(parse_spec(real_sweep_pair_spec(batch)))
        sweep = create_sweep(plan, root, sweep_id=sweep_id)
        for point in plan.points:
            run_point(point, sweep, env=DistEnv(hostname="node-a"), skip_done=False)
        sweeps.append(sweep)
    return sweeps[0], sweeps[1]
