"""Hugging Face `datasets` pipelines: map-style (tokenized ahead with map, or on each read) and
streaming (to_iterable_dataset, split by rank and by worker); the ladder names a cost put in
their read or their tokenizer, and nothing where nothing is put."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

datasets = pytest.importorskip("datasets", reason="the optional extra `libs` (datasets) is not installed")

from harness.examples.hf_text import HFTexts, HFTextStream, make_dataset, make_stream  # noqa: E402
from harness.examples.text import make_collate  # noqa: E402
from tests.fixtures.ladder_runs import SPLIT_LADDER, ladder_run, ladder_verdict  # noqa: E402

SIZE = 64


def ids_of(batches: DataLoader) -> list[tuple[int, ...]]:  # type: ignore[type-arg]
    """Each sample of the loader's batches as its token ids (padding left out)."""
    out = []
    for batch in batches:
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True):
            out.append(tuple(ids[mask.bool()].tolist()))
    return out


def test_map_style_reads_arrow_rows_and_tokenizes_ahead_or_on_read() -> None:
    ahead, on_read = make_dataset(size=SIZE, tokenize="map"), make_dataset(size=SIZE, tokenize="transform")
    assert isinstance(ahead.table, datasets.Dataset) and ahead.table.column_names == ["input_ids"]
    assert on_read.table.column_names == ["text"] and isinstance(on_read.load_raw(3)["text"], str)
    assert len(ahead) == len(on_read) == SIZE
    for i in (0, 5, SIZE - 1):
        assert torch.equal(ahead[i]["input_ids"], on_read[i]["input_ids"])
    assert ahead[0]["input_ids"].dtype == torch.long


def test_the_collate_pads_hf_rows_into_ids_mask_and_labels() -> None:
    dataset = make_dataset(size=SIZE)
    batch = next(iter(DataLoader(dataset, batch_size=8, collate_fn=make_collate(max_length=128))))
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert batch["input_ids"].shape[0] == 8 and batch["input_ids"].shape[1] % 8 == 0
    longest = max(len(dataset[i]["input_ids"]) for i in range(8))
    assert int(batch["attention_mask"].sum(1).max()) == longest


@pytest.mark.parametrize("workers", [0, 2])
def test_the_stream_reads_every_row_once_whatever_the_workers(workers: int) -> None:
    expected = Counter(tuple(make_dataset(size=SIZE)[i]["input_ids"].tolist()) for i in range(SIZE))
    stream = make_stream(size=SIZE, num_shards=4)
    loader = DataLoader(stream, batch_size=5, num_workers=workers, collate_fn=make_collate(max_length=128))
    assert Counter(ids_of(loader)) == expected


def test_two_ranks_read_disjoint_halves_of_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = Counter(tuple(make_dataset(size=SIZE)[i]["input_ids"].tolist()) for i in range(SIZE))
    seen = []
    for rank in (0, 1):
        # split_dataset_by_node, given the rank the harness's jobs set (or torch.distributed's).
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        loader = DataLoader(make_stream(size=SIZE, num_shards=4), batch_size=4, collate_fn=make_collate())
        seen.append(ids_of(loader))
    assert len(seen[0]) == len(seen[1]) == SIZE // 2
    assert Counter(seen[0] + seen[1]) == expected


def test_the_shuffle_buffer_reorders_by_epoch() -> None:
    stream = make_stream(size=SIZE, num_shards=4, shuffle_buffer=16)
    orders = []
    for epoch in (0, 1):
        stream.set_epoch(epoch)
        orders.append([tuple(s["input_ids"].tolist()) for s in stream])
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1]


def test_bad_arguments_are_refused_with_the_value() -> None:
    with pytest.raises(ValueError, match=r"tokenize must be one of map, transform \(got 'spacy'\)"):
        HFTexts(size=SIZE, tokenize="spacy")
    with pytest.raises(ValueError, match=r"num_shards must be an integer >= 1 \(got 0\)"):
        HFTextStream(size=SIZE, num_shards=0)
    with pytest.raises(ValueError, match=r"read_ms must be a number of milliseconds >= 0 \(got -1\)"):
        HFTextStream(size=SIZE, read_ms=-1)


# --- the shipped specs under the ladder: an injected cost is named, and nothing else ---------------

# 4 samples a batch, 50 ms a sample where a cost is put: 200 ms a batch against a 100 ms step.
# A slow read needs no processed_sample rung (its drop is between raw_sample and full): one
# rung less to run.
READ = ("read_ms: 50", ["raw data loading"], "[host_batch, raw_sample, full]")
TOKENIZER = ("transform_ms: 50", ["transforms"], SPLIT_LADDER)
NOTHING = ("read_ms: 0", [], SPLIT_LADDER)


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named", "rungs"), [READ, TOKENIZER, NOTHING], ids=["slow-read", "slow-tokenizer", "nothing"]
)
def test_map_style_a_cost_injected_is_named_by_the_ladder(
    tmp_path: Path, injected: str, named: list[str], rungs: str
) -> None:
    verdict = ladder_verdict(
        "hf_text-cpu.yaml",
        tmp_path,
        f"workload.dataset_args={{size: 256, tokenize: transform, {injected}}}",
        "workload.batch_size=4",
        rungs=rungs,
    )
    assert verdict.stages == named, verdict.sentence


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named", "rungs"), [TOKENIZER, NOTHING], ids=["slow-tokenizer", "nothing"]
)
def test_streaming_a_cost_injected_is_named_by_the_ladder(
    tmp_path: Path, injected: str, named: list[str], rungs: str
) -> None:
    verdict = ladder_verdict(
        "hf_stream-cpu.yaml",
        tmp_path,
        f"workload.dataset_args={{size: 256, num_shards: 4, {injected}}}",
        "workload.batch_size=4",
        rungs=rungs,
    )
    assert verdict.stages == named, verdict.sentence


@pytest.mark.serial
@pytest.mark.parametrize(
    ("injected", "named"), [("transform_ms: 50", ["transforms"]), ("transform_ms: 0", [])]
)
def test_a_bare_dataset_with_transform_gets_raw_sample_and_its_tokenizer_named(
    tmp_path: Path, injected: str, named: list[str]
) -> None:
    # Before: raw_sample skipped ("datasets.arrow_dataset.Dataset has not"), and a slow
    # transform named "transforms + raw data loading".
    verdict, rows = ladder_run(
        "hf_text-cpu.yaml",
        tmp_path,
        "workload.dataset=harness.examples.hf_text:make_bare",
        f"workload.dataset_args={{size: 256, {injected}}}",
        "workload.batch_size=4",
    )
    assert sorted(set(rows["rung"])) == ["full", "host_batch", "processed_sample", "raw_sample"]
    assert verdict.stages == named, verdict.sentence
