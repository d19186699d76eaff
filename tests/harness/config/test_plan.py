from __future__ import annotations

import dataclasses
import hashlib
import json
import textwrap
from pathlib import Path

from harness.config.plan import Plan, Point, expand, resolve_loader
from harness.config.spec import parse_spec
from tests.conftest import TINY_WORKLOAD
from tests.fixtures.calls import counted


def plan_of(extra: str):
    return expand(parse_spec("name: t\n" + TINY_WORKLOAD + textwrap.dedent(extra)))


def loader_values(plan, *fields):
    return [tuple(getattr(p.loader, f) for f in fields) for p in plan.points]


def test_axes_cross_in_spec_order_first_values_first() -> None:
    plan = plan_of("loader: {num_workers: [1, 2], pin_memory: [false, true]}\n")
    assert loader_values(plan, "num_workers", "pin_memory") == [(1, False), (1, True), (2, False), (2, True)]
    assert [p.index for p in plan.points] == [0, 1, 2, 3]


def test_workload_axes_cross_with_loader_axes() -> None:
    plan = plan_of("loader: {num_workers: [1, 2]}\n").spec
    plan = expand(parse_spec(plan.text.replace("batch_size: 8", "batch_size: [4, 8]")))
    assert [(p.workload.batch_size, p.loader.num_workers) for p in plan.points] == [
        (4, 1),
        (4, 2),
        (8, 1),
        (8, 2),
    ]


def test_zip_pairs_axes_instead_of_crossing() -> None:
    plan = plan_of(
        """\
        loader: {num_workers: [1, 2, 4], prefetch_factor: [8, 4, 2], pin_memory: [false, true]}
        zip: [[num_workers, loader.prefetch_factor]]
        """
    )
    assert loader_values(plan, "num_workers", "prefetch_factor", "pin_memory") == [
        (1, 8, False),
        (1, 8, True),
        (2, 4, False),
        (2, 4, True),
        (4, 2, False),
        (4, 2, True),
    ]


def test_exclude_removes_matching_combinations_and_says_how_many() -> None:
    plan = plan_of(
        """\
        loader: {num_workers: [1, 2], pin_memory: [false, true], non_blocking: [false, true]}
        exclude: [{pin_memory: false, non_blocking: true}]
        """
    )
    assert (False, True) not in loader_values(plan, "pin_memory", "non_blocking")
    assert len(plan.points) == 6
    assert "2 combination(s) removed by exclude" in plan.notes


def test_exclude_that_matches_nothing_is_noted() -> None:
    plan = plan_of("loader: {num_workers: [1, 2]}\nexclude: [{num_workers: 3}]\n")
    assert "exclude[0] matched no combination; check its values" in plan.notes


def test_sequence_is_cumulative() -> None:
    plan = plan_of(
        """\
        sequence:
          - {name: baseline}
          - {name: workers, num_workers: 2}
          - {name: pinning, pin_memory: true, non_blocking: true}
          - {name: batch, batch_size: 16}
        """
    )
    assert [p.sequence_step for p in plan.points] == ["baseline", "workers", "pinning", "batch"]
    assert loader_values(plan, "num_workers", "pin_memory") == [(0, False), (2, False), (2, True), (2, True)]
    assert [p.workload.batch_size for p in plan.points] == [8, 8, 8, 16]


def test_sequence_steps_with_equal_settings_stay_distinct_points() -> None:
    plan = plan_of("sequence: [{name: a}, {name: b, drop_last: false}]\n")
    assert len(plan.points) == 2
    assert plan.points[0].id != plan.points[1].id


def test_workers_zero_drops_prefetch_and_persistence_as_pytorch_requires() -> None:
    settings, notes = resolve_loader(
        dict(
            num_workers=0,
            persistent_workers=True,
            pin_memory=False,
            non_blocking=False,
            prefetch_factor=4,
            drop_last=False,
        )
    )
    assert settings.prefetch_factor is None and settings.persistent_workers is False
    assert notes == (  # in the order of the table's columns
        "persistent_workers true -> false (num_workers=0)",
        "prefetch_factor 4 -> null (num_workers=0)",
    )


def test_workers_without_prefetch_get_pytorch_default() -> None:
    settings, notes = resolve_loader(
        dict(
            num_workers=2,
            persistent_workers=False,
            pin_memory=True,
            non_blocking=True,
            prefetch_factor=None,
            drop_last=False,
        )
    )
    assert settings.prefetch_factor == 2
    assert notes == ("prefetch_factor null -> 2 (PyTorch's default with workers)",)


def test_combinations_equal_once_resolved_are_measured_once() -> None:
    plan = plan_of("loader: {num_workers: [0, 2], persistent_workers: [false, true]}\n")
    assert loader_values(plan, "num_workers", "persistent_workers") == [(0, False), (2, False), (2, True)]
    assert any("same as point 0 once resolved; measured once" in n for n in plan.notes)


