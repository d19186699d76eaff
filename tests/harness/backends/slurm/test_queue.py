"""sacct's and squeue's lines read without a cluster; the real-cluster tests are in tests/slurm/."""

from __future__ import annotations

from harness.backends.slurm import queue
from harness.backends.slurm.states import JobState, StateClass


def test_sacct_lines_give_each_array_task_its_state() -> None:
    text = (
        "123_[4-7%2]|PENDING|0:0|None assigned\n"  # pending tasks come as a range
        "123_[9,11-12]|PENDING|0:0|None assigned\n"
        "123_1|CANCELLED by 0|0:0|n1\n"
        "124|TIMEOUT|0:15|n2\n"
        "a line that is not sacct's\n"
    )
    states = queue.parse_sacct(text)
    assert sorted(states) == ["123_1", "123_11", "123_12", "123_4", "123_5", "123_6", "123_7", "123_9", "124"]
    assert {states[f"123_{k}"].state for k in (4, 5, 6, 7, 9, 11, 12)} == {"PENDING"}
    assert states["123_1"] == JobState("CANCELLED", "0:0", "n1")
    assert states["124"] == JobState("TIMEOUT", "0:15", "n2")


def test_squeue_lines_carry_the_reason_a_job_waits() -> None:
    states = queue.parse_squeue("12_0|PENDING||JobHeldUser\n12_1|SUSPENDED|n1|None\nnoise\n")
    assert states["12_0"] == JobState("PENDING", "", "", "JobHeldUser")
    assert states["12_0"].kind is StateClass.HELD
    assert states["12_1"].kind is StateClass.SUSPENDED
    assert sorted(states) == ["12_0", "12_1"]
