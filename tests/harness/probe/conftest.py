"""The `harnessed` fixture: HARNESS_PROBE set in this process, as a job sets it for a script,
and the probe's state of a fresh process."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import Point
from harness.execution.dist import DistEnv
from harness.execution.probe_job import PROBE_VARIABLE, ProbeJob
from harness.probe import session
from tests.harness.probe.common import SCRIPT


@pytest.fixture
def harnessed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """HARNESS_PROBE set for `point`, as the job sets it for the script's process."""

    def set_job(point: Point, check: bool = False, world_size: int = 1) -> ProbeJob:
        job = ProbeJob(
            sweep_dir=tmp_path / "sweep",
            point=point,
            env=DistEnv(hostname="node-a", world_size=world_size, local_world_size=world_size),
            skip_done=True,
            script=SCRIPT,
            report_path=tmp_path / "report",
            check=check,
        )
        monkeypatch.setenv(PROBE_VARIABLE, job.to_json())
        monkeypatch.setattr(session, "state", session.State())
        return job

    return set_job