def test_point_ids_are_stable_and_depend_on_what_is_measured() -> None:
    first = plan_of("loader: {num_workers: [1, 2]}\n")
    again = plan_of("loader: {num_workers: [1, 2]}\n")
    assert [p.id for p in first.points] == [p.id for p in again.points]
    assert all(len(p.id) == 10 for p in first.points)
    longer = expand(parse_spec(first.spec.text.replace("steps: 3", "steps: 4")))
    assert {p.id for p in longer.points}.isdisjoint(p.id for p in first.points)
    # The spec's name and the Slurm resources do not change what is measured.
    renamed = expand(parse_spec(first.spec.text.replace("name: t", "name: u") + "slurm: {nodes: 2}\n"))
    assert [p.id for p in renamed.points] == [p.id for p in first.points]


def test_points_keep_the_ids_they_had_before_the_pipeline_settings_existed() -> None:
    """collate, sampler, loss, step... left at their defaults are not hashed (id_at_default):
    a sweep measured before them still resumes. The ids below are those of the version before."""
    plan = plan_of("loader: {num_workers: [0, 2]}\n")
    assert [p.id for p in plan.points] == ["d8c2581380", "eb26f43691"]
    with_collate = plan_of("loader: {num_workers: [0, 2]}\n").spec.text.replace(
        "  batch_size: 8", '  batch_size: 8\n  batch_samples: "tests.fixtures.pipelines:count_labels"'
    )
    assert {p.id for p in expand(parse_spec(with_collate)).points}.isdisjoint(p.id for p in plan.points)


def test_point_ids_are_those_of_the_versions_before() -> None:
    """A resume recognises the points done by their ids: these are the ids the plan gave
    before the settings were hashed once per point (issue #36), for a grid, a sequence, a
    window in seconds and a setting hashed only away from its default."""
    grid = plan_of("loader: {num_workers: [0, 2], pin_memory: [false, true]}\n")
    assert [p.id for p in grid.points] == ["d8c2581380", "4e2c984a0e", "eb26f43691", "18aff7dfea"]
    steps = plan_of("sequence:\n  - {name: baseline}\n  - {name: workers, num_workers: 2}\n")
    assert [p.id for p in steps.points] == ["2a5a3a0c3a", "594490fd9d"]
    text = plan_of("loader: {num_workers: 2}\n").spec.text
    timed = expand(parse_spec(text.replace("steps: 3", "steps: 3, seconds: 2")))
    assert [p.id for p in timed.points] == ["0b913ff934"]
    sampled = text.replace(
        "  batch_size: 8", '  batch_size: 8\n  batch_samples: "tests.fixtures.pipelines:count_labels"'
    )
    assert [p.id for p in expand(parse_spec(sampled)).points] == ["e4349a6fdf"]


def test_a_plan_writes_and_hashes_each_point_once_not_each_setting() -> None:
    """Issue #36: a plan of 1,000 points called dataclasses.asdict 7,000 times and json.dumps
    34,000 times (once per setting and point, for its varying settings), 5.7 s. A point's
    settings are now read once, and its id is its one JSON text and its one hash; the
    varying settings of plain values write none."""
    axes = "loader: {num_workers: [1, 2, 3], prefetch_factor: [1, 2, 3, 4], pin_memory: [false, true]}\n"
    spec = parse_spec("name: t\n" + TINY_WORKLOAD + axes)
    with counted(asdict=dataclasses.asdict, dumps=json.dumps, sha1=hashlib.sha1) as calls:
        plan = expand(spec)
        varying = plan.varying_settings()
        for point in plan.points:
            point.settings()
            point.to_json()
    assert len(plan.points) == 24
    assert varying == ["num_workers", "pin_memory", "prefetch_factor"]
    assert calls == {"asdict": 0, "dumps": 24, "sha1": 24}


def test_varying_settings_compare_values_as_json_writes_them() -> None:
    """Equal mappings in two points do not vary, whether or not they are one object; 8 and
    8.0, or 1 and true, are written apart and vary (as plan.csv shows them)."""
    plan = plan_of("")
    point = plan.points[0]

    def varying(*model_args: dict[str, object]) -> list[str]:
        points = tuple(
            dataclasses.replace(point, workload=dataclasses.replace(point.workload, model_args=a))
            for a in model_args
        )
        return Plan(spec=plan.spec, points=points).varying_settings()

    assert varying({"width": 8}, {"width": 8}) == []
    assert varying({"width": 8}, {"width": 8.0}) == ["model_args"]
    assert varying({"width": 1}, {"width": True}) == ["model_args"]
    assert varying({"width": 8}, {"width": 8}, {"width": 9}) == ["model_args"]


