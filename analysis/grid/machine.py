"""What the machine the points ran on says about their figures: shared with other work during
the windows (the samplers' foreign_cpu_share), or workers that delivered no batch."""

from __future__ import annotations

import pandas as pd

from analysis.ladder.verdict_text import SHARD_FIX

SHARED = 0.10
"""Other processes took this share of the ranks' CPUs during the windows, or more: the
recommendation says the machine was shared (an idle machine's own daemons take ~1 %)."""


def shared_machine(rows: pd.DataFrame) -> list[str]:
    """One line where other processes held the ranks' CPUs during the windows (the samplers'
    foreign_cpu_share, over all the windows of these points), else none."""
    if "foreign_cpu_share" not in rows:
        return []
    share, weight = rows["foreign_cpu_share"], rows["training_time"] * rows["runs"]
    known = share.notna() & weight.notna() & (weight > 0)
    if not known.any():
        return []
    mean = float((share[known] * weight[known]).sum() / weight[known].sum())
    top = share[known].idxmax()
    if mean < SHARED and share[top] < 2 * SHARED:
        return []
    most = f" (up to {share[top]:.0%}, in {rows.loc[top, 'jobid']}'s)" if share[top] - mean >= SHARED else ""
    return [
        f"the machine was shared: other processes used {mean:.0%} of its CPU during the windows{most}; "
        "figures may read slow and the ranking move"
    ]


def idle_workers(rows: pd.DataFrame) -> list[str]:
    """One line where some points' workers delivered no batch (idle_workers: a stream with
    fewer shards than workers, or an epoch with fewer batches), else none. Those points ran on
    fewer workers than their num_workers says: a point is never to be preferred for its extra
    workers, which did nothing; a stream's answer is more shards, not more workers."""
    if "idle_workers" not in rows:
        return []
    idle = pd.to_numeric(rows["idle_workers"], errors="coerce")
    if not (idle > 0).any():  # the common case, without a copy of the group's rows
        return []
    hit = rows[idle > 0]
    named = ", ".join(
        f"{row['jobid']} ({int(count)} of num_workers={int(row['num_workers'])})"
        for (_, row), count in zip(hit.iterrows(), idle[idle > 0], strict=True)
    )
    return [
        f"workers that delivered no batch: {named}: these ran on fewer workers than they say, and "
        "their idle workers gain nothing; a stream with fewer shards than workers needs more "
        f"shards, not more workers ({SHARD_FIX})"
    ]
