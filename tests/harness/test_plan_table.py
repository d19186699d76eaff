"""The plan as `harness plan` prints it (harness/plan_table.py): the head line, a row per point
with the settings that vary, its rungs, and what was adjusted for PyTorch."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

from harness import plan_cost
from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.execution.loop_length import batches_per_loop
from harness.plan_table import LOOP_LENGTH_NOTE, plan_table
from tests.conftest import TINY_WORKLOAD
from tests.fixtures.calls import counted


def table_of(extra: str, name: str = "grid") -> list[str]:
    return plan_table(expand(parse_spec(f"name: {name}\n" + TINY_WORKLOAD + extra))).splitlines()


def cells(line: str) -> list[str]:
    return line.split()


def test_a_grid_shows_what_varies_its_rungs_and_the_adjustments_in_point_order() -> None:
    extra = "loader: {num_workers: [0, 2], prefetch_factor: 4}\nrungs: [full, device_batch]\n"
    plan = expand(parse_spec("name: grid\n" + TINY_WORKLOAD + extra))
    lines = plan_table(plan).splitlines()
    assert (
        lines[0]
        == "grid: 2 point(s) × 2 rung(s) × 1 repeat(s), 3 measured steps each after a warmup (its column)"
    )
    assert cells(lines[1]) == ["#", "id", "num_workers", "prefetch_factor", "rungs", "warmup", "adjusted"]
    first, second = (p.id for p in plan.points)
    assert lines[3].startswith(f"0    {first}  0 ")
    assert lines[3].endswith("device_batch full  1         prefetch_factor 4 -> null (num_workers=0)")
    assert cells(lines[4]) == ["1", second, "2", "4", "device_batch", "full", "8-40"]  # nothing adjusted
    # What does not vary (pin_memory, batch_size, the dataset...) is the spec's: not repeated.
    assert "pin_memory" not in lines[1] and "batch_size" not in lines[1]


def test_no_adjusted_column_when_nothing_was_adjusted() -> None:
    lines = table_of("loader: {num_workers: [1, 2]}\n")
    assert cells(lines[1]) == ["#", "id", "num_workers", "rungs", "warmup"]


def test_a_sequence_names_its_steps_in_order() -> None:
    lines = table_of(
        "loader: {num_workers: 2}\n"
        "sequence: [{name: base}, {name: pinned, pin_memory: true}, {name: bigger, batch_size: 16}]\n",
        name="seq",
    )
    assert (
        lines[0]
        == "seq: 3 point(s) × 1 rung(s) × 1 repeat(s), 3 measured steps each after a warmup (its column)"
    )
    assert cells(lines[1]) == ["#", "id", "step", "batch_size", "pin_memory", "rungs", "warmup"]
    assert [cells(line)[2:5] for line in lines[3:6]] == [
        ["base", "8", "False"],
        ["pinned", "8", "True"],
        ["bigger", "16", "True"],  # cumulative: the pinned step's change is kept
    ]


def test_the_head_line_counts_repeats_and_steps_from_the_spec() -> None:
    text = TINY_WORKLOAD.replace(
        "measure: {warmup_steps: 1, steps: 3, repeats: 1}",
        "measure: {warmup_steps: 5, steps: 40, repeats: 3}",
    )
    head = plan_table(expand(parse_spec("name: long\n" + text))).splitlines()[0]
    assert (
        head
        == "long: 1 point(s) × 1 rung(s) × 3 repeat(s), 40 measured steps each after a warmup (its column)"
    )


def test_a_script_point_says_how_many_batches_its_loop_receives(tmp_path: Path) -> None:
    # What the script's loader reports as len() under the harness: its LR schedule and its
    # "last batch of the epoch" are sized by it, so the plan says it before anything runs.
    script = tmp_path / "train.py"
    script.write_text("")
    text = (
        f"name: s\nworkload: {{script: {script}}}\nmeasure: {{warmup_steps: 2, steps: 5, repeats: 3}}\n"
        "loader: {num_workers: [1, 2], prefetch_factor: 2}\nrungs: [host_batch, full]\n"
    )
    plan = expand(parse_spec(text))
    lines = plan_table(plan).splitlines()
    assert cells(lines[1])[-1] == "len(loader)"
    # Three repeats: run here, one a pass (each run of the script receives one repeat's); on
    # slurm, the three in one job.
    for line, p in zip(lines[3:5], plan.points, strict=True):
        one_repeat = replace(p, measure=replace(p.measure, repeats=1))
        assert line.rstrip().endswith(
            f"{batches_per_loop(one_repeat):,} a pass ({batches_per_loop(p):,} in one job)"
        )
    assert LOOP_LENGTH_NOTE in lines
    one = expand(parse_spec(text.replace("repeats: 3", "repeats: 1")))
    assert [cells(line)[-1] for line in plan_table(one).splitlines()[3:5]] == [
        f"{batches_per_loop(p):,}" for p in one.points
    ]
    assert LOOP_LENGTH_NOTE not in plan_table(one).splitlines()
    assert batches_per_loop(plan.points[0]) < batches_per_loop(plan.points[1])  # the workers' stock
    # The script's own prefetch_factor decides the stock: the probe says it at the start.
    own = expand(parse_spec(text.replace(", prefetch_factor: 2", "")))
    # (the spec names num_workers: the text names only what is the script's)
    assert "the script's (its own prefetch_factor)" in plan_table(own).splitlines()[4]
    assert "len(loader)" not in table_of("")[1]


def test_the_plan_says_where_the_loss_is_the_models_own() -> None:
    """Issue 30: with no loss given, a user's model's own loss (output.loss, Hugging Face's
    convention) is used where its output carries one; `loss: model` insists on it."""
    lm = (
        "workload: {dataset: tests.fixtures.pipelines:tokens, model: tests.fixtures.pipelines:tiny_lm, "
        "collate: tests.fixtures.pipelines:pad_collate, batch_size: 4, device: cpu}\n"
    )
    lines = plan_table(expand(parse_spec("name: lm\n" + lm))).splitlines()
    assert lines[-1] == (
        "loss: none given in 1 point(s): the model's own where its output carries one (output.loss or "
        "output['loss'], as Hugging Face models return it), else cross-entropy on (inputs, targets)"
    )
    own = plan_table(expand(parse_spec("name: lm\n" + lm.replace("device: cpu", "device: cpu, loss: model"))))
    assert (
        own.splitlines()[-1]
        == "loss: the model's own (output.loss or output['loss']) in 1 point(s) (loss: model)"
    )
    assert not any(line.startswith("loss:") for line in table_of(""))  # a built-in model: cross-entropy


def test_a_setting_the_script_keeps_is_not_shown_as_pytorchs_default(tmp_path: Path) -> None:
    """Session 11: a spec sweeping num_workers alone over a script showed prefetch_factor 2 for
    the points with workers, where the script keeps its own (its prefetch_factor=4 runs). The
    cell says so; without workers PyTorch's rule decides (no prefetch_factor)."""
    script = tmp_path / "train.py"
    script.write_text("")
    text = (
        f"name: s\nworkload: {{script: {script}}}\nmeasure: {{warmup_steps: 2, steps: 5, repeats: 1}}\n"
        "loader: {num_workers: [0, 2]}\nrungs: [full]\n"
    )
    lines = plan_table(expand(parse_spec(text))).splitlines()
    head = lines[1]
    column = head.index("prefetch_factor")
    assert lines[3][column : column + len("prefetch_factor")].strip() == ""
    assert lines[4][column:].startswith("the script's")
    # Named by the spec, it is the spec's value.
    named = plan_table(
        expand(parse_spec(text.replace("[0, 2]}", "[0, 2], prefetch_factor: 4}")))
    ).splitlines()
    assert named[4][named[1].index("prefetch_factor") :].split()[0] == "4"


