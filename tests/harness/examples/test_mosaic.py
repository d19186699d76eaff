"""MosaicML Streaming, the real library (mosaicml-streaming 0.13.0), in an environment of its
own (.venv-mosaic, made by scripts/mosaic_env.sh, which scripts/test.sh runs): Mosaic cannot be
installed beside the `libs` extra. The harness runs there as a Mosaic user runs it, through its
command line: an MDS data set written by MDSWriter, a dataset factory returning a
StreamingDataset, the whole ladder, 2 DataLoader workers. Issue 27's hang (Mosaic's threads
started in the rank's process before the workers fork) would make these runs never finish: each
has a subprocess timeout, and a run past it fails its test with what the run had printed.
The tests skip, saying so, where the environment is absent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.ladder.verdict import ladder_verdicts
from analysis.load import load_results
from harness_schema.rungs import LADDER

ROOT = Path(__file__).resolve().parents[3]
MOSAIC_VENV = Path(os.environ.get("HARNESS_MOSAIC_VENV", ROOT / ".venv-mosaic"))
MOSAIC_PY = MOSAIC_VENV / "bin" / "python"
SAMPLES = 64
BATCH = 4
pytestmark = [
    pytest.mark.skipif(
        not (MOSAIC_VENV / ".harness-installed").is_file(),
        reason=f"no MosaicML Streaming environment at {MOSAIC_VENV}: `bash scripts/mosaic_env.sh` makes it",
    ),
    # One xdist process for them all: Streaming registers its data sets in shared memory by
    # name, and two of these tests at once in two processes met there ("shared memory
    # registered does not match local leader").
    pytest.mark.xdist_group("mosaic"),
]


def mosaic(*args: str, timeout: float = 240) -> str:
    """`python ARGS` in the Mosaic environment (this checkout's harness first on its path); its
    output, after a zero exit within `timeout` seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [str(MOSAIC_PY), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"no end after {timeout} s (a hang?): {hung.stdout!r} {hung.stderr!r}")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """64 samples (labels 0..63) in 7 MDS shards, written by Mosaic's MDSWriter."""
    root = tmp_path_factory.mktemp("mds") / "data"
    mosaic(
        "-m",
        "harness.examples.mosaic_mds",
        str(root),
        *f"--samples {SAMPLES} --size 16 --size-limit 8192".split(),
    )
    assert (root / "index.json").is_file() and len(list(root.glob("shard.*.mds"))) >= 2
    return root


def spec(path: Path, shards: Path, read_ms: float, *, rungs: str = "") -> Path:
    """A spec a Mosaic user writes: the dataset factory, the emulated step, 2 workers."""
    path.write_text(
        "name: mosaic-cpu\n"
        "workload:\n"
        "  dataset: harness.examples.mosaic_mds:make_dataset\n"
        f"  dataset_args: {{local: '{shards}', size: 16, read_ms: {read_ms}}}\n"
        "  model: emulated\n"
        "  model_args: {step_ms: 100}\n"
        f"  batch_size: {BATCH}\n"
        "  device: cpu\n"
        "measure: {warmup_steps: 1, steps: 6, repeats: 3}\n"
        "loader: {num_workers: 2}\n"
        "limits: {batch_timeout_s: 120}\n" + (f"rungs: {rungs}\n" if rungs else "")
    )
    return path


def test_the_whole_ladder_with_workers_finishes_every_row_ok_and_counted(
    shards: Path, tmp_path: Path
) -> None:
    path = spec(tmp_path / "s.yaml", shards, 0, rungs=f"[{', '.join(LADDER)}]")
    # One run a rung: every row ok and counted is asserted, not a figure (3 runs: 36 s alone).
    out = mosaic("-m", "harness", "run", str(path), "--results", str(tmp_path / "r"), "measure.repeats=1")
    rows = load_results([next((tmp_path / "r").iterdir())]).rows
    assert len(rows) and set(rows["status"]) <= {"ok", "skipped"}, (list(rows["error"]), out)
    ran = rows[rows["status"] == "ok"]
    assert {"device_batch", "host_batch", "full"} <= set(ran["rung"]), list(rows["rung"])
    assert (ran["num_workers"] == 2).all()
    # Counted right: every batch holds batch_size samples (Mosaic pads none at 64 = 16 batches).
    assert (ran["samples"] == ran["steps"] * BATCH).all(), ran[["rung", "steps", "samples"]]


# A known answer, judged in the serial pass: beside the parallel pass's load the control with
# nothing injected named "transforms + raw data loading" (a CI-equivalent run, load 4 to 6).
@pytest.mark.serial
@pytest.mark.parametrize(("read_ms", "named"), [(100, True), (0, False)], ids=["slow-read", "nothing"])
def test_a_slow_read_is_named_by_the_ladder_and_nothing_without_it(
    shards: Path, tmp_path: Path, read_ms: float, named: bool
) -> None:
    path = spec(tmp_path / "s.yaml", shards, read_ms, rungs="[host_batch, processed_sample, full]")
    out = mosaic("-m", "harness", "run", str(path), "--results", str(tmp_path / "r"))
    (verdict,) = ladder_verdicts(load_results([next((tmp_path / "r").iterdir())]).rows)
    # 100 ms a sample: 400 ms a batch in each of 2 workers, 5 batches/s against a step's 10.
    assert verdict.stages == (["transforms + raw data loading"] if named else []), (verdict.sentence, out)


def test_python_is_the_mosaic_environment() -> None:
    """The runs above are against the real library, not a stand-in, and not this interpreter."""
    out = mosaic(
        "-c", "import streaming, numpy, sys; print(streaming.__version__, numpy.__version__, sys.prefix)"
    )
    version, numpy_version, prefix = out.split()
    assert version == "0.13.0" and numpy_version.startswith("2.1.") and prefix != sys.prefix


def test_two_local_ranks_each_read_their_own_half(shards: Path, tmp_path: Path) -> None:
    """The spec on 2 ranks (`--backend local`, slurm.tasks_per_node 2), 2 workers each: Mosaic
    partitions the samples between ranks (its world from the harness's RANK and WORLD_SIZE), so
    each rank's epoch is 8 batches of 4, and the ranks read disjoint halves."""
    record = tmp_path / "record"
    record.mkdir()
    path = spec(tmp_path / "s.yaml", shards, 0, rungs="[full]")
    out = mosaic(
        "-m", "harness", "run", str(path), "--results", str(tmp_path / "r"), "--backend", "local",
        "workload.dataset=tests.fixtures.mosaic_record:make_dataset",
        f"workload.dataset_args={{local: '{shards}', size: 16, record: '{record}'}}",
        "slurm.tasks_per_node=2", "measure.repeats=1",
    )  # fmt: skip
    rows = load_results([next((tmp_path / "r").iterdir())]).rows
    assert list(rows["status"]) == ["ok", "ok"], (list(rows["error"]), out)
    assert sorted(rows["rank"]) == [0, 1] and set(rows["epoch_steps"]) == {SAMPLES // 2 // BATCH}
    read: dict[str, set[int]] = {}
    for file in record.glob("*.txt"):
        for line in file.read_text().splitlines():
            rank, label = line.split()
            read.setdefault(rank, set()).add(int(label))
    # Unshuffled, a rank reads the same half every epoch (the full rung reads several).
    assert sorted(read) == ["0", "1"] and len(read["0"]) == len(read["1"]) == SAMPLES // 2, read
    assert read["0"] | read["1"] == set(range(SAMPLES)), read  # disjoint halves, none missing


def test_mosaics_own_streaming_dataloader_through_a_loader_factory(shards: Path, tmp_path: Path) -> None:
    """`workload.loader` with Mosaic's StreamingDataLoader (a DataLoader subclass, measured as
    given) and 2 workers: the batch rungs and full finish, counted right."""
    path = spec(tmp_path / "s.yaml", shards, 0, rungs="[device_batch, host_batch, full]")
    path.write_text(
        path.read_text()
        .replace(
            "  dataset: harness.examples.mosaic_mds:make_dataset",
            "  loader: harness.examples.mosaic_mds:make_loader",
        )
        .replace("dataset_args:", "loader_args:")
    )
    # One run a rung, as above: the rows' counts are asserted, not a figure.
    out = mosaic("-m", "harness", "run", str(path), "--results", str(tmp_path / "r"), "measure.repeats=1")
    rows = load_results([next((tmp_path / "r").iterdir())]).rows
    assert set(rows["status"]) == {"ok"} and set(rows["rung"]) == {"device_batch", "host_batch", "full"}, (
        list(rows["error"]),
        out,
    )
    assert (rows["samples"] == rows["steps"] * BATCH).all() and (rows["num_workers"] == 2).all()
    assert "StreamingDataLoader" in " ".join(rows["loader_given"]), list(rows["loader_given"])


def test_a_factory_that_reads_the_stream_before_the_fork_hangs_mosaics_workers_and_says_so(
    shards: Path, tmp_path: Path
) -> None:
    """The hazard the tests above pass by, shown real: a sample read in the rank's process (a
    factory that peeks) starts Mosaic's threads; the workers forked after never deliver, and
    `limits.batch_timeout_s` makes that a failed row naming the stream, not a hang."""
    path = spec(tmp_path / "s.yaml", shards, 0, rungs="[full]")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [str(MOSAIC_PY), "-m", "harness", "run", str(path), "--results", str(tmp_path / "r"),
         "workload.dataset=tests.fixtures.mosaic_record:make_peeked_dataset",
         f"workload.dataset_args={{local: '{shards}', size: 16}}",
         "measure.repeats=1", "limits.batch_timeout_s=5"],
        capture_output=True, text=True, timeout=240, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    (error,) = load_results([next((tmp_path / "r").iterdir())]).rows["error"]
    assert error.startswith(
        "LoaderTimeout: no batch from the DataLoader for 5 s: a worker stuck in harness.examples.mosaic_mds.MosaicImages.__iter__?"
    ), error
