"""harness.probe: alone, the script's own DataLoader and its batches on the device with one
line at exit; under the harness (HARNESS_PROBE set, here in this process), the point's rungs
through runner.measure_point from the script's own loop."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import harness.probe as probe
from harness.config.plan import Point, expand
from harness.config.spec import parse_spec
from harness.execution.dist import DistEnv
from harness.execution.loop import Clocked
from harness.execution.script import PROBE_VARIABLE, ProbeJob
from harness.storage import layout
from harness.storage import rows as results

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "probe_script.py"


class Numbers(Dataset[tuple[torch.Tensor, int]]):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.full((3,), float(index)), index


def pairs(samples: list[tuple[torch.Tensor, int]]) -> dict[str, Any]:
    """A collate of the script's own: a dict batch with a note of who made it."""
    return {
        "x": torch.stack([s[0] for s in samples]),
        "y": torch.tensor([s[1] for s in samples]),
        "by": "mine",
    }


# --- alone ---------------------------------------------------------------------------------


def test_alone_the_loader_is_the_scripts_own_dataloader() -> None:
    loader = probe.loader(Numbers(), batch_size=4, num_workers=0, drop_last=True, collate_fn=pairs)
    assert isinstance(loader, DataLoader)
    assert (loader.batch_size, loader.drop_last, loader.collate_fn) == (4, True, pairs)


def test_alone_measure_yields_the_loaders_batches_for_the_passes_asked() -> None:
    loader = DataLoader(Numbers(), batch_size=4)
    plain = [b[0].tolist() for b in loader]
    assert [b[0].tolist() for b in probe.measure(loader, "cpu")] == plain
    assert [b[0].tolist() for b in probe.measure(loader, "cpu", epochs=2)] == plain + plain
    assert [b[0].tolist() for b in probe.measure(loader, "cpu", epochs=2, steps=4)] == (plain + plain)[:4]
    with pytest.raises(ValueError, match=r"epochs and steps must be >= 1 \(got epochs=0, steps=None\)"):
        probe.measure(loader, "cpu", epochs=0)


def test_the_summary_line_is_the_courses_chronometer() -> None:
    def step(next_s: float, copy_s: float, total_s: float, first: bool = False) -> Clocked:
        return Clocked(next_s=next_s, copy_s=copy_s, total_s=total_s, samples=8, new_epoch=first)

    steps = [step(0.5, 0.0, 0.6, first=True), step(0.02, 0.01, 0.1), step(0.04, 0.01, 0.1)]
    assert probe.summary(steps) == (
        "harness.probe: 3 steps, 24 samples in 0.8 s (30.0 samples/s); loading_time 0.0400 s/step "
        "(next() + copy, 40% of a step); first batch of a pass 0.50 s"
    )
    assert probe.summary([]) == "harness.probe: no batch"


