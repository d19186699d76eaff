from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from harness.backends.registry import BACKENDS
from harness.cli import main
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.storage.sweep import create_sweep
from harness_schema.rows import read_rows
from tests.conftest import TINY_WORKLOAD

SPEC = "name: t\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1]}\n"


@pytest.mark.parametrize("verb", ["run", "resume", "tune"])
def test_every_verb_that_runs_points_offers_the_registrys_backends(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main([verb, str(tmp_path), "--backend", "nowhere"])
    assert ended.value.code == 2
    choices = ", ".join(repr(name) for name in BACKENDS)
    assert f"argument --backend: invalid choice: 'nowhere' (choose from {choices})" in capsys.readouterr().err
    assert list(BACKENDS) == ["inline", "local", "slurm"]


@pytest.mark.parametrize(
    ("slurm", "backend", "line"),
    [
        ("", "slurm", "--backend slurm runs 1 rank(s) as Slurm jobs: resume it with --backend inline"),
        (
            "slurm: {tasks_per_node: 2, gpus_per_node: 0}\n",
            "local",
            "--backend local runs 2 rank(s) here: resume it with --backend inline",
        ),
    ],
    ids=["on-slurm", "more-ranks"],
)
def test_a_sweep_is_resumed_only_on_a_backend_that_runs_its_points_alike(
    slurm: str, backend: str, line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = create_sweep(expand(parse_spec(SPEC + slurm)), tmp_path, backend="inline")
    assert main(["resume", str(sweep), "--backend", backend]) == 2
    err = capsys.readouterr().err
    assert err == f"harness: {sweep}: its points ran on inline with 1 rank(s) each; {line}\n"
    assert not (sweep / "points").exists()  # nothing ran


def test_a_standalone_scripts_sweep_is_resumed_on_slurm_by_its_own_name_or_slurms(tmp_path: Path) -> None:
    from harness.backends.slurm.backend import SlurmBackend
    from harness.sweeps import _resume_backend

    sweep = create_sweep(expand(parse_spec(SPEC)), tmp_path, backend="sbatch")
    for name in (None, "slurm"):
        _, backend, _ = _resume_backend(sweep, name)
        assert isinstance(backend, SlurmBackend)


REPEATED = SPEC.replace("repeats: 1", "repeats: 3")


def _units_in_order(sweep: Path) -> list[tuple[int, int]]:
    """(point index, repeat) of every row, in the order the rows' started_at says they ran."""
    from harness.storage.sweep import load_points
    from harness_schema.rows import read_rows

    index = {p.id: p.index for p in load_points(sweep)}
    rows = [r for p in index for r in read_rows(sweep / "points" / p / "rank0.csv")]
    rows.sort(key=lambda r: (r["started_at"], r["finished_at"]))
    return [(index[r["point_id"]], int(r["repeat"])) for r in rows]


def _passes_in_order(sweep: Path) -> list[int]:
    """The run_pass of every row, in the order they ran."""
    from harness.storage.sweep import load_points

    rows = [r for p in load_points(sweep) for r in read_rows(sweep / "points" / p.id / "rank0.csv")]
    rows.sort(key=lambda r: (r["started_at"], r["finished_at"]))
    return [int(r["run_pass"]) for r in rows]


def test_a_sweep_run_here_measures_one_repeat_of_each_point_in_turn(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(REPEATED)
    assert main(["run", str(tmp_path / "t.yaml"), "--results", str(tmp_path / "r")]) == 0
    (sweep,) = (tmp_path / "r" / "t").iterdir()
    # ABC ABC, not AAA BBB: a slow spell of the machine lands on both configurations.
    assert _units_in_order(sweep) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    # Each row says its pass: the runs of the two points measured side by side share it.
    assert _passes_in_order(sweep) == [0, 0, 1, 1, 2, 2]


class _Interrupted(BACKENDS["inline"]):  # type: ignore[misc,valid-type]
    """The inline backend, Ctrl-C'd by its user once it has measured `runs` point-runs."""

    runs = 3

    def run(self, points, sweep_dir, **kwargs):  # type: ignore[no-untyped-def]
        if _Interrupted.runs <= 0:
            raise KeyboardInterrupt
        for point in points:
            _Interrupted.runs -= 1
            super().run([point], sweep_dir, **kwargs)
            if _Interrupted.runs <= 0:
                raise KeyboardInterrupt


def test_a_sweep_interrupted_mid_pass_resumes_measuring_each_missing_unit_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.sweeps import measure, resume_sweep

    plan = expand(parse_spec(REPEATED))
    sweep = create_sweep(plan, tmp_path, backend="inline")
    assert measure(_Interrupted(plan.spec), plan.points, sweep, lambda ids: None) is False
    assert "interrupted; what was measured is kept; go on with: harness resume" in capsys.readouterr().err
    assert _units_in_order(sweep) == [(0, 0), (1, 0), (0, 1)]  # stopped inside the second pass
    assert resume_sweep(sweep, wait=True) == 0
    # Each missing unit once, still in passes: the next repeat each point lacks, in turn.
    assert _units_in_order(sweep) == [(0, 0), (1, 0), (0, 1), (0, 2), (1, 1), (1, 2)]
    # The resume's passes are numbered on from the interrupted run's (0, 1): a run_pass that
    # two points share says they were measured side by side, whichever run measured them.
    assert _passes_in_order(sweep) == [0, 0, 1, 2, 2, 3]


class _Watched(BACKENDS["inline"]):  # type: ignore[misc,valid-type]
    """The inline backend, noting at each pass who `status` would say runs the sweep."""

    seen: ClassVar[list[str]] = []

    def run(self, points, sweep_dir, **kwargs):  # type: ignore[no-untyped-def]
        from harness.storage.sweep import live_owner

        _Watched.seen.append(live_owner(sweep_dir))
        super().run(points, sweep_dir, **kwargs)


def test_the_sweep_is_owned_through_every_pass_and_let_go_after(tmp_path: Path) -> None:
    import os

    from harness.storage.sweep import live_owner
    from harness.sweeps import run_points

    plan = expand(parse_spec(REPEATED))
    sweep = create_sweep(plan, tmp_path, backend="inline")
    run_points(_Watched(plan.spec), plan.points, sweep)
    # owner.json names this process in each of the 3 passes (it was written and removed pass by
    # pass, so `status` between two passes saw no owner), and is gone once they are done.
    assert len(_Watched.seen) == 3 and all(f"pid {os.getpid()} " in who for who in _Watched.seen)
    assert live_owner(sweep) == ""


def test_a_point_that_cannot_start_is_tried_twice_not_once_a_pass(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A dataset that does not build: each point fails as it starts. Its first pass, then its
    other repeats at once: a failed row for every unit, as before passes, for two tries, not
    one per repeat."""
    from harness.sweeps import measure

    broken = REPEATED.replace("repeats: 3", "repeats: 4").replace(
        "dataset: fake_cifar", 'dataset: "tests.fixtures.workloads:broken_dataset"'
    )
    plan = expand(parse_spec(broken.replace("  dataset_args: {size: 48, image_size: 8, resize: null}\n", "")))
    sweep = create_sweep(plan, tmp_path, backend="inline")
    with caplog.at_level("ERROR", logger="harness.execution.runner"):
        assert measure(BACKENDS["inline"](plan.spec), plan.points, sweep, lambda ids: None)
    for point in plan.points:
        rows = read_rows(sweep / "points" / point.id / "rank0.csv")
        assert sorted(int(r["repeat"]) for r in rows) == [0, 1, 2, 3]
        assert {r["status"] for r in rows} == {"failed"}
        assert all(r["error"].endswith("failed to build: ValueError: no such bucket") for r in rows)
        assert sum(point.id in m for m in caplog.messages) == 2


def test_a_point_whose_every_unit_failed_is_not_run_again_for_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One repeat, a dataset that raises in every rung: each point is announced and run once.
    Before, the points that failed wholly were handed to the backend once more with nothing
    left to measure: their progress lines twice (a user reads a second measurement), and under
    the local backend a job started for nothing."""
    from harness.sweeps import measure

    raising = SPEC.replace("dataset: fake_cifar", 'dataset: "tests.fixtures.workloads:raising_dataset"')
    plan = expand(
        parse_spec(raising.replace("  dataset_args: {size: 48, image_size: 8, resize: null}\n", ""))
    )
    sweep = create_sweep(plan, tmp_path, backend="inline")
    with caplog.at_level("INFO", logger="harness.backends.inline"):
        assert measure(BACKENDS["inline"](plan.spec), plan.points, sweep, lambda ids: None)
    for point in plan.points:
        assert [r["status"] for r in read_rows(sweep / "points" / point.id / "rank0.csv")] == ["failed"]
        assert sum(m.startswith("[") and f"point {point.id}" in m for m in caplog.messages) == 1
