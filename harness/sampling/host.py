"""Host-side figures of a rank: CPU time of its own process and of its DataLoader workers, the
machine's CPU use, and the memory of its process tree (the workers included).

CPU time of the workers. Without persistent_workers, workers start and exit at every epoch, so
a worker can live and die between two samples. On Linux the kernel keeps that time for us: when
the rank reaps a worker (DataLoader joins them), the worker's CPU time is added to the rank's
`children_user`/`children_system`. So the workers' total is that counter plus the live
descendants' own times; nothing is lost, up to one sample's skew when a reap races a read, and
a new worker's time shows up to CHILDREN_INTERVAL_S late in the timeline (never in a summary:
phase boundaries list the descendants afresh).
Elsewhere (no such counter in psutil), the last time seen for each worker is kept when it
disappears: what it used after its last sample is lost (at most one sampling interval each).

"Loader" is every descendant process of the rank: on a training rank those are the DataLoader
workers (and torch.compile's compile workers, if any). "Main" is the rank's process with all
its threads: the pin-memory thread, and this sampler's own thread, count there.

A loader that works in threads of the rank's own process (a graph of nodes' ParallelMapper,
its PinMemory and Prefetcher; any loader a `workload.loader` factory or a script hands over
that is not a DataLoader) has no process of its own: with `threads_as_loader` on, the Python
threads of the process other than the main thread and the harness's own (named `harness-*`,
`rank<k>-sampler`) count as "loader", and are taken out of "main", each thread's time read from
the kernel (/proc/<pid>/task/<tid>, through psutil) and kept after it exits. What this cannot
attribute: native threads a library starts without Python (OpenMP's, a C++ decoder's pool)
stay in "main"; a Python thread of the user's own that is not the loader's (under the probe, a
script's logging thread) counts as "loader"; a thread's time after its last sample before it
exits is lost (at most one sampling interval each).

Foreign is the rest of the busy time of the CPUs the rank may run on: neither the rank's tree
nor its job's other processes (harness/sampling/mates.py): another user's job on a shared
node, a build on a workstation, a hypervisor's steal.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.sampling.mates import JobMates, busy_seconds

log = logging.getLogger(__name__)

# Reading PSS walks the page tables (/proc/<pid>/smaps_rollup): measured 4-12 ms of CPU per
# process with torch loaded on a 2-core VM (19-37 ms for a rank and 2 workers), against ~60 us
# for a whole sample without it, and it grows with the memory mapped. So memory is read at most
# once per DEFAULT_MEMORY_INTERVAL_S, and less often when a read would cost more than
# MEMORY_CPU_BUDGET of a core (20 ms -> every 20 s); and whenever asked (at phase ends, where
# the peak of a rung is: its workers still alive).
DEFAULT_MEMORY_INTERVAL_S = 1.0
MEMORY_CPU_BUDGET = 0.001

# Listing the descendants was most of a sample's cost (~120 of ~200 us), and on Linux a stale list
# loses nothing: a worker found late brings all its CPU time since it started, and one that
# exited is in the reaped-children counter. So the list is refreshed at most this often (and
# at every phase boundary); a new worker's time shows up in the timeline up to this much late.
CHILDREN_INTERVAL_S = 0.5


def job_memory_limit_bytes(
    environ: Mapping[str, str] | None = None,
    proc_cgroup: Path = Path("/proc/self/cgroup"),
    cgroup_root: Path = Path("/sys/fs/cgroup"),
) -> int:
    """Memory the job may use on this node: the least of the host's total, the cgroup v2
    limits of this process's cgroup and its ancestors (Slurm's task/cgroup plugin sets the
    job's) and Slurm's --mem (SLURM_MEM_PER_NODE, in MB). A cache that does not fit under it
    gets the job killed, whatever the host has."""
    env = os.environ if environ is None else environ
    limits = [psutil.virtual_memory().total, *_cgroup_limits(proc_cgroup, cgroup_root)]
    mem = env.get("SLURM_MEM_PER_NODE", "")
    if mem.isdigit() and int(mem) > 0:
        limits.append(int(mem) * 1024 * 1024)
    return min(limits)


def _cgroup_limits(proc_cgroup: Path, root: Path) -> list[int]:
    """memory.max of the process's cgroup v2 ("0::/path") and of each ancestor ("max": none)."""
    try:
        line = next(x for x in proc_cgroup.read_text().splitlines() if x.startswith("0::"))
    except (OSError, StopIteration):
        return []  # not Linux, or cgroup v1 only: the host's memory and Slurm's word
    folder = root / line.removeprefix("0::").strip("/")
    limits = []
    for level in (folder, *folder.parents):
        try:
            text = (level / "memory.max").read_text().strip()
        except OSError:
            text = ""
        if text.isdigit():
            limits.append(int(text))
        if level == root:
            break
    return limits


