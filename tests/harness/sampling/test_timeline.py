"""The per-rank sampler: its thread, phases, summaries and the timeline file (host figures, on
the CPU; the GPU side is in test_nvml.py)."""

from __future__ import annotations

import csv
import logging
import threading
import time
from pathlib import Path

import pytest
import torch

from harness.sampling.timeline import SUMMARY_KEYS, RankSampler
from harness.sampling.timeline_file import SAMPLE_COLUMNS, TimelineFile, timeline_name


def test_timeline_csv_has_the_columns_and_labels_phases(tmp_path: Path) -> None:
    sampler = RankSampler(hz=0.001, gpu=False, rank=3)  # only the samples taken here
    with sampler:
        with sampler.phase("full/0"):
            with sampler.phase("full/0/warmup"):
                sampler.sample()
            sampler.sample()
        sampler.sample()
    path = tmp_path / timeline_name(3)
    sampler.write_timeline(path)

    assert path.name == "samples-rank3.csv"
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == SAMPLE_COLUMNS
    assert [r["phase"] for r in rows] == [
        "",  # start
        "full/0",  # full/0 begins
        "full/0/warmup",  # warmup begins
        "full/0/warmup",
        "full/0/warmup",  # warmup ends
        "full/0",
        "full/0",  # full/0 ends
        "",
    ]
    assert {r["rank"] for r in rows} == {"3"}
    times = [float(r["t"]) for r in rows]
    assert times == sorted(times) and times[0] < 0.5
    assert all(r["gpu_util"] == "" for r in rows)  # no GPU asked for
    assert rows[0]["host_memory_gb"] != ""  # memory is due at the first sample
    assert float(rows[6]["host_memory_gb"]) > 0  # and read at every phase end


