"""The torchdata.nodes example through workload.loader: its settings mapped onto nodes, its
reading threads, and a cost injected into its pipeline named by the ladder (none where none)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.runner import run_point

tn = pytest.importorskip("torchdata.nodes", reason="the optional extra `libs` (torchdata) is not installed")

from harness.examples.torchdata_nodes import make_loader  # noqa: E402


def test_the_loader_gives_each_rank_its_share_in_batches() -> None:
    shares = []
    for rank in (0, 1):
        loader = make_loader(batch_size=4, num_workers=2, rank=rank, world_size=2, size=16, drop_last=True)
        assert isinstance(loader, tn.Loader)
        batches = list(loader)
        assert [b[0].shape for b in batches] == [torch.Size([4, 3, 16, 16])] * 2
        shares.append({int(x[0, 0, 0] * 1e6) for b in batches for x in b[0]})
    assert len(shares[0] | shares[1]) == 16  # every sample once across the two ranks


@pytest.mark.serial
@pytest.mark.parametrize(
    ("loader_args", "named"),
    [
        # 25 ms a sample, 4 a batch, read serially (num_workers 0): 100 ms a batch against a
        # step of 50 ms: the drop lands between host_batch and full.
        ("{read_ms: 25}", True),
        # 120 ms of collation a batch, in the pipeline's collate Mapper: the same stage.
        ("{collate_ms: 120}", True),
        ("{}", False),
    ],
    ids=["slow-read", "slow-collate", "nothing"],
)
def test_a_cost_injected_into_the_pipeline_is_named_by_the_ladder(
    tmp_path: Path, loader_args: str, named: bool
) -> None:
    from analysis.ladder.verdict import ladder_verdicts
    from analysis.load import load_results

    spec = parse_spec(
        "name: td\nworkload:\n  loader: harness.examples.torchdata_nodes:make_loader\n"
        f"  loader_args: {loader_args}\n  model: emulated\n  model_args: {{step_ms: 50}}\n"
        "  batch_size: 4\n  device: cpu\nmeasure: {warmup_steps: 2, steps: 6, repeats: 3}\n"
        "loader: {num_workers: 0}\nrungs: [host_batch, processed_sample, full]\n"
    )
    (point,) = expand(spec).points
    outcome = run_point(point, tmp_path / "sweep", env=DistEnv(hostname="node-a"))
    assert outcome.failed == 0 and outcome.skipped == 3, [r.error for r in outcome.rows]
    (verdict,) = ladder_verdicts(load_results([tmp_path / "sweep"]).rows)
    # The loader is not cut (no .dataset): its whole pipeline is the one stage named, as what
    # it is: the harness did not build it, so it claims no split.
    whole = [
        "the loader as given (its reading, transforms, collation and hand-off: not split, the "
        "harness did not build it)"
    ]
    assert verdict.stages == (whole if named else []), verdict.sentence


def test_its_reading_threads_count_as_loader_cores(tmp_path: Path) -> None:
    # torchdata.nodes decodes in threads of the rank's process: loader_cores read 0 (issue 27).
    from harness_schema import layout
    from harness_schema import rows as results

    spec = parse_spec(
        "name: td\nworkload:\n  loader: harness.examples.torchdata_nodes:make_loader\n"
        "  loader_args: {decode_ms: 5}\n  model: emulated\n  model_args: {step_ms: 30}\n"
        "  batch_size: 4\n  device: cpu\nmeasure: {warmup_steps: 2, steps: 8}\n"
        "loader: {num_workers: 2}\nrungs: [full]\n"
    )
    (point,) = expand(spec).points
    run_point(point, tmp_path, env=DistEnv(hostname="node-a"))
    (row,) = results.read_rows(layout.rank_file(layout.point_dir(tmp_path, point.id), 0))
    assert row["status"] == "ok", row["error"]
    # 20 ms of CPU a batch in the reader threads against a 30 ms sleeping step: CPU seconds
    # (not timings) decide, so a busy machine stretches both alike.
    loader, main = float(row["loader_cores"]), float(row["main_cores"])
    assert loader > 0.1 and loader > 2 * main, (loader, main)
    assert row["loader_given"] == "torchdata.nodes.loader.Loader"