def process_tree_memory_bytes(pid: int | None = None) -> int:
    """Memory of a process and its descendants.

    Proportional set size (PSS) where the OS gives it: forked DataLoader workers share the
    parent's pages copy-on-write, and summing their RSS would count those pages once per
    worker. Falls back to RSS elsewhere.
    """
    root = psutil.Process(pid)
    return _memory_bytes([root, *root.children(recursive=True)])


def _memory_bytes(procs: Iterable[psutil.Process]) -> int:
    total = 0
    for proc in procs:
        try:
            try:
                total += proc.memory_full_info().pss
            except (AttributeError, psutil.AccessDenied):
                total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a worker that exited between listing and reading
    return total


def loader_thread_ids() -> set[int]:
    """Kernel ids of this process's Python threads that are neither the main thread nor the
    harness's own (`harness-*`, `rank<k>-sampler`): a thread-based loader's."""
    main = threading.main_thread()
    return {
        t.native_id
        for t in threading.enumerate()
        if t is not main
        and t.native_id is not None
        and not t.name.startswith("harness-")
        and not (t.name.startswith("rank") and t.name.endswith("-sampler"))
    }


def cpus_allotted() -> int:
    """CPUs this process may run on: Slurm's --cpus-per-task shows up in the affinity mask."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity masks
        return os.cpu_count() or 1


def descendant_pids(pid: int) -> list[int]:
    """Every descendant of `pid`. Linux lists each thread's children in /proc/<pid>/task/<tid>/
    children: measured ~0.12 ms for a rank and two workers, against ~1.1-1.9 ms for psutil's
    children(recursive=True), which reads /proc/<pid>/stat of every process on the node. The
    kernel may miss a child forked or exiting during the read; the next listing finds it."""
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        try:
            return [p.pid for p in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            return []
    found: list[int] = []
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # exited meanwhile
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue
            found.extend(children)
            stack.extend(children)
    return found


@dataclass(frozen=True, slots=True)
class HostReading:
    """Cumulative CPU seconds (differences between two readings mean something) and memory."""

    main_cpu_s: float
    """User + system time of the rank's process (all its threads)."""
    loader_cpu_s: float
    """User + system time of its descendants, the exited ones included."""
    system_busy_s: float
    """Busy time of all the node's CPUs, summed (other jobs on the node included)."""
    memory_bytes: int | None
    """PSS (else RSS) of the process tree; None when not read at this sample."""
    allotted_busy_s: float | None = None
    """Busy time of the CPUs this process may run on, summed, steal included (None: unknown)."""
    mates_cpu_s: float = 0.0
    """User + system time of the job's other processes here (other local ranks, their workers)."""


