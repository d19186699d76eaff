"""The Slurm backend without a cluster: parameters, the rendered script, sacct parsing.

The real-cluster tests are in tests/slurm/.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.backends import slurm, slurm_states
from harness.config.spec import parse_spec
from tests.conftest import TINY_WORKLOAD

REFERENCE = Path(__file__).parent / "data" / "jean_zay.sbatch"
JEAN_ZAY = (
    "slurm: {nodes: 1, gpus_per_node: 8, cpus_per_task: 8, time: '00:20:00', partition: gpu_p5,"
    " account: abc@a100, qos: qos_gpu-dev, constraint: a100, hint: nomultithread, array_parallelism: 4,"
    " setup: ['module purge', 'module load pytorch-gpu/py3/2.5.0'], extra: {mail-type: END}}\n"
)


def test_parameters_follow_the_course_conventions() -> None:
    spec = parse_spec("name: dlojz\n" + TINY_WORKLOAD + JEAN_ZAY)
    params = slurm.sbatch_parameters(spec.slurm, "harness-dlojz")
    assert params["gres"] == "gpu:8"
    assert params["ntasks_per_node"] == 8  # one task per GPU
    assert params["time"] == 20 and params["signal_delay_s"] == 90
    assert params["additional_parameters"] == {"hint": "nomultithread", "mail-type": "END"}


def test_a_short_limit_gets_its_signal_before_the_end() -> None:
    spec = parse_spec("name: t\n" + TINY_WORKLOAD + "slurm: {time: 1}\n")
    assert slurm.sbatch_parameters(spec.slurm, "t")["signal_delay_s"] == 15


def test_the_sbatch_script_matches_the_saved_reference() -> None:
    spec = parse_spec("name: dlojz\n" + TINY_WORKLOAD + JEAN_ZAY)
    sweep = Path("/scratch/results/dlojz/20261122-101500")
    script = slurm.render_sbatch(
        spec.slurm,
        "harness-dlojz",
        slurm.standalone_folder(sweep),
        slurm.worker_command(sweep, python="python3"),
        12,
    )
    if os.environ.get("HARNESS_REFRESH_REFERENCE"):
        REFERENCE.write_text(script)
    assert script == REFERENCE.read_text(), (
        f"the rendered sbatch script differs from {REFERENCE}. If the change is intended, refresh it with: "
        f"HARNESS_REFRESH_REFERENCE=1 python -m pytest {__file__} -k reference"
    )


def test_sacct_lines_give_each_array_task_its_state() -> None:
    text = (
        "123_[4-7%2]|PENDING|0:0|None assigned\n"  # pending tasks come as a range
        "123_[9,11-12]|PENDING|0:0|None assigned\n"
        "123_1|CANCELLED by 0|0:0|n1\n"
        "124|TIMEOUT|0:15|n2\n"
        "a line that is not sacct's\n"
    )
    states = slurm.parse_sacct(text)
    assert sorted(states) == ["123_1", "123_11", "123_12", "123_4", "123_5", "123_6", "123_7", "123_9", "124"]
    assert {states[f"123_{k}"].state for k in (4, 5, 6, 7, 9, 11, 12)} == {"PENDING"}
    assert states["123_1"] == slurm_states.JobState("CANCELLED", "0:0", "n1")
    assert states["124"] == slurm_states.JobState("TIMEOUT", "0:15", "n2")


# squeue(1) and sacct(1), "JOB STATE CODES" (Slurm 22.05 to 24.11): every state a job can be in.
DOCUMENTED_STATES = {
    "BOOT_FAIL": "ended-bad",
    "CANCELLED": "ended-bad",
    "COMPLETED": "finished",
    "CONFIGURING": "running",
    "COMPLETING": "running",
    "DEADLINE": "ended-bad",
    "FAILED": "ended-bad",
    "NODE_FAIL": "ended-bad",
    "OUT_OF_MEMORY": "ended-bad",
    "PENDING": "queued",
    "PREEMPTED": "ended-bad",
    "RUNNING": "running",
    "RESV_DEL_HOLD": "held",
    "REQUEUE_FED": "queued",
    "REQUEUE_HOLD": "held",
    "REQUEUED": "queued",
    "RESIZING": "running",
    "REVOKED": "ended-bad",
    "SIGNALING": "running",
    "SPECIAL_EXIT": "held",
    "STAGE_OUT": "running",
    "STOPPED": "suspended",
    "SUSPENDED": "suspended",
    "TIMEOUT": "ended-bad",
}


def test_every_documented_state_has_its_class_and_live_ones_are_never_rerun() -> None:
    assert {state: str(slurm_states.classify(state)) for state in DOCUMENTED_STATES} == DOCUMENTED_STATES
    live = {state for state in DOCUMENTED_STATES if slurm_states.classify(state) in slurm_states.LIVE}
    assert live == {
        s for s, kind in DOCUMENTED_STATES.items() if kind in ("queued", "held", "running", "suspended")
    }
    assert slurm_states.classify("CANCELLED by 0") is slurm_states.StateClass.ENDED_BAD
    assert slurm_states.classify("PENDING", "JobHeldUser") is slurm_states.StateClass.HELD  # scontrol hold
    assert slurm_states.classify("PENDING", "JobHeldAdmin") is slurm_states.StateClass.HELD
    assert slurm_states.classify("PENDING", "Resources") is slurm_states.StateClass.QUEUED
    assert slurm_states.classify("SOMETHING_NEW") in slurm_states.LIVE  # unknown: left alone, never run twice


def test_squeue_lines_carry_the_reason_a_job_waits() -> None:
    states = slurm.parse_squeue("12_0|PENDING||JobHeldUser\n12_1|SUSPENDED|n1|None\nnoise\n")
    assert states["12_0"] == slurm_states.JobState("PENDING", "", "", "JobHeldUser")
    assert states["12_0"].kind is slurm_states.StateClass.HELD
    assert states["12_1"].kind is slurm_states.StateClass.SUSPENDED
    assert sorted(states) == ["12_0", "12_1"]


def test_a_job_list_gives_array_tasks_as_ranges_scontrol_takes() -> None:
    assert slurm_states.job_list(["29_0", "29_1", "29_2", "29_4", "31_7", "30"]) == "29_[0-2,4],31_7,30"
    assert slurm_states.job_list([f"29_{k}" for k in range(1000)]) == "29_[0-999]"
