from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from analysis import plots
from analysis.__main__ import main
from analysis.aggregate import summarize
from analysis.load import load_results, load_samples
from tests.analysis.conftest import SAMPLE_COLUMNS, synthetic_row, write_rows, write_timeline

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG)
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_throughput_against_num_workers(real_sweep: Path) -> None:
    summary = summarize(load_results([real_sweep]).rows)
    rows = summary[summary["group"] == "node-a"]
    width, height = png_size(plots.throughput_png(rows, title="t"))
    assert width > 400 and height > 250


def test_no_throughput_plot_for_a_single_num_workers_or_a_sequence(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(point_id="a"), synthetic_row(point_id="b", pin_memory=True))
    assert plots.throughput_png(summarize(load_results([tmp_path]).rows), title="t") is None
    write_rows(tmp_path, synthetic_row(point_id="c", num_workers=4, sequence_step="more workers"))
    assert plots.throughput_png(summarize(load_results([tmp_path]).rows), title="t") is None


def test_the_ladder_needs_two_rungs_and_orders_them_from_the_bound(tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(rung="full"))
    assert plots.ladder_png(summarize(load_results([tmp_path]).rows), title="t") is None
    for rung, t in (("device_batch", 0.5), ("transform:1", 0.7), ("raw_sample", 0.8)):
        write_rows(tmp_path, synthetic_row(rung=rung, training_time=t))
    assert png_size(plots.ladder_png(summarize(load_results([tmp_path]).rows), title="t"))[0] > 400


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