class HostSampler:
    """Reads the host figures of one process tree; cheap enough for 10 Hz except memory (see
    DEFAULT_MEMORY_INTERVAL_S and MEMORY_CPU_BUDGET)."""

    def __init__(
        self,
        *,
        pid: int | None = None,
        memory_interval_s: float = DEFAULT_MEMORY_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (
            isinstance(memory_interval_s, bool)
            or not isinstance(memory_interval_s, (int, float))
            or not math.isfinite(memory_interval_s)
            or memory_interval_s < 0
        ):
            raise ValueError(
                f"memory_interval_s must be a number of seconds >= 0 (got {memory_interval_s!r})"
            )
        self._root = psutil.Process(pid)
        self.pid = self._root.pid
        self.memory_interval_s = float(memory_interval_s)
        self.cpus_allotted = cpus_allotted()
        self._clock = clock
        self._next_memory_at = -math.inf
        self._next_listing_at = -math.inf
        self._procs: dict[int, psutil.Process] = {}
        self._seen: dict[int, float] = {}  # pid -> its CPU seconds at the last read
        self._departed_s = 0.0  # without the reaped-children counter: last times of exited ones
        self._loader_high = 0.0
        # The kernel's reaped-children counter is Linux's (psutil reports 0 on macOS).
        self._kernel_counts_reaped = psutil.LINUX
        self._mates = JobMates(self.pid)
        self.threads_as_loader = False
        """Count the process's loader threads as loader (see the module's docstring)."""
        self._threads_seen: dict[int, float] = {}  # tid -> its CPU seconds at the last read

    def read(self, *, memory: bool | None = None, exact: bool = False) -> HostReading:
        """`memory`: True reads it now, False skips it, None reads it when it is due. `exact`:
        list the descendants now (phase boundaries) rather than when due."""
        now = self._clock()
        # The rank's own times first, its children's after: a worker reaped in between is then
        # missing from this reading (and present in the next), never counted twice.
        own = self._root.cpu_times()
        loader = own.children_user + own.children_system if self._kernel_counts_reaped else 0.0
        # Without the kernel's counter, every exit must be seen: list them at every read.
        if exact or not self._kernel_counts_reaped or now >= self._next_listing_at:
            pids = descendant_pids(self.pid)
            self._next_listing_at = now + CHILDREN_INTERVAL_S
            self._mates.refresh({self.pid, *pids})
        else:
            pids = list(self._procs)
        live: dict[int, float] = {}
        for pid in pids:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                t = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            # Its own reaped children (grandchildren of the rank) count as well.
            live[pid] = t.user + t.system + t.children_user + t.children_system
        for gone in self._seen.keys() - live.keys():
            if not self._kernel_counts_reaped:
                self._departed_s += self._seen[gone]
            self._procs.pop(gone, None)
        self._seen = live
        loader += sum(live.values()) + self._departed_s
        # Never backwards: a reap racing the reads can only make one reading low.
        self._loader_high = max(self._loader_high, loader)

        memory_bytes = None
        if memory or (memory is None and now >= self._next_memory_at):
            cpu_before = time.thread_time()
            memory_bytes = _memory_bytes([self._root, *(self._procs[p] for p in live)])
            cost_s = time.thread_time() - cpu_before  # CPU, not wall: contention must not count
            self._next_memory_at = now + max(self.memory_interval_s, cost_s / MEMORY_CPU_BUDGET)
        threads_s = self._loader_threads_s() if self.threads_as_loader else 0.0
        return HostReading(
            main_cpu_s=own.user + own.system - threads_s,
            loader_cpu_s=self._loader_high + threads_s,
            system_busy_s=_system_busy_s(),
            memory_bytes=memory_bytes,
            allotted_busy_s=busy_seconds(self._mates.cpus),
            mates_cpu_s=self._mates.cpu_seconds(),
        )

    def _loader_threads_s(self) -> float:
        """CPU seconds of the loader's threads in this process, those that exited included (up to
        their last read: what a thread spent after it, before exiting, counts as main's)."""
        if self.pid != os.getpid():
            return 0.0  # another process's Python threads are not ours to list
        wanted = loader_thread_ids()
        try:
            times = {t.id: t.user_time + t.system_time for t in self._root.threads()}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            times = {}
        for tid in wanted & times.keys():
            self._threads_seen[tid] = max(self._threads_seen.get(tid, 0.0), times[tid])
        return sum(self._threads_seen.values())

    @property
    def available(self) -> bool:
        """Always: a process's own figures can be read (the Sampler protocol, base.py)."""
        return True

    @property
    def reason(self) -> str:
        return ""

    @property
    def cpus(self) -> int:
        """The CPUs whose busy time allotted_busy_s sums."""
        return len(self._mates.cpus)


def _system_busy_s() -> float:
    t = psutil.cpu_times()
    total = sum(t)
    # Linux counts guest time inside user/nice too (psutil's cpu_percent subtracts it the same way).
    total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    return total - t.idle - getattr(t, "iowait", 0.0)
