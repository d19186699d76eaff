"""Sizes as an axis on a real Slurm cluster (see conftest): slurm.nodes: [1, 2] submitted as an
array per size, one after the other, read from one shared store of a known ceiling; the report
names where it gives way."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.load import load_results
from tests.harness.workloads.test_shared_store import judged, store_scan
from tests.slurm.conftest import harness, sweep_of

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]


@pytest.mark.serial
def test_nodes_one_and_two_run_as_two_arrays_and_the_report_names_the_stores_knee(tmp_path: Path) -> None:
    """Two ranks a node: a store of 150 reads a second feeds 2 ranks (1 node), not 4 (2 nodes)."""
    spec = store_scan(tmp_path, "[1, 2]", tasks=2)
    out = harness("submit", str(spec), "--wait", cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    sweep = sweep_of(out, tmp_path)
    rows = load_results([sweep]).rows
    hosts = rows.groupby("world_size")["hostname"].agg(lambda h: sorted(set(h)))
    assert hosts[2] in (["n1"], ["n2"]) and hosts[4] == ["n1", "n2"]  # 1 node, then 2
    arrays = {job.split("_")[0] for job in rows["jobid"]}
    assert len(arrays) == 2  # one array per size
    assert "point(s) as 2 job arrays, one per size, each after the one before: " in out.stdout
    assert "scaling: how many GPUs the input pipeline feeds" in out.stdout
    found = judged(sweep)
    limited, unlimited = found["limited"], found["unlimited"]
    assert limited.knee == (2, 4) and limited.who == "storage", limited.falls
    assert "storage gives way between 1 node and 2 nodes" in out.stdout
    assert unlimited.who in (None, "the step"), unlimited.falls  # never the store (test_shared_store.py)
