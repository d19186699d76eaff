from __future__ import annotations

from pathlib import Path

import pytest

from harness.backends.registry import BACKENDS
from harness.cli import main
from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.storage.sweep import create_sweep
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
    from harness.backends.slurm import SlurmBackend
    from harness.sweeps import _resume_backend

    sweep = create_sweep(expand(parse_spec(SPEC)), tmp_path, backend="sbatch")
    for name in (None, "slurm"):
        _, backend, _ = _resume_backend(sweep, name)
        assert isinstance(backend, SlurmBackend)
