"""The probe's contract with a script's arithmetic on len(loader), proven on real scripts at
every window (issue 35): `len()` of `probe.loader`'s loader is the script's own epoch or the
batches the probe yields to its loop, whichever is more (harness.probe.loop_length).

Each script runs unchanged but for the probe's lines, under a short lab's window (2 warmup
steps and 6 measured: the course's `num_workers=0` point once died of `(i + 1) % (N_batch //
10)` with N_batch 9), under the default window (5 + 50), and under its full ladder with 3
repeats. Between them they size by len(loader): a print every `len // 10` batches and
`OneCycleLR(steps_per_epoch=len)` (the course's dlojz2_1.py), a ProgressMeter and per-epoch
validation (pytorch/examples' imagenet/main.py), "the last batch" and schedulers of
`len * epochs` steps (timm, Accelerate, Fabric, the HF Trainer, the shipped scripts).
A contract broken anywhere is a failed row: its error is the script's traceback's last line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from analysis.load import load_results
from harness.backends.inline import run_inline
from harness.backends.local import run_local
from harness.config.plan import Plan, expand
from harness.config.spec import parse_spec
from harness.storage.sweep import create_sweep
from harness.workloads.make_data import make_image_folder
from harness_schema import layout
from tests.jobs.scripts import make_script_data, shrunk

REPO = Path(__file__).resolve().parents[2]
THIRD_PARTY = REPO / "tests" / "fixtures" / "third_party"
SHIPPED = sorted((REPO / "jobs").glob("*_script-cpu.yaml"))
LADDER = "[device_batch, host_batch, processed_sample, raw_sample, full]"

# window name -> (measure, rungs or None for the spec's own, num_workers of its points)
WINDOWS = {
    "2+6": ("{warmup_steps: 2, steps: 6}", "[full]", "[0, 1]"),
    "default": ("{}", "[full]", "0"),
    "ladder-x3": ("{warmup_steps: 2, steps: 6, repeats: 3}", None, "1"),
}

# The course's exercise as a student runs it: its own flags carry the point's settings (its
# DATALOADER line prints them), its batch size and image size small for a CPU.
DLOJZ = f"""\
name: dlojz2-1
workload:
  script: {THIRD_PARTY / "dlojz" / "dlojz2_1.py"}
  args: [--image-size, "32"]
  batch_size: 8
  flags: {{num_workers: --num-workers, persistent_workers: --persistent-workers,
          pin_memory: --pin-memory, non_blocking: --non-blocking,
          prefetch_factor: --prefetch-factor, drop_last: --drop-last, batch_size: --batch-size}}
measure: {{warmup_steps: 1, steps: 2}}
rungs: {LADDER}
loader: {{num_workers: 1, persistent_workers: false, pin_memory: false, non_blocking: false}}
slurm: {{nodes: 1, gpus_per_node: 0, tasks_per_node: 2, cpus_per_task: 1}}
"""

# pytorch/examples' ImageNet script on an image folder, with a torchvision model small enough
# for a CPU (-a is its own flag, any torchvision model) on 2 images a batch (its crop is 224
# pixels), env:// and gloo for its DDP.
IMAGENET = f"""\
name: imagenet-main
workload:
  script: {THIRD_PARTY / "imagenet" / "main.py"}
  args: [DATA, -a, mobilenet_v3_small, --dist-url, "env://", --dist-backend, gloo, --epochs, "2"]
  batch_size: 2
  flags: {{num_workers: --workers, batch_size: --batch-size}}
measure: {{warmup_steps: 1, steps: 2}}
rungs: {LADDER}
loader: {{num_workers: 1}}
slurm: {{nodes: 1, gpus_per_node: 0, tasks_per_node: 2, cpus_per_task: 1}}
"""


def fake_imagenet(root: Path, images: int) -> Path:
    """What torchvision.datasets.ImageNet reads once its archives are unpacked: class folders
    under train/ and val/, and meta.bin (each wnid's class names, the val images' wnids)."""
    classes = 4
    make_image_folder(root / "train", images=images, classes=classes, size=40)
    make_image_folder(root / "val", images=8, classes=classes, size=40)
    wnids = {f"class{c:03d}": (f"class {c}",) for c in range(classes)}
    torch.save((wnids, [f"class{c % classes:03d}" for c in range(8)]), root / "meta.bin")
    return root


def third_party_spec(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The spec text of a third-party script, its data written under tmp_path: 200 training
    images, 25 batches of 8 (an epoch of at least 10, as the course's print frequency needs
    alone, on each of 2 ranks too)."""
    if name == "dlojz2_1":
        pytest.importorskip(
            "torchmetrics", reason="the course's script meters with torchmetrics (libs extra)"
        )
        fake_imagenet(tmp_path / "scratch" / "imagenet", images=200)
        monkeypatch.setenv("ALL_CCFRSCRATCH", str(tmp_path / "scratch"))  # Jean Zay's, read by the script
        return DLOJZ
    make_image_folder(tmp_path / "imagenet" / "train", images=200, classes=4, size=40)
    make_image_folder(tmp_path / "imagenet" / "val", images=8, classes=4, size=40)
    monkeypatch.chdir(tmp_path)  # its checkpoint.pth.tar goes to the working directory
    return IMAGENET.replace("[DATA,", f"[{tmp_path / 'imagenet'},")


