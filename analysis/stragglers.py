"""Stragglers: a rank, or a node, much slower than its peers on the same point.

The rule (RULE is printed with the flags): a rank straggles when its training_time (median over
repeats) exceeds the median of the other ranks of its run by more than 10 % and by more than
the spread over repeats (the largest max - min of any of those ranks). A node straggles by the
same rule, with the node's slowest rank, against the other nodes that measured the same point
(of the same type): the nodes of one multi-node run, or separate runs of the point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.tables import add_nodes

THRESHOLD = 0.10
RULE = (
    "a rank (node) straggles when its training_time, median over repeats, is more than 10% above "
    "the median of the other ranks of its run (other nodes on the same point) and by more than "
    "the spread over repeats"
)


@dataclass(frozen=True, slots=True)
class Straggler:
    kind: str
    """rank or node."""
    sweep_dir: str
    point_id: str
    rung: str
    who: str
    time: float
    others: float

    @property
    def excess(self) -> float:
        return self.time / self.others - 1

    def line(self) -> str:
        sweep = "/".join(self.sweep_dir.replace("\\", "/").rstrip("/").split("/")[-2:])
        return (
            f"{sweep} point {self.point_id} ({self.rung}): {self.who} took {self.time:.3f} s, "
            f"the other {self.kind}s {self.others:.3f} s (+{self.excess:.0%})"
        )


def find_stragglers(rows: pd.DataFrame) -> list[Straggler]:
    ok = rows[(rows["status"] == "ok") & rows["training_time"].notna()]
    if ok.empty:
        return []
    if "node" not in ok.columns:
        ok = add_nodes(ok)
    found = _ranks(ok) + _nodes(ok)
    return sorted(found, key=lambda s: (s.sweep_dir, s.point_id, s.rung, s.kind, s.who))


def _ranks(ok: pd.DataFrame) -> list[Straggler]:
    peers = ["sweep_dir", "point_id", "rung", "node"]
    multi = ok[ok.groupby(peers, sort=False)["rank"].transform("nunique") > 1]
    if multi.empty:
        return []
    per_rank = (
        multi.groupby([*peers, "rank"], sort=False)
        .agg(
            time=("training_time", "median"),
            low=("training_time", "min"),
            high=("training_time", "max"),
            host=("hostname", "first"),
        )
        .reset_index()
    )
    return _flag(per_rank, peers, "rank", lambda r: f"rank {int(r.rank)} on {r.host}")


def _nodes(ok: pd.DataFrame) -> list[Straggler]:
    # The node's time in each run is its slowest rank; then the median over repeats.
    per_run = (
        ok.groupby(["sweep_dir", "point_id", "rung", "node_type", "node", "hostname", "repeat"], sort=False)[
            "training_time"
        ]
        .max()
        .reset_index()
    )
    peers = ["sweep_dir", "point_id", "rung", "node_type"]
    per_run = per_run[per_run.groupby(peers, sort=False)["hostname"].transform("nunique") > 1]
    if per_run.empty:
        return []
    per_host = (
        per_run.groupby([*peers, "hostname"], sort=False)
        .agg(
            time=("training_time", "median"),
            low=("training_time", "min"),
            high=("training_time", "max"),
        )
        .reset_index()
    )
    return _flag(per_host, peers, "node", lambda r: f"node {r.hostname}")


def _flag(table: pd.DataFrame, peers: list[str], kind: str, who: Callable[[Any], str]) -> list[Straggler]:
    found = []
    for _, group in table.groupby(peers, sort=False):
        times = group["time"].to_numpy(dtype=float)
        noise = float(np.nanmax(group["high"].to_numpy(dtype=float) - group["low"].to_numpy(dtype=float)))
        for i, row in enumerate(group.itertuples(index=False)):
            others = float(np.median(np.delete(times, i)))
            excess = times[i] - others
            if others > 0 and excess > THRESHOLD * others and excess > noise:
                found.append(
                    Straggler(
                        kind=kind,
                        sweep_dir=str(row.sweep_dir),
                        point_id=str(row.point_id),
                        rung=str(row.rung),
                        who=who(row),
                        time=float(times[i]),
                        others=others,
                    )
                )
    return found
