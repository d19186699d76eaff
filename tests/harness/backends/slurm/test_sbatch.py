"""The sbatch scripts without a cluster: the parameters, the rendered script against its saved
reference. The real-cluster tests are in tests/slurm/.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.backends.slurm import sbatch
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
    params = sbatch.sbatch_parameters(spec.slurm, "harness-dlojz")
    assert params["gres"] == "gpu:8"
    assert params["ntasks_per_node"] == 8  # one task per GPU
    assert params["time"] == 20 and params["signal_delay_s"] == 90
    assert params["additional_parameters"] == {"hint": "nomultithread", "mail-type": "END"}


def test_a_short_limit_gets_its_signal_before_the_end() -> None:
    spec = parse_spec("name: t\n" + TINY_WORKLOAD + "slurm: {time: 1}\n")
    assert sbatch.sbatch_parameters(spec.slurm, "t")["signal_delay_s"] == 15


def test_the_sbatch_script_matches_the_saved_reference() -> None:
    spec = parse_spec("name: dlojz\n" + TINY_WORKLOAD + JEAN_ZAY)
    sweep = Path("/scratch/results/dlojz/20261122-101500")
    script = sbatch.render_sbatch(
        spec.slurm,
        "harness-dlojz",
        sbatch.standalone_folder(sweep),
        sbatch.worker_command(sweep, python="python3"),
        12,
    )
    if os.environ.get("HARNESS_REFRESH_REFERENCE"):
        REFERENCE.write_text(script)
    assert script == REFERENCE.read_text(), (
        f"the rendered sbatch script differs from {REFERENCE}. If the change is intended, refresh it with: "
        f"HARNESS_REFRESH_REFERENCE=1 python -m pytest {__file__} -k reference"
    )
