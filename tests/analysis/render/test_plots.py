from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from analysis.__main__ import main
from analysis.aggregate import summarize
from analysis.load import load_results
from analysis.render import plots
from analysis.samples import load_samples
from tests.analysis.conftest import SAMPLE_COLUMNS, synthetic_row, write_rows, write_timeline

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG)
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the plots draw, kept as they are turned into PNG bytes."""
    figures: list[Figure] = []
    to_png = plots._png

    def keep(fig: Figure) -> bytes:
        figures.append(fig)
        return to_png(fig)

    monkeypatch.setattr(plots, "_png", keep)
    return figures


def lines_of(fig: Figure) -> dict[str, tuple[list[float], list[float]]]:
    """Legend label -> (x, y) of each line of the figure's one plot, in drawing order."""
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    return {
        label: ([float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()])
        for label, line in zip(labels, ax.lines, strict=True)
    }


def grid_summary(tmp_path: Path, points: list[tuple[int, bool, int | str, float]]):
    """A sweep of (num_workers, pin_memory and non_blocking, prefetch_factor, samples/s) points."""
    rows = [
        synthetic_row(
            point_id=f"p{i}",
            point_index=i,
            num_workers=workers,
            pin_memory=pinned,
            non_blocking=pinned,
            prefetch_factor=prefetch,
            samples_per_s=rate,
            training_time=80 / rate,
        )
        for i, (workers, pinned, prefetch, rate) in enumerate(points)
    ]
    write_rows(tmp_path, *rows)
    return summarize(load_results([tmp_path]).rows)


def test_throughput_against_num_workers_one_line_per_copy_setting(
    tmp_path: Path, drawn: list[Figure]
) -> None:
    summary = grid_summary(
        tmp_path,
        [
            (0, False, "", 100.0),
            (0, True, "", 105.0),
            (2, False, 2, 150.0),
            (2, True, 2, 160.0),
            (4, False, 2, 170.0),
            (4, True, 2, 200.0),
        ],
    )
    width, height = png_size(plots.throughput_png(summary, title="t"))
    assert width > 400 and height > 250
    (fig,) = drawn
    assert lines_of(fig) == {
        "pin_memory=False, non_blocking=False": ([0, 2, 4], [100.0, 150.0, 170.0]),
        "pin_memory=True, non_blocking=True": ([0, 2, 4], [105.0, 160.0, 200.0]),
    }
    assert fig.axes[0].get_xlabel() == "num_workers"


def test_a_worker_only_setting_splits_the_lines_and_num_workers_0_starts_each(
    tmp_path: Path, drawn: list[Figure]
) -> None:
    """prefetch_factor does not apply without workers: the one num_workers=0 point (null)
    starts the line of every prefetch_factor."""
    summary = grid_summary(
        tmp_path, [(0, False, "", 100.0), (2, False, 2, 150.0), (2, False, 4, 155.0), (4, False, 4, 180.0)]
    )
    plots.throughput_png(summary, title="t")
    (fig,) = drawn
    assert lines_of(fig) == {
        "pin_memory=False, non_blocking=False, prefetch_factor=2": ([0, 2], [100.0, 150.0]),
        "pin_memory=False, non_blocking=False, prefetch_factor=4": ([0, 2, 4], [100.0, 155.0, 180.0]),
    }


def test_no_throughput_plot_for_a_single_num_workers_or_a_sequence(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(point_id="a"), synthetic_row(point_id="b", pin_memory=True))
    assert plots.throughput_png(summarize(load_results([tmp_path]).rows), title="t") is None
    write_rows(tmp_path, synthetic_row(point_id="c", num_workers=4, sequence_step="more workers"))
    assert plots.throughput_png(summarize(load_results([tmp_path]).rows), title="t") is None


def test_the_ladder_needs_two_rungs_and_orders_them_from_the_bound(
    tmp_path: Path, drawn: list[Figure]
) -> None:
    write_rows(tmp_path, synthetic_row(rung="full", samples_per_s=50.0, training_time=80 / 50))
    assert plots.ladder_png(summarize(load_results([tmp_path]).rows), title="t") is None
    for rung, rate in (("raw_sample", 60.0), ("device_batch", 200.0), ("transform:1", 80.0)):
        write_rows(tmp_path, synthetic_row(rung=rung, samples_per_s=rate, training_time=80 / rate))
    assert png_size(plots.ladder_png(summarize(load_results([tmp_path]).rows), title="t"))[0] > 400
    (fig,) = drawn
    (ax,) = fig.axes
    # From the bound down: transform:1 caches more than raw_sample, so it sits above it.
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "device_batch",
        "transform:1",
        "raw_sample",
        "full",
    ]
    assert [bar.get_height() for bar in ax.patches] == [200.0, 80.0, 60.0, 50.0]


