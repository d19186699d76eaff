"""The machine's CPU time beside a rank's own: how busy its CPUs were, and how much of that the
rank's job spent in its other processes. What is left is other people's work: the share of the
CPUs that a shared machine took from the measurement (`foreign_cpu_share` in the rows).

Busy time is read from /proc/stat for the CPUs this process may run on (its affinity mask:
Slurm's --cpus-per-task, a cpuset), steal time included: a hypervisor that hands a vCPU to
another guest takes it from the measurement just as another process does. Idle and iowait
are not busy.

Job mates are the other processes of the same job on this machine: the other local ranks of
the point and their DataLoader workers, a script's own process under its rank. They are not
foreign, and under the local backend or torchrun every rank may run on every CPU, so each rank
would otherwise count the others as a shared machine. A process is a mate when its
environment, as it started (/proc/<pid>/environ), carries the same value as this process's
for one of JOB_VARIABLES: the Slurm job, the local backend's job (submitit), torchrun's run, or
the rendezvous address of a script's ranks. A process outside any job (a plain `harness run
--backend inline`) has no mates. Mates whose affinity mask shares no CPU with this process's
run elsewhere and are not counted (Slurm binds each task to its own cores).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

JOB_VARIABLES: tuple[tuple[str, ...], ...] = (
    ("SLURM_JOB_ID",),
    ("SUBMITIT_LOCAL_JOB_ID",),
    ("TORCHELASTIC_RUN_ID",),
    ("MASTER_ADDR", "MASTER_PORT"),
)
"""Each entry: variables whose values, all set and equal, make two processes one job's."""

PROC = Path("/proc")


def allotted_cpus() -> frozenset[int]:
    """The CPUs this process may run on (all of them where there is no affinity mask)."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return frozenset(range(os.cpu_count() or 1))


def busy_seconds(cpus: frozenset[int], stat: Path = PROC / "stat") -> float | None:
    """Busy seconds of these CPUs since boot (user, nice, system, irq, softirq, steal; guest
    time is already inside user and nice), or None where /proc/stat cannot be read."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit() or int(name[3:]) not in cpus:
            continue
        fields = [int(v) for v in rest.split()]
        # user nice system idle iowait irq softirq steal [guest guest_nice]
        busy += sum(fields[:8]) - fields[3] - fields[4]
    return busy / tick


def _identity(pid: int | str) -> tuple[tuple[str, ...], ...]:
    """The job identity of a process: for each JOB_VARIABLES entry, its values ("" unset)."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return ()
    env = dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return tuple(
        tuple(env.get(k.encode(), b"").decode(errors="replace") for k in keys) for keys in JOB_VARIABLES
    )


def _same_job(mine: tuple[tuple[str, ...], ...], theirs: tuple[tuple[str, ...], ...]) -> bool:
    return any(all(m) and m == t for m, t in zip(mine, theirs, strict=False))


class JobMates:
    """The CPU seconds used so far by this process's job mates (see the module's docstring).

    `refresh(own)` lists the machine's processes again (pass the pids of the rank's own tree,
    which are not mates); `cpu_seconds()` reads the listed mates' times. A mate's exited
    children are in its reaped-children times, so a worker that ends loses nothing; a mate
    whose parent is no mate keeps its last reading when it ends.
    """

    def __init__(self, pid: int | None = None) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.cpus = allotted_cpus()
        mine = _identity(self.pid)
        self._mine = mine if any(all(v) for v in mine) else ()
        self._known: dict[int, bool] = {}  # pid -> whether it is a mate (read once per pid)
        self._mates: dict[int, psutil.Process] = {}
        self._parent: dict[int, int] = {}  # mate -> its parent when found
        self._last: dict[int, float] = {}  # mate -> its CPU seconds at the last read
        self._departed_s = 0.0

    @property
    def in_a_job(self) -> bool:
        return bool(self._mine)

    def refresh(self, own: set[int]) -> None:
        if not self._mine:
            return
        try:
            pids = {int(p) for p in os.listdir(PROC) if p.isdigit()}
        except OSError:
            return
        self._known = {p: m for p, m in self._known.items() if p in pids}
        for pid in pids - self._known.keys():
            self._known[pid] = pid != self.pid and self._is_mate(pid)
        for pid in [p for p in self._mates if p in own]:  # found to be the rank's own after all
            self._forget(pid, departed=False)
        for pid, mate in self._known.items():
            if mate and pid not in own and pid not in self._mates:
                try:
                    proc = psutil.Process(pid)
                    self._parent[pid] = proc.ppid()
                except psutil.Error:
                    self._known[pid] = False
                    continue
                self._mates[pid] = proc

    def _is_mate(self, pid: int) -> bool:
        if not _same_job(self._mine, _identity(pid)):
            return False
        try:
            return bool(self.cpus & set(psutil.Process(pid).cpu_affinity() or self.cpus))
        except (psutil.Error, AttributeError):
            return True  # no affinity to read (macOS): it may run on any CPU

    def cpu_seconds(self) -> float:
        for pid, proc in list(self._mates.items()):
            try:
                t = proc.cpu_times()
            except psutil.Error:
                self._forget(pid, departed=True)
                continue
            self._last[pid] = t.user + t.system + t.children_user + t.children_system
        return sum(self._last.values()) + self._departed_s

    def _forget(self, pid: int, *, departed: bool) -> None:
        """An exited mate's time goes to its parent's reaped children when the parent is a mate
        too; else its last reading is kept (what it used after it is lost: one interval)."""
        last = self._last.pop(pid, 0.0)
        if departed and self._parent.get(pid) not in self._mates:
            self._departed_s += last
        self._mates.pop(pid, None)
        self._parent.pop(pid, None)
