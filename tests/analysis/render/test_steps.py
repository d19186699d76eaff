from __future__ import annotations

import pandas as pd

from analysis.render import steps
from tests.analysis.render.test_plots import png_size


def steps_table(run: str, waits: list[float], ready: list[int | None], stock: int = 2) -> pd.DataFrame:
    """Steps of 0.1 s each: the first two the warmup, then the measured ones."""
    rows = []
    for i, (wait, queued) in enumerate(zip(waits, ready, strict=True)):
        start = 0.1 * i
        phase = "warmup" if i < 2 else "measure"
        rows.append([run, i, phase, start, wait, 0.001, start + 0.1, queued, stock])
    return pd.DataFrame(rows, columns=list(steps.STEP_COLUMNS))


def test_each_run_is_titled_with_the_share_of_its_window_spent_in_next() -> None:
    table = pd.concat(
        [
            steps_table("num_workers=1", [0.08, 0.08, 0.05, 0.05, 0.05, 0.05], [2, 1, 0, 0, 0, 0]),
            steps_table("num_workers=2", [0.0, 0.0, 0.0, 0.002, 0.0, 0.002], [4, 3, 3, 3, None, 3], stock=4),
        ]
    )
    fig = steps.steps_figure(table, title="t")
    assert fig is not None
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    # The warmup's long waits are not in the window's share.
    assert titles == ["num_workers=1: next() 50% of the window", "num_workers=2: next() 1% of the window"]
    width, height = png_size(steps.steps_png(table, title="t") or b"")
    assert width > height  # the two runs side by side


def test_no_steps_no_figure() -> None:
    assert steps.steps_png(pd.DataFrame(columns=list(steps.STEP_COLUMNS)), title="t") is None