def test_a_time_based_window_is_part_of_the_id_once_given() -> None:
    """measure.seconds changes what a window measures (a longer window): hashed when given; at
    null left out, so the points measured before it existed keep their ids."""
    plan = plan_of("loader: {num_workers: [0, 2]}\n")
    assert [p.id for p in plan.points] == ["d8c2581380", "eb26f43691"]
    timed = expand(parse_spec(plan.spec.text.replace("steps: 3", "steps: 3, seconds: 2")))
    assert {p.id for p in timed.points}.isdisjoint(p.id for p in plan.points)
    assert all(p.measure.seconds == 2 for p in timed.points)


def test_point_round_trips_through_json() -> None:
    point = plan_of("loader: {num_workers: 2}\n").points[0]
    assert Point.from_json(point.to_json()) == point


def test_varying_settings_lists_only_what_varies() -> None:
    plan = plan_of("loader: {num_workers: [1, 2], pin_memory: true}\n")
    assert plan.varying_settings() == ["num_workers"]


def test_a_setting_is_read_alone_as_settings_give_it() -> None:
    point = plan_of("loader: {num_workers: 2}\n").points[0]
    assert {name: point.setting(name) for name in point.settings()} == point.settings()


def test_a_script_keeps_the_loader_settings_the_spec_does_not_name(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    text = (
        f"name: s\nworkload: {{script: {script}}}\nloader: {{num_workers: [1, 2]}}\n"
        "sequence:\n  - {name: pinned, loader.pin_memory: true}\n"
    )
    plan = expand(parse_spec(text))
    keeps = ("persistent_workers", "non_blocking", "prefetch_factor", "drop_last")
    assert all(p.script_keeps == keeps for p in plan.points)
    assert (
        "the script keeps its own persistent_workers, non_blocking, prefetch_factor, drop_last (the "
        "spec's loader section does not name them; where the script gives none, PyTorch's defaults): "
        "the rows record what ran"
    ) in plan.notes
    assert Point.from_json(plan.points[0].to_json()) == plan.points[0]
    built_in = expand(parse_spec("name: b\n" + TINY_WORKLOAD))
    assert built_in.points[0].script_keeps == () and not any("keeps" in n for n in built_in.notes)


# --- sizes as an axis (slurm.nodes, gpus_per_node, tasks_per_node: issue #40) ---------------

REPO = Path(__file__).resolve().parents[3]


def test_a_spec_of_one_size_plans_the_ids_it_planned_before_sizes_were_axes() -> None:
    """The ids of two committed specs as the harness planned them before sizes could be axes
    (commit 3344942): a resume of their sweeps still finds every point done."""
    from harness.config.spec import load_spec

    io_lab = [p.id for p in expand(load_spec(REPO / "jobs/io_lab.yaml")).points]
    sequence = [p.id for p in expand(load_spec(REPO / "jobs/rand_optimisation_sequence.yaml")).points]
    assert io_lab == [
        "5dc29920c1", "c5cc6180e5", "4130878398", "faee62b2b6",
        "f5c24997ce", "50e23a9e11", "711643962e", "99f8f60032",
    ]  # fmt: skip
    assert sequence == [
        "2b0ec05f32", "f111e16cc0", "e6acdd4c0c", "c30f0738cf",
        "a4dbaa843e", "8c3863e9db", "6195585134", "b046c79134",
    ]  # fmt: skip


def test_a_list_of_nodes_plans_every_point_at_each_size_with_ids_of_their_own() -> None:
    plan = plan_of("loader: {num_workers: [0, 2]}\nslurm: {nodes: [1, 2], gpus_per_node: 4}\n")
    sizes = [
        (p.scale.nodes, p.scale.gpus_per_node, p.scale.tasks_per_node, p.loader.num_workers)
        for p in plan.points
    ]
    assert sizes == [(1, 4, 4, 0), (1, 4, 4, 2), (2, 4, 4, 0), (2, 4, 4, 2)]
    assert len({p.id for p in plan.points}) == 4
    # A point's size is part of its id only where sizes vary: the same settings at one node,
    # planned alone, are another id than within the axis.
    alone = plan_of("loader: {num_workers: [0, 2]}\nslurm: {nodes: 1, gpus_per_node: 4}\n")
    assert not {p.id for p in alone.points} & {p.id for p in plan.points}


def test_sizes_cross_with_each_other_and_a_point_keeps_its_size_through_json() -> None:
    plan = plan_of("slurm: {nodes: [1, 2], gpus_per_node: [0, 2]}\n")
    sizes = [(p.scale.nodes, p.scale.gpus_per_node, p.scale.world_size) for p in plan.points]
    assert sizes == [(1, 0, 1), (1, 2, 2), (2, 0, 2), (2, 2, 4)]
    back = [Point.from_json(json.loads(json.dumps(p.to_json()))) for p in plan.points]
    assert [(q.id, q.scale) for q in back] == [(p.id, p.scale) for p in plan.points]
