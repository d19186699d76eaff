"""How each rank of a local job ended, so that a rank killed (the OOM killer, `kill -9`) is
named on the console and in the rows: `its job failed: rank 1 was killed by SIGKILL (exit -9)
after 12 s in rung full`.

A rank killed by a signal writes nothing: only its parent sees its exit status. The parent of
a local job's ranks is submitit's controller (`python -m submitit.local._local`), which keeps
the statuses to itself; `RankExecutor` is submitit's LocalExecutor with a controller of its own
(`python -m harness.backends.ranks FOLDER`), the same but for one file, `<job id>_ranks.json`
beside the job's logs: each rank's exit status and how long after its start it ended.
`run_local` reads it once the job is over (`ended_ranks`), and writes a failed row for every unit
a dead rank has no row for (`fail_dead_ranks`), so that `status` calls the point failed.

A rank whose point's process group broke (a collective that gave up on a rank stuck or
lingering in user code, or lost it) cannot go on to the job's later points: the stuck rank is
not there to join them, and each would fail after `limits.dist_timeout_s` of waiting (20
points at the default 300 s: 100 min for nothing). It says where it broke (`broke_file`) and
ends; the controller then ends the job's other ranks (their DataLoader workers with them),
leaving each a result that says why (submitit's error pickle), and `run_local` runs the
points left in a fresh job: new rank processes, a new process group. A rank that wrote no result
(killed) costs no wait either (RankJob).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import submitit
from submitit.local import local as submitit_local

from harness.config.plan import Point
from harness_schema.atomic import CannotWrite, atomic_write_text

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RankEnd:
    rank: int
    exit: int
    """The rank process's exit status, negative for the signal that killed it (Popen's)."""
    seconds: float
    """From the ranks' start to this rank's end."""
    ended_after: int | None = None
    """The rank whose process group broke, where the controller ended this one for it."""

    def cause(self) -> str:
        """ "was killed by SIGKILL (exit -9)", or "exited with status 3"."""
        from harness.execution.script_end import process_end

        return process_end(self.exit, "exit")


@dataclass(frozen=True, slots=True)
class Broke:
    """Where a rank's process group broke: the point, and the rank's error there."""

    rank: int
    point_id: str
    error: str


def broke_file(folder: Path, job_id: str, rank: int) -> Path:
    return submitit.core.utils.JobPaths(folder, job_id).folder / f"{job_id}_broke-rank{rank}.json"


def say_broke(folder: Path, job_id: str, broke: Broke) -> None:
    """Written by the rank before it ends (best-effort: without it, the job goes on as it
    would have)."""
    with contextlib.suppress(CannotWrite):
        atomic_write_text(broke_file(folder, job_id, broke.rank), json.dumps(dataclasses.asdict(broke)))


def broken(folder: Path, job_id: str) -> list[Broke]:
    """Where the ranks of a finished local job said their process group broke."""
    found = []
    for path in sorted(broke_file(folder, job_id, 0).parent.glob(f"{job_id}_broke-rank*.json")):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(path.read_text())
            found.append(Broke(int(data["rank"]), str(data["point_id"]), str(data["error"])))
    return found


def ranks_file(folder: Path, job_id: str) -> Path:
    """`folder`: the executor's (`.../%j`), or the job's own."""
    return submitit.core.utils.JobPaths(folder, job_id).folder / f"{job_id}_ranks.json"


class RankController(submitit_local.Controller):
    """submitit's local controller, which also writes how each rank ended (ranks_file)."""

    def wait(self, freq: int = 24) -> Sequence[int | None]:
        started = time.monotonic()
        ended: dict[int, float] = {}
        timeout = freq * self.timeout_s
        almost_timeout = freq * (self.timeout_s - self.signal_delay_s)
        codes: list[int | None] = [t.poll() for t in self.tasks]
        ended_after: dict[int, int] = {}
        for step in range(timeout):  # submitit's own loop (Controller.wait), timing each end
            codes = [t.poll() for t in self.tasks]
            for k, code in enumerate(codes):
                if code is not None and k not in ended:
                    ended[k] = time.monotonic() - started
            if all(code is not None for code in codes):
                break
            broke = self._broke(codes) if not ended_after else None
            if broke is not None:
                ended_after = {k: broke for k, code in enumerate(codes) if code is None}
                self._end_tasks(list(ended_after), broke)
                continue
            if step == almost_timeout:
                self._forward_signal(submitit_local.LocalJobEnvironment._usr_sig())
            time.sleep(1.0 / freq)
        self._record(codes, ended, ended_after)
        return codes

    def _broke(self, codes: Sequence[int | None]) -> int | None:
        """A rank that ended as its process group broke (its broke file), while others run."""
        if None not in codes:
            return None
        return next(
            (
                k
                for k, code in enumerate(codes)
                if code == 0 and broke_file(self.folder, self.pid, k).exists()
            ),
            None,
        )

    def _end_tasks(self, ranks: Sequence[int], broke: int) -> None:
        """Kill these ranks and every process under them (a DataLoader worker stuck in
        `__getitem__` would outlive its rank), each left a result saying why."""
        import psutil

        below = []
        for k in ranks:
            with contextlib.suppress(psutil.Error):
                below += psutil.Process(self.tasks[k].pid).children(recursive=True)
            with contextlib.suppress(OSError):
                self.tasks[k].kill()
        for process in below:
            with contextlib.suppress(psutil.Error):
                process.kill()
        for k in ranks:  # reaped by their Popen, which keeps their exit status (-9)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.tasks[k].wait(timeout=10)
        psutil.wait_procs(below, timeout=10)
        for k in ranks:
            why = f"rank {k} was ended by its job: rank {broke}'s process group broke (ranks.py)"
            with contextlib.suppress(OSError):
                paths = submitit.core.utils.JobPaths(self.folder, self.pid, k)
                submitit.core.utils.cloudpickle_dump(("error", why), paths.result_pickle)

    def _record(
        self, codes: Sequence[int | None], ended: dict[int, float], ended_after: dict[int, int]
    ) -> None:
        entries = [
            {"rank": k, "exit": code, "seconds": round(ended[k], 1), "ended_after": ended_after.get(k)}
            for k, code in enumerate(codes)
            if code is not None and k in ended
        ]
        # A full disk: the ranks' own writes failed too, and the harness says so in one line;
        # without the file, ended_ranks names no rank (a traceback here said nothing more).
        with contextlib.suppress(CannotWrite):
            atomic_write_text(ranks_file(self.folder, self.pid), json.dumps(entries))


