"""`harness plan` says where a stream has fewer shards than the DataLoader workers that read
it, where the spec tells the shards without building the dataset."""

from __future__ import annotations

from harness.config.plan import expand
from harness.config.spec import parse_spec

P = "tests.fixtures.pipelines"


def shard_notes(dataset: str, args: str, workers: str) -> list[str]:
    spec = parse_spec(
        f"""\
name: shards
workload:
  dataset: {dataset}
  dataset_args: {args}
  collate: {P}:pad_collate
  model: emulated
  model_args: {{step_ms: 1}}
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 2}}
loader: {{num_workers: {workers}}}
"""
    )
    return [n for n in expand(spec).notes if "shard" in n]


def test_a_shard_count_in_the_dataset_args_is_weighed_against_each_points_workers() -> None:
    assert shard_notes(f"{P}:sharded_stream", "{num_shards: 1}", "[0, 1, 2, 4]") == [
        f"points 2: {P}:sharded_stream has 1 shard (dataset_args.num_shards) for num_workers=2: 1 "
        "worker(s) of each rank will deliver nothing while the rows say num_workers=2 (their "
        "idle_workers column counts them); give the stream at least num_workers × ranks shards",
        f"points 3: {P}:sharded_stream has 1 shard (dataset_args.num_shards) for num_workers=4: 3 "
        "worker(s) of each rank will deliver nothing while the rows say num_workers=4 (their "
        "idle_workers column counts them); give the stream at least num_workers × ranks shards",
    ]


def test_a_dataset_class_that_states_its_shards_is_weighed_too() -> None:
    (note,) = shard_notes(f"{P}:FourShards", "{}", "[4, 8]")
    assert note.startswith(
        f"points 1: {P}:FourShards has 4 shards ({P}:FourShards.n_shards) for num_workers=8: 4 "
    )


def test_nothing_is_said_where_the_shards_suffice_or_only_the_built_dataset_knows() -> None:
    assert shard_notes(f"{P}:sharded_stream", "{num_shards: 4}", "[1, 4]") == []
    # The function's default (1 shard) and the class's property are only known once built:
    # the rows' idle_workers tell then.
    assert shard_notes(f"{P}:sharded_stream", "{}", "4") == []
    assert shard_notes(f"{P}:ShardedStream", "{num_shards: 8, per_shard: 2}", "4") == []
