"""Sweeps of one spec started in the same second each get a folder of their own (before: one
failed with `OSError: [Errno 39] Directory not empty: .../.<id>.making-<pid> -> .../<id>` and
measured nothing; issue 37)."""

from __future__ import annotations

import multiprocessing
from datetime import datetime
from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.storage import sweep as sweeps
from harness_schema import layout
from tests.conftest import TINY_WORKLOAD

SECOND = datetime(2026, 11, 28, 20, 23, 27)


class _Frozen(datetime):
    @classmethod
    def now(cls, tz: object = None) -> _Frozen:  # type: ignore[override]
        return cls.fromtimestamp(SECOND.timestamp())


def _make(root: str, start: object, made: object) -> None:
    plan = expand(parse_spec("name: same\n" + TINY_WORKLOAD))
    start.wait()  # type: ignore[attr-defined]
    made.put(sweeps.create_sweep(plan, Path(root)).name)  # type: ignore[attr-defined]


def test_three_sweeps_of_one_spec_started_in_the_same_second_each_get_their_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(layout, "datetime", _Frozen)  # every id of the same second
    context = multiprocessing.get_context("fork")  # the frozen clock goes with them
    start, made = context.Barrier(3), context.Queue()
    processes = [context.Process(target=_make, args=(str(tmp_path), start, made)) for _ in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [p.exitcode for p in processes] == [0, 0, 0]
    names = sorted(made.get(timeout=5) for _ in processes)
    assert names == ["20261128-202327", "20261128-202327-2", "20261128-202327-3"]
    for name in names:
        assert (tmp_path / "same" / name / "plan.json").is_file()
    assert sorted(p.name for p in (tmp_path / "same").iterdir()) == names  # nothing left aside


def test_an_id_taken_between_its_choice_and_the_rename_moves_to_the_next_free_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race itself, in one process: the id chosen is taken before the rename."""
    monkeypatch.setattr(layout, "datetime", _Frozen)
    plan = expand(parse_spec("name: same\n" + TINY_WORKLOAD))
    first = sweeps.create_sweep(plan, tmp_path)
    chosen = iter([first.name])
    real = layout.new_sweep_id
    monkeypatch.setattr(layout, "new_sweep_id", lambda root: next(chosen, None) or real(root))
    assert sweeps.create_sweep(plan, tmp_path).name == "20261128-202327-2"
    with pytest.raises(OSError, match=r"Directory not empty|File exists"):
        sweeps.create_sweep(plan, tmp_path, sweep_id=first.name)  # an id given is never changed


def test_a_sweep_of_several_sizes_records_each_points_ranks_and_one_size_writes_as_before(
    tmp_path: Path,
) -> None:
    plan = expand(parse_spec("name: t\n" + TINY_WORKLOAD + "slurm: {nodes: [1, 2], gpus_per_node: 0}\n"))
    one, two = plan.points
    made = sweeps.create_sweep(
        plan, tmp_path, backend="local", world_size=1, world_sizes={one.id: 1, two.id: 2}
    )
    info = sweeps.load_info(made)
    assert (info.ranks(one.id), info.ranks(two.id)) == (1, 2)
    single = expand(parse_spec("name: u\n" + TINY_WORKLOAD))
    made = sweeps.create_sweep(single, tmp_path, backend="local", world_size=1, world_sizes={})
    assert "world_sizes" not in (made / "sweep.json").read_text()