class RankJob(submitit_local.LocalJob[Any]):
    """submitit's LocalJob, without its wait for a result file that will never come. A rank
    killed by a signal (SIGKILL, the OOM killer; its own SIGTERM, end_as_terminated) writes
    none, and submitit waited 15 s for it at each question, in case a network file system was
    late to show it: job.results(), then each task's exception() (local._cannot_write), 30 s
    a job with a dead rank. Here the job is over only once its controller has ended, which
    outlives every rank, and a rank writes its result on this machine before it exits: what is
    not there then never will be."""

    _results_timeout_s = 0
    POLL_S = 0.05
    """Between two looks at the controller: submitit's 1 s cost every job half a second on
    average, a job a pass (a look is one waitpid)."""

    def wait(self) -> None:
        while not self.done():
            time.sleep(self.POLL_S)


class RankExecutor(submitit.LocalExecutor):
    """submitit's LocalExecutor whose controller is RankController: its _submit_command with
    submitit.local.local.start_controller's environment and another module to run."""

    def _submit_command(self, command: str) -> RankJob:
        ntasks = self.parameters.get("tasks_per_node", 1)
        n_gpus = self.parameters.get("gpus_per_node", 0)
        visible_gpus = self.parameters.get("visible_gpus", ())
        gpus = range(n_gpus) if visible_gpus == () else visible_gpus[:n_gpus]
        env = dict(os.environ)
        env.update(
            SUBMITIT_LOCAL_NTASKS=str(ntasks),
            SUBMITIT_LOCAL_COMMAND=command,
            SUBMITIT_LOCAL_TIMEOUT_S=str(int(60 * self.parameters.get("timeout_min", 2.0))),
            SUBMITIT_LOCAL_SIGNAL_DELAY_S=str(int(self.parameters.get("signal_delay_s", 30))),
            SUBMITIT_LOCAL_NODEID="0",
            SUBMITIT_LOCAL_JOB_NUM_NODES="1",
            SUBMITIT_STDERR_TO_STDOUT="",
            SUBMITIT_EXECUTOR="local",
            CUDA_VISIBLE_DEVICES=",".join(str(k) for k in gpus),
            SUBMITIT_LOCAL_WITH_SHELL="",
        )
        # The job outlives this process, as submitit's does (the LocalJob polls and ends it).
        process = subprocess.Popen([sys.executable, "-m", __name__, str(self.folder)], env=env)
        return RankJob(
            folder=self.folder, job_id=str(process.pid), process=process, tasks=list(range(ntasks))
        )


def ended_ranks(folder: Path, job_id: str) -> list[RankEnd]:
    """How each rank of a finished local job ended (none where the file is missing: a job
    started by submitit's own controller, or a controller killed)."""
    try:
        entries = json.loads(ranks_file(folder, job_id).read_text())
    except (OSError, ValueError):
        return []
    return [
        RankEnd(int(e["rank"]), int(e["exit"]), float(e["seconds"]), e.get("ended_after")) for e in entries
    ]


def fail_dead_ranks(
    point: Point, sweep_dir: Path, ends: Sequence[RankEnd], world_size: int, broke: Broke | None = None
) -> list[str]:
    """For each rank that ended badly: a failed row for every unit it has no row for, saying
    how it ended and in which rung; the lines said, one a rank. `broke`: where a rank's process
    group broke (`point` is that point): the ranks the controller ended for it are named so."""
    from harness.execution.dist import DistEnv
    from harness.execution.point import GROUP_BROKE, open_point

    lines = []
    for end in ends:
        if end.exit in (0, -signal.SIGTERM):
            continue  # -SIGTERM: terminated from outside, its units not done measured on resume
        env = DistEnv(rank=end.rank, world_size=world_size, local_rank=end.rank, hostname=_host())
        opened = open_point(point, sweep_dir, env)
        mine = opened.written()
        missing = opened.missing(mine)
        where = f" in rung {missing[0][0]}" if missing else ""
        if end.ended_after is not None and broke is not None:
            if not missing:
                continue  # it had finished the point: nothing of it is lost here
            line = (
                f"its job ended rank {end.rank}{where} after {end.seconds:.0f} s, stuck or lingering "
                f"there: rank {broke.rank}'s process group broke ({broke.error[:200]})"
            )
            if not any(words in broke.error for words in GROUP_BROKE):  # the rank's own failure
                line = (
                    f"its job ended rank {end.rank}{where} after {end.seconds:.0f} s, waiting there "
                    f"for rank {broke.rank}, which failed first: {broke.error[:200]}"
                )
        else:
            line = f"its job failed: rank {end.rank} {end.cause()} after {end.seconds:.0f} s{where}"
        opened.fail_missing(line, mine)
        lines.append(line)
    return lines


def _host() -> str:
    import socket

    return socket.gethostname()


if __name__ == "__main__":
    # submitit.local._local's main, with this controller: arguments from the environment.
    RankController(Path(sys.argv[1])).run()
