"""`harness tune --backend slurm` on the real cluster: a job array per round, followed from the
driver, into one sweep that status and report read; the answer that of the injected costs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.tune.model import Config
from tests.harness.tune.test_driver import SPEC, truth
from tests.slurm.conftest import harness

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]

SLURM = 'slurm: {nodes: 1, tasks_per_node: 1, gpus_per_node: 0, cpus_per_task: 2, time: "00:05:00"}\n'


# The grid's known answer within 5 %: judged alone.
@pytest.mark.serial
def test_tune_on_slurm_submits_a_round_at_a_time_and_reaches_the_grids_answer(tmp_path: Path) -> None:
    spec = tmp_path / "tune.yaml"
    spec.write_text(SPEC.replace("num_workers: [0, 1, 2, 3]", "num_workers: [0, 1, 2]") + SLURM)
    out = harness("tune", str(spec), "--backend", "slurm", cwd=tmp_path, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tune: round 1: 3 point(s) as jobs " in out.stdout  # the profile: 0, 1 and 2 (plateau) workers
    assert "tune: round 2: " in out.stdout  # the confirmations
    sweep = tmp_path / next(
        line.removeprefix("results: ").split(" ")[0]
        for line in out.stdout.splitlines()
        if line.startswith("results: ")
    )
    summary = json.loads((sweep / "tune.json").read_text())
    answer = Config.of(summary["answer"]).num_workers
    truths = {n: truth(n) for n in (0, 1, 2)}
    assert truths[answer] >= 0.95 * max(truths.values()), f"tune chose {answer} workers; truth {truths}"

    # One array per round, every point's jobs recorded; the sweep reads as any Slurm sweep.
    jobs = json.loads((sweep / "jobs.json").read_text())
    arrays = {e["job_id"].split("_")[0] for e in jobs}
    rounds = sum(line.startswith("tune: round ") for line in out.stdout.splitlines())
    assert len(arrays) == rounds >= 2
    assert json.loads((sweep / "sweep.json").read_text())["backend"] == "slurm"
    status = harness("status", str(sweep), cwd=tmp_path)
    assert status.returncode == 0, status.stdout + status.stderr
    report = harness("report", str(sweep), cwd=tmp_path)
    assert report.returncode == 0 and "recommendation for" in report.stdout


def test_tune_on_slurm_refuses_a_bad_spec_before_anything_is_submitted(tmp_path: Path) -> None:
    spec = tmp_path / "tune.yaml"
    spec.write_text(SPEC + SLURM.replace("time:", 'extra: {mail-type: "END\\nrm -rf ~"}, time:'))
    out = harness("tune", str(spec), "--backend", "slurm", cwd=tmp_path)
    assert out.returncode == 2
    assert f"{spec}:15: slurm.extra.mail-type: 'END\\nrm -rf ~' is not allowed; " in out.stderr
    assert not (tmp_path / "results").exists()
