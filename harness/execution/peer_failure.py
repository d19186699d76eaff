"""A rank that fails tells the others at once, beside the collectives: in the process group's
store (`told`), and by ending its job's rank processes (backends/job.py).

Why: a rank whose rung failed leaves the point's collectives, and the others wait in the next
one (the warmup's all-reduce, the gradients' under DDP) until limits.dist_timeout_s or the
point's limit, 5 minutes and more, with nothing said (issue 37). Under the local backend its
process went on to the job's next point, and its gloo connections with it: DDP keeps the
point's process group alive past destroy_process_group, so the peers never saw it go. Now the
failing rank writes its error under `failed/<point>` in the group's store, and its job ends
(`say_broken`): its connections close, the peers' collective raises at once, and each peer's
row says the first rank's error, read from the store (or its job's controller ends it, with
the same error: backends/ranks.py). Where every rank failed on its own (`every_rank_failed`),
none waits for another, and the job goes on.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger(__name__)

KEY = "harness/failed/{}"
RANK_KEY = "harness/failed/{}/rank{}"
"""Set by each rank that failed a rung of the point."""
EVERY_RANK_WAIT_S = 2.0
"""How long a rank that failed waits, after its point, for the other ranks to say a failure
of their own (a data set broken on every rank fails them all within a step of each other)."""

FAILED_FIRST = "failed first: "
"""In a peer's row: `rank 1 failed first: ValueError: ...`."""


def told(point_id: str, rank: int, error: str) -> str:
    """This rank's rung of a distributed point failed with `error`: said in the store unless a
    rank said its own first. The error this rank's row keeps: its own where it was first, else
    the first rank's (`rank K failed first: <its error>`)."""
    store = _store()
    if store is None:
        return error
    mine = f"rank {rank}: {error}"
    try:
        store.set(RANK_KEY.format(point_id, rank), "1")
        first = store.compare_set(KEY.format(point_id), "", mine)
    except Exception as e:  # the store's host (rank 0) gone: this rank's own error stands
        log.debug("cannot tell the other ranks of the failure: %s", e)
        return error
    first = first.decode() if isinstance(first, bytes) else str(first)
    if first == mine or not first.startswith("rank "):
        return error
    who, _, theirs = first.partition(": ")
    return f"{who} {FAILED_FIRST}{theirs}"


def every_rank_failed(point_id: str, world_size: int, wait_s: float = EVERY_RANK_WAIT_S) -> bool:
    """Whether every rank of the point has said a failure of its own (`told`), waiting up to
    `wait_s` for the last ones: then none waits in a collective for another. False where the
    store cannot say."""
    store = _store()
    if store is None:
        return False
    keys = [RANK_KEY.format(point_id, rank) for rank in range(world_size)]
    deadline = time.monotonic() + wait_s
    try:
        while not store.check(keys):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    except Exception as e:
        log.debug("cannot read the other ranks' failures: %s", e)
        return False
    return True


def _store() -> Any:
    """The point's process group's store (private: torch's default group's own), None where
    there is none."""
    try:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d

        if not dist.is_initialized():
            return None
        return distributed_c10d._get_default_store()
    except Exception as e:
        log.debug("no store to tell the other ranks in: %s", e)
        return None
