"""What the tests of the shipped training scripts (jobs/*_train.py) share: a script's point
measured in this process, on a fresh folder of 40 images."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def measured_rows(
    tmp_path: Path, spec_text: Callable[[Path], str], make: Callable[[Path], object] | None = None
) -> Any:
    """The rows (analysis.load's frame) of the one point `spec_text(images folder)` plans,
    run inline; every unit must have measured. `make(folder)` writes another data set there
    (webdataset shards) instead of the 40 images."""
    from analysis.load import load_results
    from harness.config.plan import expand
    from harness.config.spec import parse_spec
    from harness.execution.dist import DistEnv
    from harness.execution.runner import run_point
    from harness.workloads.make_data import make_image_folder

    if make is None:
        make_image_folder(tmp_path / "images", images=40, size=32)
    else:
        make(tmp_path / "images")
    (point,) = expand(parse_spec(spec_text(tmp_path / "images"))).points
    outcome = run_point(point, tmp_path / "sweep", env=DistEnv(hostname="node-a"))
    assert outcome.failed == 0 and outcome.skipped == 0, [r.error for r in outcome.rows]
    return load_results([tmp_path / "sweep"]).rows
