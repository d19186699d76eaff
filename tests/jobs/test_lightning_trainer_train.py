"""jobs/lightning_trainer_train.py (a LightningModule and `Trainer.fit`, with the probe's lines)
under the harness: Lightning's loop trains on the measured batches, every row is ok with the
point's settings, each of two DDP ranks reads its half, and `harness plan`'s check reaches the
loader without Lightning's sanity validation. A small window: these run in every CI pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import parse_spec
from harness.workloads.make_data import make_image_folder
from harness_schema import layout

pytest.importorskip("lightning", reason="the libs extra (pip install -e .[libs]) has Lightning")

SCRIPT = Path(__file__).resolve().parents[2] / "jobs" / "lightning_trainer_train.py"


def spec_text(data: Path, out: Path, *args: str, loader: str = "{num_workers: 0}") -> str:
    flags = [str(data), "--image-size", "16", "--step-ms", "20", "--default-root-dir", str(out), *args]
    return (
        f"name: lightning-trainer\nworkload: {{script: {SCRIPT}, args: {flags}, batch_size: 4}}\n"
        "measure: {warmup_steps: 1, steps: 2, repeats: 1}\n"
        f"rungs: [host_batch, full]\nloader: {loader}\nslurm: {{tasks_per_node: 2, gpus_per_node: 0}}\n"
    )


def test_one_rank_trains_on_the_measured_batches_every_row_ok(tmp_path: Path) -> None:
    """Trainer.fit on one rank: every row ok with the point's settings, each row's samples its
    steps times the batch size, the epoch the 40 images' 10 batches, and no word that len()
    differs from what Lightning's loop receives."""
    from analysis.load import load_results
    from harness.execution.dist import DistEnv
    from harness.execution.runner import run_point

    make_image_folder(tmp_path / "images", images=40, size=32)
    (point,) = expand(parse_spec(spec_text(tmp_path / "images", tmp_path / "out"))).points
    outcome = run_point(point, tmp_path / "sweep", env=DistEnv(hostname="node-a"))
    assert (outcome.ok, outcome.failed) == (2, 0), [r.error for r in outcome.rows]
    rows = load_results([tmp_path / "sweep"]).rows
    for row in rows.itertuples():
        assert (row.status, row.batch_size, row.num_workers, row.samples) == ("ok", 4, 0, row.steps * 4)
    assert set(rows[rows["rung"] == "full"]["epoch_steps"]) == {10}
    _, err = layout.script_logs(layout.point_dir(tmp_path / "sweep", point.id), 0)
    assert "len(loader) says" not in err.read_text() and "measured as given" not in err.read_text()


def test_two_ddp_ranks_each_read_their_half(tmp_path: Path) -> None:
    """Trainer(devices=2, strategy="ddp") as two local ranks (gloo): every row ok, each rank's
    epoch its half of the 40 images (10 batches of 4, split in two)."""
    from analysis.load import load_results
    from harness.backends.local import run_local
    from harness.storage.sweep import create_sweep

    make_image_folder(tmp_path / "images", images=40, size=32)
    text = spec_text(tmp_path / "images", tmp_path / "out", "--devices", "2", loader="{num_workers: 1}")
    plan = expand(parse_spec(text))
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"} and len(rows) == 2 * 2
    assert sorted(rows["rank"]) == [0, 0, 1, 1]
    for row in rows.itertuples():
        assert (row.batch_size, row.num_workers, row.samples) == (4, 1, row.steps * 4)
    assert set(rows[rows["rung"] == "full"]["epoch_steps"]) == {5}


def test_plans_check_reaches_the_loader_without_lightnings_sanity_validation(tmp_path: Path) -> None:
    """`harness plan`'s check run: the script stops at probe.measure in train_dataloader(),
    which Lightning asks for after its sanity validation; that validation is skipped, and
    the run says so."""
    from harness.adapters.lightning import SANITY_SKIPPED
    from harness.execution.script_check import check_notes, check_script

    make_image_folder(tmp_path / "images", images=20, size=16)
    (point,) = expand(parse_spec(spec_text(tmp_path / "images", tmp_path / "out"))).points
    ended = check_script(point)
    assert ended.checked and ended.returncode == 0, ended.reason()
    assert SANITY_SKIPPED in ended.stderr_tail
    # What harness plan then says (cli._check_scripts logs each note once).
    assert check_notes(ended) == [SANITY_SKIPPED.removeprefix("harness.probe: ")]
    assert "Sanity Checking" not in ended.stderr_tail