def test_phases_become_spans(tmp_path: Path) -> None:
    write_timeline(tmp_path)
    samples = load_samples(tmp_path, 0)
    assert samples is not None and list(samples.columns) == list(SAMPLE_COLUMNS)
    spans = plots.phase_spans(samples)
    assert [s[0] for s in spans] == ["host_batch/0/warmup", "host_batch/0", "full/0/warmup", "full/0"]
    assert spans[1][1] == pytest.approx(1.0) and spans[1][2] == pytest.approx(3.0)


@pytest.mark.parametrize("gpu", [True, False])
def test_timeline_with_and_without_gpu_samples(tmp_path: Path, gpu: bool) -> None:
    write_timeline(tmp_path, gpu=gpu)
    samples = load_samples(tmp_path, 0)
    assert samples is not None
    _, height = png_size(plots.timeline_png(samples, title="t"))
    assert (height > 400) == gpu  # two panels with a GPU, one without


def test_plots_are_written_next_to_each_sweep_and_named(
    real_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweeps = [tmp_path / "grid" / "one", tmp_path / "grid" / "two"]
    for sweep in sweeps:
        shutil.copytree(real_sweep, sweep)
    rows = load_results([sweeps[0]]).rows
    baseline = rows.loc[rows["point_index"] == 0, "point_id"].iloc[0]
    write_timeline(sweeps[0] / "points" / baseline, rank=0)
    assert main([str(tmp_path / "grid" / "*"), "--plots"]) == 0
    out = capsys.readouterr().out
    for sweep in sweeps:
        for node in ("node-a", "node-b"):
            path = sweep / "plots" / f"throughput-{node}.png"
            assert f"  {path}\n" in out and path.read_bytes().startswith(PNG)
    assert f"  {sweeps[0] / 'plots' / f'timeline-{baseline}-rank0.png'}\n" in out
    assert list((sweeps[1] / "plots").glob("timeline-*")) == []  # no samples there


def test_the_timeline_of_the_baseline_and_the_best_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_rows(
        tmp_path,
        synthetic_row(point_id="base", point_index=0, num_workers=0, prefetch_factor=None, training_time=2.0),
        synthetic_row(point_id="best", point_index=1, num_workers=4, training_time=1.0, rank=0),
    )
    write_timeline(tmp_path / "points" / "base", rank=0)
    write_timeline(tmp_path / "points" / "best", rank=0, gpu=False)
    assert main([str(tmp_path), "--plots"]) == 0
    out = capsys.readouterr().out
    for name in ("timeline-base-rank0.png", "timeline-best-rank0.png", "throughput-n1.png"):
        assert f"  {tmp_path / 'plots' / name}\n" in out


def test_a_timeline_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_rows(
        tmp_path, synthetic_row(point_id="a"), synthetic_row(point_id="b", point_index=1, training_time=3.0)
    )
    write_timeline(tmp_path / "points" / "b", rank=0)
    assert main([str(tmp_path), "--timeline", "b"]) == 0
    assert f"  {tmp_path / 'plots' / 'timeline-b-rank0.png'}\n" in capsys.readouterr().out


def test_timeline_all_draws_every_sampled_point(tmp_path: Path) -> None:
    from harness.config.plan import expand
    from harness.config.spec import parse_spec
    from harness.execution.dist import DistEnv
    from harness.execution.runner import run_point
    from harness.storage.sweep import create_sweep
    from tests.conftest import TINY_WORKLOAD

    plan = expand(parse_spec("name: tl\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1]}\n"))
    sweep = create_sweep(plan, tmp_path)
    for point in plan.points:
        run_point(point, sweep, env=DistEnv(hostname="n1"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(sweep), "--timeline", "all"]) == 0
    drawn = sorted(p.name for p in (sweep / "plots").glob("timeline-*.png"))
    assert drawn == sorted(f"timeline-{p.id}-rank0.png" for p in plan.points)


def test_timeline_phases_are_named_once_in_a_legend_not_on_the_plot(tmp_path: Path) -> None:
    """Names written on each span overlapped into an unreadable band on a ladder's many phases."""
    write_timeline(tmp_path)
    samples = load_samples(tmp_path, 0)
    assert samples is not None
    fig = plots.timeline_figure(samples, title="t")
    assert fig is not None
    assert all(not ax.texts for ax in fig.axes)  # nothing written over the curves
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    assert names[:2] == ["host_batch", "full"] and "warmup" in names[2]


def test_each_rung_of_a_ladder_has_its_own_shade(tmp_path: Path) -> None:
    """The palette moved on at every span (a warmup, a window, and a capacity pass below the
    cached batches), so a ladder's later rungs came round to earlier ones' colours."""
    write_timeline(tmp_path)
    samples = load_samples(tmp_path, 0)
    assert samples is not None
    rungs = [
        "device_batch",
        "host_batch",
        "processed_sample",
        "transform:3",
        "transform:2",
        "raw_sample",
        "full",
    ]
    parts = {r: ("/warmup", "") if r.endswith("_batch") else ("/warmup", "", "/capacity") for r in rungs}
    spans = [f"{r}/0{part}" for r in rungs for part in parts[r]]
    samples = samples.iloc[: len(spans)].assign(phase=spans)
    fig = plots.timeline_figure(samples, title="t")
    assert fig is not None
    (legend,) = fig.legends
    shades = {
        t.get_text(): tuple(h.get_facecolor())
        for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)
    }
    assert len({shades[r] for r in rungs}) == len(rungs)


