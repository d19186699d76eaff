"""The host sampler for real, on this CPU, with real DataLoader worker processes.

Only coarse comparisons with wide margins: CPU time ticks at 10 ms and this may be a 2-core VM
shared with other jobs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from harness.sampling import host
from harness.sampling.host import HostSampler, descendant_pids, process_tree_memory_bytes
from harness.sampling.timeline import RankSampler

REPO = Path(__file__).resolve().parents[3]

BURN_S = 0.01  # CPU seconds per item


def burn(seconds: float) -> None:
    """Spin until this thread has used `seconds` of CPU (not wall) time."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


class Burner(Dataset[torch.Tensor]):
    """Every item costs BURN_S of CPU in whichever process loads it."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        burn(BURN_S)
        return torch.zeros(4)


def run_epochs(num_workers: int, *, epochs: int = 1, size: int = 40) -> dict:
    """A phase that iterates `epochs` epochs of a Burner; its summary, plus the CPU seconds."""
    loader = DataLoader(Burner(size), batch_size=4, num_workers=num_workers)
    sampler = RankSampler(hz=20.0, gpu=False)
    with sampler, sampler.phase("load") as ph:
        for _ in range(epochs):  # a new iterator each epoch: new workers, the old ones exit
            for _batch in loader:
                pass
    assert ph.seconds is not None
    summary = ph.summary()
    # CPU seconds rather than cores in the checks: another job on this VM stretches the wall
    # time (fewer cores) but not the CPU time an item costs.
    return {
        **summary,
        "loader_cpu_s": summary["loader_cores"] * ph.seconds,
        "main_cpu_s": summary["main_cores"] * ph.seconds,
    }


def test_worker_cpu_counts_as_loader_cores_not_main() -> None:
    burnt_s = 40 * BURN_S
    with_workers = run_epochs(2)
    without = run_epochs(0)
    assert with_workers["loader_cpu_s"] > 0.8 * burnt_s
    assert without["loader_cpu_s"] < 0.1 * burnt_s  # no worker processes at all
    assert without["main_cpu_s"] > 0.8 * burnt_s  # the items are loaded in the main process instead
    assert with_workers["loader_cores"] > 0.1 and with_workers["loader_cores"] > without["loader_cores"] + 0.1


def test_cpu_of_workers_that_exited_during_the_phase_is_kept() -> None:
    # Two epochs without persistent workers: the first epoch's workers exit mid-phase.
    summary = run_epochs(2, epochs=2)
    burnt_s = 2 * 40 * BURN_S
    assert summary["loader_cpu_s"] > 0.8 * burnt_s  # losing one epoch's workers would give about half


def test_main_cores_when_the_main_process_burns_cpu() -> None:
    sampler = RankSampler(hz=20.0, gpu=False)
    with sampler, sampler.phase("burn") as ph:
        wall, cpu = time.perf_counter(), time.process_time()
        burn(0.3)
        own_cores = (time.process_time() - cpu) / (time.perf_counter() - wall)
    summary = ph.summary()
    assert ph.seconds is not None
    assert summary["main_cores"] * ph.seconds > 0.8 * 0.3
    # What the process measures of itself, to the 10 ms tick of CPU clocks.
    assert summary["main_cores"] == pytest.approx(own_cores, abs=0.15)
    assert summary["loader_cores"] < 0.1


def test_peak_host_memory_is_plausible() -> None:
    sampler = RankSampler(hz=20.0, gpu=False)
    with sampler, sampler.phase("load") as ph:
        for _batch in DataLoader(Burner(16), batch_size=4, num_workers=2):
            pass
    peak = ph.summary()["peak_host_memory_gb"]
    rss_gb = psutil.Process().memory_info().rss / 1e9
    # PSS of the tree: at least a good part of this process alone (torch is loaded), less than RAM.
    assert 0.3 * rss_gb < peak < psutil.virtual_memory().total / 1e9


def test_descendants_include_a_child_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendant_pids(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert child.pid not in descendant_pids(os.getpid())


def test_a_child_found_late_or_reaped_keeps_all_its_cpu_time() -> None:
    now = [100.0]
    sampler = HostSampler(clock=lambda: now[0])
    before = sampler.read(memory=False).loader_cpu_s
    burner = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", burner])
    try:
        deadline = time.monotonic() + 20
        while sum(psutil.Process(child.pid).cpu_times()[:2]) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.02)
        # Not listed yet (the listing is not due): the child is not seen...
        assert sampler.read(memory=False).loader_cpu_s == before
        now[0] += 1.0
        # ...and once listed, it brings all the time it used so far.
        found = sampler.read(memory=False).loader_cpu_s
        assert found - before >= 0.25
    finally:
        child.kill()
        child.wait()  # reaped: its time moves to this process's children counter
    assert sampler.read(memory=False, exact=True).loader_cpu_s >= found


def test_memory_is_read_at_its_own_lower_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "MEMORY_CPU_BUDGET", 1.0)  # any read is cheap enough: the interval rules
    now = [100.0]
    sampler = HostSampler(memory_interval_s=1.0, clock=lambda: now[0])
    assert sampler.read().memory_bytes is not None  # due at the first read
    now[0] += 0.1
    assert sampler.read().memory_bytes is None
    assert sampler.read(memory=True).memory_bytes is not None  # asked for: read now
    now[0] += 1.0
    assert sampler.read().memory_bytes is not None


def test_costly_memory_reads_are_spaced_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "MEMORY_CPU_BUDGET", 1e-9)  # every read is far over budget
    now = [100.0]
    sampler = HostSampler(memory_interval_s=1.0, clock=lambda: now[0])
    assert sampler.read().memory_bytes is not None
    now[0] += 1000.0
    assert sampler.read().memory_bytes is None
    assert sampler.read(memory=True).memory_bytes is not None  # phase ends still get one


def test_cpu_times_are_cumulative() -> None:
    sampler = HostSampler()
    first = sampler.read(memory=False)
    burn(0.05)
    second = sampler.read(memory=False)
    assert second.main_cpu_s > first.main_cpu_s
    assert second.loader_cpu_s >= first.loader_cpu_s
    assert second.system_busy_s >= first.system_busy_s


PINNED = """
import os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})  # what Slurm's --cpus-per-task=1 leaves a task
from harness.sampling.host import HostSampler, cpus_allotted
print(cpus_allotted(), HostSampler().cpus_allotted, os.cpu_count())
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks on this OS")
def test_cpus_allotted_are_the_cpus_the_process_may_run_on_not_the_machines() -> None:
    cpu = min(os.sched_getaffinity(0))
    out = subprocess.run(
        [sys.executable, "-c", PINNED, str(cpu)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    allotted, sampled, machine = (int(v) for v in out.stdout.split())
    assert (allotted, sampled) == (1, 1)
    assert machine == os.cpu_count()  # the machine's count is another figure


def test_process_tree_memory_counts_this_process() -> None:
    assert process_tree_memory_bytes() > 10e6


def test_bad_memory_interval_is_refused() -> None:
    with pytest.raises(ValueError, match=r"memory_interval_s must be a number of seconds >= 0 \(got -1\)"):
        HostSampler(memory_interval_s=-1)


def test_the_jobs_memory_limit_is_the_least_of_host_cgroups_and_slurms(tmp_path: Path) -> None:
    total = psutil.virtual_memory().total
    root = tmp_path / "cgroup"
    job = root / "system.slice" / "slurmstepd.scope" / "job_7"
    step = job / "step_0"
    step.mkdir(parents=True)
    (root / "memory.max").write_text("max\n")
    (job / "memory.max").write_text(f"{2 * 1024**3}\n")  # the job's --mem, as task/cgroup sets it
    (step / "memory.max").write_text("max\n")
    proc = tmp_path / "cgroup.self"
    proc.write_text("0::/system.slice/slurmstepd.scope/job_7/step_0\n")
    limit = host.job_memory_limit_bytes({}, proc_cgroup=proc, cgroup_root=root)
    assert limit == min(total, 2 * 1024**3)
    slurm = host.job_memory_limit_bytes({"SLURM_MEM_PER_NODE": "1024"}, proc_cgroup=proc, cgroup_root=root)
    assert slurm == min(total, 1024**3)
    none = host.job_memory_limit_bytes({}, proc_cgroup=tmp_path / "absent", cgroup_root=root)
    assert none == total


@pytest.mark.parametrize("as_loader", [True, False])
def test_a_thread_based_loaders_threads_count_as_loader_cores_when_asked(as_loader: bool) -> None:
    # torchdata.nodes reads in threads of the rank's process: loader_cores read 0 (issue 27).
    import threading

    sampler = RankSampler(hz=20.0, gpu=False)
    sampler.threads_as_loader(as_loader)
    with sampler, sampler.phase("burn") as ph:
        # The reader idles 0.5 s (10 sampler periods) after burning, then exits before the phase
        # ends: its time is kept. The CPU it spends after the sampler's last read of it is the
        # process's, not a thread's any more, and counts as main (at most one period of it);
        # on a loaded machine the read can lag, hence the idle tail.
        reader = threading.Thread(target=lambda: (burn(0.3), time.sleep(0.5)), name="reader")
        reader.start()
        reader.join()
    summary = ph.summary()
    assert ph.seconds is not None
    loader_s, main_s = summary["loader_cores"] * ph.seconds, summary["main_cores"] * ph.seconds
    if as_loader:
        assert loader_s > 0.8 * 0.3 and main_s < 0.5 * 0.3
    else:
        assert loader_s < 0.1 and main_s > 0.8 * 0.3