def test_alone_a_script_prints_one_line_at_exit_whatever_its_passes(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            import harness.probe as probe
            loader = probe.loader(list(range(12)), batch_size=4)
            for epoch in range(2):
                for batch in probe.measure(loader, "cpu"):
                    torch.zeros(1)
            print("trained")
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout == "trained\n"
    (line,) = done.stderr.splitlines()
    assert line.startswith("harness.probe: 6 steps, 24 samples in ")


# --- under the harness, in this process ----------------------------------------------------


def script_point(loader: str = "{num_workers: 0}", rungs: str = "[device_batch, host_batch, full]") -> Point:
    spec = parse_spec(
        f"name: p\nworkload: {{script: {SCRIPT}}}\nmeasure: {{warmup_steps: 1, steps: 3, repeats: 1}}\n"
        f"rungs: {rungs}\nloader: {loader}\n"
    )
    (point,) = expand(spec).points
    return point


@pytest.fixture
def harnessed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """HARNESS_PROBE set for `point`, as the job sets it for the script's process."""

    def set_job(point: Point, check: bool = False) -> ProbeJob:
        job = ProbeJob(
            sweep_dir=tmp_path / "sweep",
            point=point,
            env=DistEnv(hostname="node-a", local_world_size=1),
            skip_done=True,
            script=SCRIPT,
            report_path=tmp_path / "report",
            check=check,
        )
        monkeypatch.setenv(PROBE_VARIABLE, job.to_json())
        monkeypatch.setattr(probe, "_measured_here", False)
        return job

    return set_job


def rows_of(job: ProbeJob) -> list[dict[str, str]]:
    return results.read_rows(layout.rank_file(layout.point_dir(job.sweep_dir, job.point.id), 0))


def test_under_the_harness_the_scripts_loop_runs_every_rung_with_the_points_loader(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point())
    loader = probe.loader(Numbers(), batch_size=2, num_workers=3, collate_fn=pairs)
    assert (loader.num_workers, loader.batch_size, loader.collate_fn) == (0, 2, pairs)  # the point's workers
    served = list(probe.measure(loader, "cpu", epochs=5))
    # Three rungs of 1 warmup and 3 measured steps (no workers, no stock), whatever epochs says.
    assert len(served) == 3 * 4 and all(b["by"] == "mine" and b["x"].shape == (2, 3) for b in served)
    rows = rows_of(job)
    assert [(r["rung"], r["status"], r["samples"], r["batch_size"]) for r in rows] == [
        ("device_batch", "ok", "6", "2"),
        ("host_batch", "ok", "6", "2"),
        ("full", "ok", "6", "2"),
    ]
    assert job.report_path is not None and job.report_path.read_text().split() == ["reached", "done"]
    assert list(probe.measure(loader, "cpu")) == []  # the point is measured: the next epoch ends at once


def test_settings_the_spec_does_not_name_keep_the_scripts_values(harnessed) -> None:  # type: ignore[no-untyped-def]
    # The spec sweeps num_workers only: the script's drop_last, persistent_workers and
    # prefetch_factor stay as the script has them, and the rows record what ran.
    point = script_point(loader="{num_workers: [1]}", rungs="[full]")
    assert point.script_keeps == (
        "persistent_workers",
        "pin_memory",
        "non_blocking",
        "prefetch_factor",
        "drop_last",
    )
    job = harnessed(point)
    loader = probe.loader(
        Numbers(), batch_size=4, num_workers=3, drop_last=True, persistent_workers=True, prefetch_factor=5
    )
    assert (loader.num_workers, loader.drop_last, loader.persistent_workers, loader.prefetch_factor) == (
        1,
        True,
        True,
        5,
    )
    list(probe.measure(loader, "cpu"))
    (row,) = rows_of(job)
    ran = (
        row["num_workers"],
        row["drop_last"],
        row["persistent_workers"],
        row["prefetch_factor"],
        row["pin_memory"],
    )
    assert ran == ("1", "True", "True", "5", "False")  # pin_memory: the script gave none, PyTorch's default


def test_settings_the_spec_names_replace_the_scripts(harnessed) -> None:  # type: ignore[no-untyped-def]
    point = script_point(loader="{num_workers: 1, drop_last: false, prefetch_factor: 2}", rungs="[full]")
    assert point.script_keeps == ("persistent_workers", "pin_memory", "non_blocking")
    job = harnessed(point)
    loader = probe.loader(Numbers(), batch_size=4, num_workers=3, drop_last=True, prefetch_factor=5)
    assert (loader.num_workers, loader.drop_last, loader.prefetch_factor) == (1, False, 2)
    list(probe.measure(loader, "cpu", non_blocking=True))
    (row,) = rows_of(job)
    assert (row["drop_last"], row["prefetch_factor"], row["non_blocking"]) == ("False", "2", "True")


def test_a_dataloader_the_script_built_itself_keeps_its_settings_too(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(loader="{num_workers: 0}", rungs="[full]"))
    built = DataLoader(Numbers(), batch_size=4, drop_last=True, collate_fn=pairs)
    served = list(probe.measure(built, "cpu"))
    assert {len(b["y"]) for b in served} == {4}
    (row,) = rows_of(job)
    assert (row["num_workers"], row["drop_last"]) == ("0", "True")


def test_a_dataloader_the_script_built_itself_is_measured_too(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[full]"))
    served = list(probe.measure(DataLoader(Numbers(), batch_size=5, shuffle=True, collate_fn=pairs), "cpu"))
    assert len(served) == 4 and {len(b["y"]) for b in served} == {5}
    (row,) = rows_of(job)
    assert (row["status"], row["samples"], row["batch_size"]) == ("ok", "15", "5")


def test_a_loop_that_breaks_tells_the_job_how_far_it_got(harnessed) -> None:  # type: ignore[no-untyped-def]
    job = harnessed(script_point(rungs="[host_batch, full]"))
    loader = probe.loader(Numbers(), batch_size=2)
    for n, _ in enumerate(probe.measure(loader, "cpu")):
        if n == 5:  # in full's warmup: host_batch has its row, full has none
            break
    assert [r["rung"] for r in rows_of(job)] == ["host_batch"]
    assert job.report_path is not None and job.report_path.read_text().split() == ["reached", "left:6"]


def test_the_plans_check_run_builds_the_points_loader_and_goes_on_to_the_loop(harnessed) -> None:  # type: ignore[no-untyped-def]
    """It stops at probe.measure (os._exit: tests/harness/execution/test_script.py runs it),
    so that the loaders the script builds after probe.loader are checked too."""
    job = harnessed(script_point("{num_workers: 0, drop_last: true}"), check=True)
    loader = probe.loader(Numbers(), batch_size=2)
    assert loader.drop_last is True  # the point's settings, as the point's run builds it
    assert job.report_path is not None and job.report_path.read_text().split() == ["reached"]
    assert not job.sweep_dir.exists()  # nothing measured, nothing written