def tune_summary() -> dict[str, object]:
    """A tune.json's predictions, runs and answer: two prefetch factors, three worker counts."""

    def config(workers: int, prefetch: int | None) -> dict[str, object]:
        return {
            "num_workers": workers,
            "prefetch_factor": prefetch,
            "persistent_workers": True,
            "pin_memory": False,
            "non_blocking": False,
        }

    grid = [(0, None, 100.0), (1, 1, 180.0), (1, 2, 190.0), (2, 1, 250.0), (2, 2, 300.0)]
    return {
        "predictions": [
            {**config(w, p), "samples_per_s": rate, "low": rate * 0.9, "high": rate * 1.1, "bound": "loader"}
            for w, p, rate in grid
        ],
        "measured": [
            {**config(0, None), "runs": [98.0, 101.0, 99.0]},
            {**config(2, 2), "runs": [305.0, 296.0, 310.0]},
            {**config(2, 1), "runs": [262.0, 255.0, 258.0]},
        ],
        "answer": config(2, 2),
    }


def test_tune_lines_are_the_predictions_and_its_circles_every_run_measured(drawn: list[Figure]) -> None:
    assert plots.tune_png(tune_summary(), title="t") is not None
    (ax,) = drawn[0].axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [
        "prefetch_factor=1",
        "prefetch_factor=2",
        "recommendation (median of its runs)",
        "runs measured",
    ]
    predicted = {
        line.get_label(): list(line.get_ydata()) for line in ax.lines if line.get_label() in labels[:2]
    }
    # num_workers=0 (no prefetch) starts both lines.
    assert predicted == {
        "prefetch_factor=1": [100.0, 180.0, 250.0],
        "prefetch_factor=2": [100.0, 190.0, 300.0],
    }
    circles = sorted(float(y) for line in ax.lines if line.get_marker() == "o" for y in line.get_ydata())
    assert circles == sorted([98.0, 101.0, 99.0, 305.0, 296.0, 310.0, 262.0, 255.0, 258.0])
    (star,) = [line for line in ax.lines if line.get_marker() == "*"]
    assert list(star.get_xdata()) == [2] and list(star.get_ydata()) == [305.0]


def test_tune_without_predictions_draws_nothing() -> None:
    assert plots.tune_png({"predictions": [], "measured": []}, title="t") is None


def test_a_comparison_draws_each_side_and_names_its_judgement(tmp_path: Path, drawn: list[Figure]) -> None:
    from analysis.grid.compare import compare
    from tests.analysis.grid.test_compare import config

    a, b = tmp_path / "a", tmp_path / "b"
    for sweep, scale in ((a, 1.0), (b, 1.5)):
        config(sweep, "p0", 0, [100 * scale, 101 * scale, 99 * scale])
        config(sweep, "p2", 2, [200.0, 202.0, 198.0])
    assert plots.comparison_png(compare([a], [b]), title="t") is not None
    (ax,) = drawn[0].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["num_workers=0", "num_workers=2"]
    assert [t.get_text() for t in ax.texts] == ["faster", "same (within ±5%)"]
    heights = [round(bar.get_height()) for bar in ax.patches]
    assert heights == [100, 200, 150, 200]  # A's bars, then B's