def burn(seconds: float) -> None:
    """Spin until this thread has used `seconds` of CPU (not wall) time."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def test_the_thread_samples_at_hz_never_faster() -> None:
    """No bound a busy machine can break: the thread's n-th tick comes n periods after the
    start at the earliest, however late the scheduler lets it run (it skips missed ticks
    rather than catching up in a burst)."""
    sampler = RankSampler(hz=50.0, gpu=False)
    threads = threading.active_count()
    started = time.perf_counter()
    sampler.start()
    assert threading.active_count() == threads + 1
    deadline = started + 60.0
    while len(sampler.rows()) < 1 + 10 and time.perf_counter() < deadline:  # the start sample + 10
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    sampler.stop()
    assert threading.active_count() == threads
    assert len(sampler.rows()) >= 11, "the thread took fewer than 10 samples in 60 s"
    times = [r["t"] for r in sampler.rows()]
    assert elapsed >= 10 / 50.0 and times[10] - times[0] >= 0.99 * 10 / 50.0


def test_stop_does_not_wait_for_the_next_tick(caplog: pytest.LogCaptureFixture) -> None:
    """A 10 s period: a thread that slept until its next tick would outlive stop(), which
    waits 2 s for it and then says so; the thread waits on an event instead."""
    threads = threading.active_count()
    sampler = RankSampler(hz=0.1, gpu=False).start()
    with caplog.at_level(logging.WARNING):
        sampler.stop()
    assert threading.active_count() == threads  # the thread has ended
    assert caplog.messages == []
    assert len(sampler.rows()) == 1  # the start sample only


def test_the_thread_reports_its_own_cpu_time_not_the_process() -> None:
    sampler = RankSampler(hz=50.0, gpu=False).start()
    burn(0.3)  # this thread: the process's CPU time grows by 0.3 s at least
    deadline = time.perf_counter() + 60.0
    while len(sampler.rows()) < 3 and time.perf_counter() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert 0 < sampler.thread_cpu_s < 0.3


def test_rates_are_percent_of_one_core() -> None:
    """Integrated over time, a rate gives back the CPU seconds used: 0.3 s burnt by this
    thread between two samples (plus whatever else the process did meanwhile, which the
    process's own CPU time bounds). Whatever the load: CPU seconds, not wall seconds."""
    sampler = RankSampler(hz=0.001, gpu=False)  # only the samples taken here
    cpu = time.process_time()
    with sampler:
        burn(0.3)
        sampler.sample()
        time.sleep(0.2)
        sampler.sample()
    cpu = time.process_time() - cpu
    rows = sampler.rows()
    assert len(rows) == 3

    def used(i: int, column: str) -> float:
        return rows[i][column] / 100 * (rows[i]["t"] - rows[i - 1]["t"])

    tick = 0.02  # CPU times are read in clock ticks of 10 ms, at both ends
    assert 0.3 - tick <= used(1, "main_cpu_percent") <= cpu + tick
    assert used(2, "main_cpu_percent") < 0.05  # asleep
    assert max(r["loader_cpu_percent"] for r in rows[1:]) < 20  # no workers here
    assert all(r["system_cpu_percent"] is not None for r in rows[1:])


def test_short_phase_still_has_host_figures() -> None:
    sampler = RankSampler(hz=0.001, gpu=False)  # the timer never fires within the phase
    with sampler, sampler.phase("tiny") as ph:
        sum(range(10_000))
    summary = ph.summary(samples=4)
    assert list(summary) == list(SUMMARY_KEYS)
    assert summary["main_cores"] is not None and summary["loader_cores"] is not None
    assert summary["peak_host_memory_gb"] > 0
    assert isinstance(summary["cpus_allotted"], int) and summary["cpus_allotted"] >= 1
    assert summary["gpu_util"] is None and summary["energy_per_sample_j"] is None


def test_begin_and_end_calls_as_well_as_with() -> None:
    sampler = RankSampler(hz=0.001, gpu=False).start()
    ph = sampler.begin("full/1")
    assert ph.seconds is None  # still open
    sampler.sample()
    ph.end()
    ph.end()  # ending twice is harmless
    sampler.stop()
    assert ph.seconds is not None and ph.seconds >= 0
    assert [r["phase"] for r in sampler.rows()] == ["", "full/1", "full/1", "full/1"]


def test_phase_end_can_skip_the_memory_read() -> None:
    sampler = RankSampler(hz=0.001, gpu=False).start()  # the start sample reads memory
    with sampler.phase("full/0/warmup") as warmup:
        pass
    warmup.end()  # already ended: no second sample
    quick = sampler.begin("full/0/quick")
    quick.end(memory=False)  # e.g. a warmup whose measured steps start right after
    sampler.stop()
    rows = sampler.rows()
    assert len(rows) == 5
    assert rows[2]["host_memory_gb"] is not None  # a phase end reads it by default
    assert rows[4]["host_memory_gb"] is None  # not due again within the interval
    assert quick.summary()["peak_host_memory_gb"] is None and quick.summary()["main_cores"] is not None


def test_disabled_sampler_costs_nothing(tmp_path: Path) -> None:
    sampler = RankSampler(host=False, gpu=False)
    threads = threading.active_count()
    with sampler, sampler.phase("full/0") as ph:
        assert threading.active_count() == threads  # no thread
    assert not sampler.enabled
    assert ph.summary(samples=10) == dict.fromkeys(SUMMARY_KEYS)
    assert sampler.rows() == []
    sampler.write_timeline(tmp_path / "samples-rank0.csv")
    assert (tmp_path / "samples-rank0.csv").read_text() == ",".join(SAMPLE_COLUMNS) + "\n"


def test_cpu_device_with_gpu_asked_samples_the_host_only(caplog: pytest.LogCaptureFixture) -> None:
    sampler = RankSampler(hz=0.001, gpu=True, device=torch.device("cpu"))
    with caplog.at_level(logging.WARNING), sampler, sampler.phase("full/0") as ph:
        pass
    assert caplog.records == []
    assert ph.summary()["gpu_util"] is None and ph.summary()["main_cores"] is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hz": 0}, r"hz must be a positive number of samples per second \(got 0\)"),
        ({"hz": float("nan")}, r"hz must be a positive number of samples per second \(got nan\)"),
        ({"hz": "10"}, r"hz must be a positive number of samples per second \(got '10'\)"),
        ({"rank": -1}, r"rank must be an integer >= 0 \(got -1\)"),
        ({"gpu": "yes"}, r"gpu must be true or false \(got 'yes'\)"),
        ({"device": "cuda"}, r"device must be a torch.device or None \(got 'cuda'\)"),
        ({"memory_interval_s": -2}, r"memory_interval_s must be a number of seconds >= 0 \(got -2\)"),
    ],
)
def test_bad_options_are_refused_with_the_value(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RankSampler(**kwargs)


def test_bad_phase_name_and_sample_count_are_refused() -> None:
    sampler = RankSampler(host=False, gpu=False)
    with pytest.raises(ValueError, match=r"a phase needs a non-empty name \(got ''\)"):
        sampler.phase("")
    with sampler.phase("full/0") as ph:
        pass
    with pytest.raises(ValueError, match=r"samples must be a number of data samples >= 0 \(got -1\)"):
        ph.summary(samples=-1)


def run_of(path: Path, phase: str, pause: float = 0.0, keep_earlier: bool = True) -> list[dict[str, str]]:
    """One run of a rank on a point: a phase, its timeline written; the file's rows after it."""
    timeline = TimelineFile(path, keep_earlier=keep_earlier)
    time.sleep(pause)
    sampler = RankSampler(hz=0.001, gpu=False)
    with sampler, sampler.phase(phase):
        sampler.sample()
    timeline.write(sampler)
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_a_requeued_run_appends_its_samples_after_the_interrupted_runs(tmp_path: Path) -> None:
    path = tmp_path / timeline_name(0)
    first = run_of(path, "full/0")
    after = run_of(path, "full/0", pause=0.3)  # the requeued run, a moment later
    assert after[: len(first)] == first  # the interrupted run's samples, untouched
    assert {r["run"] for r in first} == {"0"} and {r["run"] for r in after[len(first) :]} == {"1"}
    times = [float(r["t"]) for r in after]
    assert times == sorted(times)  # t goes on from the first run's start: the gap shows
    assert float(after[len(first)]["t"]) - float(first[-1]["t"]) >= 0.3
    third = run_of(path, "full/1")
    assert [r["run"] for r in third].count("2") == len(third) - len(after)
    assert [r["run"] for r in run_of(path, "full/0", keep_earlier=False)] == ["0"] * len(first)


def test_a_timeline_written_before_runs_were_numbered_is_run_0(tmp_path: Path) -> None:
    path = tmp_path / timeline_name(0)
    run_of(path, "full/0")
    lines = path.read_text().splitlines()
    path.write_text("\n".join(line.rsplit(",", 1)[0] for line in lines) + "\n")  # no run column
    rows = run_of(path, "full/0")
    assert [r["run"] for r in rows] == ["0"] * (len(lines) - 1) + ["1"] * (len(rows) - len(lines) + 1)


def test_a_timeline_the_disk_refuses_is_a_warning_said_once_not_the_end_of_the_point(
    tmpfs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.conftest import remount_read_only

    sampler = RankSampler(hz=0.001, gpu=False)
    with sampler:
        sampler.sample()
    timeline = TimelineFile(tmpfs / timeline_name(0))
    remount_read_only(tmpfs)
    with caplog.at_level(logging.WARNING):
        timeline.write(sampler)
        timeline.write(sampler)  # after the next rung: not said again
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"the timeline {tmpfs}/samples-rank0.csv is not written (Read-only file system); "
        "the point goes on without it"
    ]
