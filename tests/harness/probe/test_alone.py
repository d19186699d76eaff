"""harness/probe/alone.py: alone, the script's own DataLoader and its batches on the device,
one line at exit (the course's chronometer)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

import harness.probe as probe
from harness.execution.step_times import Clocked
from tests.harness.probe.common import (
    Numbers,
    pairs,
)

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


# --- a loop wrapped in a progress logger that asks len() ---------------------------------------


def test_alone_measure_says_its_length_to_a_logger_that_asks(tmp_path: Path) -> None:
    from tests.fixtures.metric_logger import MetricLogger, train_one_epoch

    loader = DataLoader(Numbers(), batch_size=4)  # 3 batches a pass
    assert len(probe.measure(loader, "cpu")) == 3
    assert len(probe.measure(loader, "cpu", epochs=2)) == 6
    assert len(probe.measure(loader, "cpu", epochs=2, steps=4)) == 4
    logger = MetricLogger()
    assert train_one_epoch(probe.measure(loader, "cpu", epochs=2), logger, print_freq=10) == 6
    assert logger.lines[-1].startswith("Epoch: [0] [5/6]")  # its last batch is where it says
    stream = (torch.zeros(2) for _ in range(3))
    with pytest.raises(TypeError, match=r"len\(\) of probe.measure\(...\): its loader has no len\(\)"):
        len(probe.measure(stream, "cpu"))