def test_the_table_costs_each_point_once_and_writes_no_setting() -> None:
    """Issue #36: the table of 1,000 points wrote every setting of every point as JSON to find
    those that vary, made every point's settings twice, and costed each point twice (its
    warmup cell, the sweep's lines)."""
    plan = expand(
        parse_spec(
            "name: grid\n" + TINY_WORKLOAD + "loader: {num_workers: [1, 2, 3], prefetch_factor: [1, 2]}\n"
        )
    )
    with counted(
        asdict=dataclasses.asdict, dumps=json.dumps, point_cost=plan_cost.point_cost, settings=Point.settings
    ) as calls:
        lines = plan_table(plan).splitlines()
    assert len(lines) == 1 + 2 + 6 + 2  # the head, the table's header and rule, its rows, the sweep's lines
    # A point's settings made whole once, for their names; the cells read the few that vary.
    assert calls == {"asdict": 0, "dumps": 0, "point_cost": 6, "settings": 1}


def test_sizes_as_an_axis_show_as_columns_with_the_node_hours_of_each() -> None:
    extra = "slurm: {nodes: [1, 4], gpus_per_node: 2, time: '00:30:00'}\n"
    lines = table_of(extra)
    assert cells(lines[1])[:5] == ["#", "id", "nodes", "gpus_per_node", "ranks"]
    assert cells(lines[3])[2:5] == ["1", "2", "2"] and cells(lines[4])[2:5] == ["4", "2", "8"]
    assert lines[-4].startswith(
        "scales: 2 sizes, one job array each on Slurm; node-hours at most: each point"
    )
    assert lines[-3] == "  1 node × 2 GPU(s) (2 rank(s)): 1 point(s), 0.50 node-hours at most"
    assert lines[-2] == "  4 nodes × 2 GPU(s) (8 rank(s)): 1 point(s), 2.00 node-hours at most"
    assert lines[-1] == "  on Slurm each size's array starts after the one before (--dependency=afterany)"
    shared = table_of(extra.replace("}", ", array_parallelism: 4}") + "loader: {num_workers: [0, 2]}\n")
    assert shared[-1] == (
        "  slurm.array_parallelism 4: up to 4 points of one size run at once, sharing the storage "
        "they measure; 1 measures each alone"
    )
    assert not [line for line in table_of("slurm: {nodes: 4}\n") if "node-hours" in line]
