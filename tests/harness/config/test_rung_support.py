"""`harness plan` names the rungs the run will skip, where the spec alone tells, and the run
then skips exactly those, for the same reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.execution.runner import run_point
from harness_schema import rows as results

W = "tests.fixtures.workloads"
P = "tests.fixtures.pipelines"


def plan_of(dataset: str, args: str, rungs: str) -> list[str]:
    spec = parse_spec(
        f"""\
name: skips
workload:
  dataset: {dataset}
  dataset_args: {args}
  model: emulated
  model_args: {{step_ms: 1}}
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 2}}
rungs: {rungs}
"""
    )
    return [n for n in expand(spec).notes if n.startswith("rung ")]


@pytest.mark.parametrize(
    ("dataset", "args", "expected"),
    [
        (
            f"{W}:TensorPairs",  # a dataset class with no load_raw
            "{size: 16}",
            {
                "raw_sample": "has no load_raw(index): rung raw_sample needs a dataset with load_raw(index)",
                "raw_bytes": "has no load_raw(index): rung raw_bytes needs a dataset with load_raw(index)",
            },
        ),
        (
            f"{P}:PlainStream",  # a stream class with no iter_raw
            "{size: 16}",
            {
                "raw_sample": "is a stream without iter_raw(): rung raw_sample needs a stream with iter_raw()",
                "raw_bytes": "is a stream without iter_raw(): rung raw_bytes needs a stream with iter_raw()",
            },
        ),
        (
            f"{P}:TokenStream",  # a stream with the split: raw_sample served, raw_bytes not
            "{size: 16, read_delay: 0, transform_delay: 0}",
            {"raw_bytes": "is a stream: rung raw_bytes needs a file-backed dataset"},
        ),
    ],
    ids=["map-style", "stream", "split stream"],
)
def test_the_plan_names_the_rungs_the_run_skips_and_why(
    dataset: str, args: str, expected: dict[str, str], tmp_path: Path
) -> None:
    rungs = "[processed_sample, raw_sample, raw_bytes, full]"
    notes = plan_of(dataset, args, rungs)
    assert len(notes) == len(expected), notes
    for note, (rung, why) in zip(notes, expected.items(), strict=True):
        assert note.startswith(f"rung {rung} will be skipped: {dataset} {why}"), note

    collate = f", collate: '{P}:pad_collate'" if dataset.startswith(P) else ""  # variable lengths
    spec = parse_spec(
        f"name: skips\nworkload: {{dataset: '{dataset}', dataset_args: {args}, model: emulated, "
        f"model_args: {{step_ms: 1}}, batch_size: 4, device: cpu{collate}}}\n"
        f"measure: {{warmup_steps: 1, steps: 2}}\nrungs: {rungs}\n"
    )
    (point,) = expand(spec).points
    run_point(point, tmp_path)
    rows = results.read_rows(tmp_path / "points" / point.id / "rank0.csv")
    skipped = {r["rung"]: r["error"] for r in rows if r["status"] == "skipped"}
    assert set(skipped) == set(expected), rows
    assert {r["status"] for r in rows if r["rung"] not in expected} == {"ok"}
    for note, rung in zip(notes, expected, strict=True):  # the row's reason is the one the plan gave
        assert skipped[rung].split(";")[0] in note


def test_a_builtin_without_stored_bytes_is_said_to_skip_raw_bytes() -> None:
    assert plan_of("fake_cifar", "{size: 16, image_size: 8}", "[raw_sample, raw_bytes, full]") == [
        "rung raw_bytes will be skipped: fake_cifar has no read_bytes(index) and decode(bytes): "
        "rung raw_bytes needs a file-backed dataset with read_bytes(index) and decode(bytes), map-style"
    ]


def test_nothing_is_said_where_only_the_built_dataset_can_tell() -> None:
    """A factory function's dataset is only known once built: its rows say why, at run time."""
    assert plan_of(f"{W}:plain_dataset", "{size: 16}", "[raw_sample, raw_bytes, full]") == []
