"""What a Slurm job's state means for its point, and job lists as scontrol takes them."""

from __future__ import annotations

from harness.backends.slurm import states as slurm_states

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


def test_a_job_list_gives_array_tasks_as_ranges_scontrol_takes() -> None:
    assert slurm_states.job_list(["29_0", "29_1", "29_2", "29_4", "31_7", "30"]) == "29_[0-2,4],31_7,30"
    assert slurm_states.job_list([f"29_{k}" for k in range(1000)]) == "29_[0-999]"