def windowed(text: str, window: str, workers: str | None = None) -> str:
    measure, rungs, window_workers = WINDOWS[window]
    workers = workers or window_workers
    text = re.sub(r"measure: \{[^}]*\}", lambda _: f"measure: {measure}", text)
    if rungs is not None:
        text = re.sub(r"rungs: \[[^]]*\]", lambda _: f"rungs: {rungs}", text)
    return re.sub(r"num_workers: (\[[^]]*\]|\d+)", lambda _: f"num_workers: {workers}", text, count=1)


def failures(plan: Plan, sweep: Path) -> list[str]:
    """Each row that did not measure, with its error, and where a point wrote no row, the
    last lines of its script's stderr."""
    rows = load_results([sweep]).rows
    bad = [f"{r.point_id} {r.rung}: {r.error}" for r in rows.itertuples() if r.status != "ok"]
    for point in plan.points:
        if point.id not in set(rows["point_id"]):
            _, err = layout.script_logs(layout.point_dir(sweep, point.id), 0)
            bad.append(f"{point.id}: no row; " + (err.read_text()[-1500:] if err.is_file() else "no log"))
    return bad


def run_window(text: str, source: str, window: str, tmp_path: Path, workers: str | None = None) -> None:
    plan = expand(parse_spec(windowed(text, window, workers), file=source))
    sweep = create_sweep(plan, tmp_path / "results")
    run_inline(plan.points, sweep)
    assert failures(plan, sweep) == []
    expected_rows = sum(len(p.rungs) * p.measure.repeats for p in plan.points)
    assert len(load_results([sweep]).rows) == expected_rows


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("script", ["dlojz2_1", "imagenet_main"])
def test_a_third_party_script_runs_unchanged_at_every_window(
    script: str, window: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_window(third_party_spec(script, tmp_path, monkeypatch), script, window, tmp_path)


@pytest.mark.parametrize("window", ["2+6", "default"])
@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_shipped_script_runs_at_every_window(path: Path, window: str, tmp_path: Path) -> None:
    """The shipped scripts at the short lab's window and the default one, without workers (the
    fewest batches a loop receives); their full ladder at 3 repeats is their own spec's, run
    by their tests of injected costs (tests/jobs/test_*_train.py) and by test_jobs.py."""
    make_script_data(path, tmp_path)
    text = shrunk(path, tmp_path, measure="{}")
    run_window(text, str(path), window, tmp_path, workers="0")


# The shipped scripts whose full ladder at 3 repeats no other test runs: accelerate's, fabric's,
# hf_trainer's, timm's and openclip_wds's run theirs in their tests of injected costs
# (tests/jobs/test_*_train.py), course_script's and imagenet_script's scripts are the third-party
# ones above.
LADDER_X3_HERE = [p for p in SHIPPED if p.stem in ("lightning_trainer_script-cpu",)]


@pytest.mark.slow
@pytest.mark.parametrize("path", LADDER_X3_HERE, ids=[p.stem for p in LADDER_X3_HERE])
def test_a_shipped_script_runs_its_full_ladder_at_3_repeats(path: Path, tmp_path: Path) -> None:
    """len(loader) holds on every rung and repeat: the step's time is no part of it (5 ms)."""
    make_script_data(path, tmp_path)
    text = re.sub(r'--step-ms, "\d+"', '--step-ms, "5"', shrunk(path, tmp_path, measure="{}"))
    run_window(text, str(path), "ladder-x3", tmp_path)


@pytest.mark.parametrize("script", ["dlojz2_1", "imagenet_main"])
def test_a_third_party_script_runs_unchanged_on_two_ranks(
    script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short lab's window on 2 local DDP ranks, without workers: each rank's epoch is half
    the data set, and len(loader) each rank's."""
    text = third_party_spec(script, tmp_path, monkeypatch)
    plan = expand(parse_spec(windowed(text, "2+6", workers="0"), file=script))
    sweep = create_sweep(plan, tmp_path / "results", backend="local", world_size=2)
    assert run_local(plan.points, sweep, plan.spec.slurm) == []
    rows = load_results([sweep]).rows
    assert set(rows["status"]) == {"ok"}, list(rows["error"])
    assert sorted(set(rows["rank"])) == [0, 1] and len(rows) == 2 * len(plan.points)
