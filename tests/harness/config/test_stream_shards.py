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


def factory_notes(loader: str, args: str, workers: str) -> list[str]:
    spec = parse_spec(
        f"""\
name: shards
workload:
  loader: {loader}
  loader_args: {args}
  model: {P}:tiny_lm
  loss: {P}:output_loss
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 2}}
rungs: [host_batch, full]
loader: {{num_workers: {workers}}}
"""
    )
    return [n for n in expand(spec).notes if "shard" in n]


def test_a_loader_factorys_shards_in_its_loader_args_are_weighed_against_the_workers() -> None:
    """Issue 27: a factory building its stream (to_iterable_dataset(num_shards=...)) with the
    shard count in loader_args; its rows cannot count idle workers (the loader is its own), so
    the plan's note says so instead of pointing at the column."""
    assert factory_notes("tests.fixtures.loaders:stream", "{num_shards: 1}", "[1, 4]") == [
        "points 1: tests.fixtures.loaders:stream has 1 shard (loader_args.num_shards) for "
        "num_workers=4: 3 worker(s) of each rank will deliver nothing while the rows say num_workers=4 "
        "(the rows cannot count them: the factory's loader is its own, not the harness's to count in); "
        "give the stream at least num_workers × ranks shards"
    ]
    assert factory_notes("tests.fixtures.loaders:stream", "{num_shards: 4}", "4") == []
    # Its own default (1 shard) is only known once built; a factory that takes no num_workers
    # runs its own, which the plan cannot see.
    assert factory_notes("tests.fixtures.loaders:stream", "{}", "4") == []
    assert factory_notes("tests.fixtures.loaders:own_workers_stream", "{num_shards: 1}", "4") == []
