"""scripts/make_figures.py: each figure of the manual drawn from a small fixture result folder
(the sweeps it runs for the real figures are not re-run here)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from tests.analysis.conftest import synthetic_row, write_rows, write_timeline
from tests.analysis.grid.test_compare import config
from tests.analysis.render.test_plots import PNG, tune_summary
from tests.analysis.render.test_steps import steps_table

REPO = Path(__file__).resolve().parents[1]
MOST_BYTES = 150_000
"""The manual's budget for one figure (the PNGs are committed)."""


@pytest.fixture(scope="module")
def figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_figures", REPO / "scripts" / "make_figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grid(sweep: Path, scale: float = 1.0) -> Path:
    """A sweep of num_workers 0, 1, 2, three repeats each, its last point with a timeline."""
    for workers in (0, 1, 2):
        config(
            sweep / "g" / "s1", f"p{workers}", workers, [scale * (100 + 50 * workers + r) for r in (0, 2, 1)]
        )
    write_timeline(sweep / "g" / "s1" / "points" / "p2", gpu=False)
    return sweep / "g" / "s1"


def written(path: Path) -> Path:
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) < MOST_BYTES
    return path


def test_every_figure_is_a_png_within_the_manuals_budget(figures: ModuleType, tmp_path: Path) -> None:
    sweep = grid(tmp_path / "a")
    written(figures.throughput_figure(sweep, tmp_path / "out" / "throughput.png"))
    written(figures.utilisation_figure(sweep, tmp_path / "out" / "utilisation.png"))
    faster = grid(tmp_path / "b", scale=1.5)
    written(figures.comparison_figure(sweep, faster, tmp_path / "out" / "compare.png", "B faster"))

    ladder = tmp_path / "ladder" / "caching-ladder" / "s1"
    write_rows(
        ladder,
        *(
            synthetic_row(point_id="p", rung=rung, repeat=repeat, training_time=time)
            for rung, time in (("device_batch", 0.5), ("processed_sample", 0.6), ("full", 1.0))
            for repeat in (0, 1)
        ),
    )
    written(figures.ladder_figure(ladder, tmp_path / "out" / "ladder.png"))

    tuned = tmp_path / "tune" / "s1"
    tuned.mkdir(parents=True)
    (tuned / "tune.json").write_text(json.dumps({**tune_summary(), "spec": "tune"}))
    written(figures.tune_figure(tuned, tmp_path / "out" / "tune.png"))

    table = pd.concat([steps_table("num_workers=1", [0.05] * 6, [0] * 6)])
    written(figures.steps_figure(table, tmp_path / "out" / "steps.png"))


def test_a_folder_without_what_a_figure_needs_is_named(figures: ModuleType, tmp_path: Path) -> None:
    sweep = grid(tmp_path)
    (sweep / "points" / "p2" / "samples-rank0.csv").unlink()
    with pytest.raises(SystemExit, match=r"points/p2: no samples-rank0.csv"):
        figures.utilisation_figure(sweep, tmp_path / "utilisation.png")
    assert not (tmp_path / "utilisation.png").exists()
