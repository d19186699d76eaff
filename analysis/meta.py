"""Read each point's `meta-rank<k>.json` (the host, the GPU model and count, the versions) for
the rows a report loaded, through the sweep's consolidated meta file where it has one.

Apart from the rows (analysis/load.py): the meta files are another file of each point, read
where a report groups the rows by node type (add_nodes, analysis/aggregate.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import consolidated
from analysis.consolidated import HeldMeta

META_FILE = "meta-rank{rank}.json"

META_COLUMNS = (
    "meta_hostname",
    "device_name",
    "gpu_count",
    "torch_version",
    "cuda_version",
    "python_version",
    "git_commit",
)
"""What load_meta() reads of meta-rank<k>.json: the host, the device and the versions."""


def load_meta(
    rows: pd.DataFrame, problems: list[str] | None = None, *, consolidated: bool = False
) -> pd.DataFrame:
    """`meta-rank<k>.json` of every (sweep dir, point, rank) in `rows`: one row each, with the
    host, GPU model and count, and versions. A missing file gives no row; a corrupt one is
    reported in `problems`. `consolidated`: take the bytes of the files unchanged since from
    their sweep's consolidated meta file (analysis/consolidated.py), and write it again where
    a sweep of MIN_FILES files or more had files to read (a report on 100,000 points opened
    every one of them)."""
    columns = ["sweep_dir", "point_id", "rank", *META_COLUMNS]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    keys = rows[["sweep_dir", "point_id", "rank"]].dropna().drop_duplicates()
    records = []
    held: dict[str, HeldMeta] = {}
    changed: dict[str, int] = {}  # sweep -> files read one by one
    parsed: dict[bytes, Any] = {}  # the points of a node share their meta's bytes: parsed once
    for sweep_dir, point_id, rank in keys.itertuples(index=False):
        name = META_FILE.format(rank=int(rank))
        relative = _join("points", _join(str(point_id), name))
        if consolidated and sweep_dir not in held:
            held[sweep_dir] = _held_meta(str(sweep_dir))
        try:
            data = _meta_bytes(str(sweep_dir), relative, held.get(sweep_dir), changed)
        except FileNotFoundError:
            continue
        except OSError as e:
            if problems is not None:
                problems.append(f"{e.filename}: unreadable ({type(e).__name__}: {e}); node type unknown")
            continue
        try:
            meta = parsed[data] if data in parsed else parsed.setdefault(data, json.loads(data))
        except ValueError as e:
            if problems is not None:
                path = _meta_path(str(sweep_dir), relative)
                problems.append(f"{path}: unreadable ({type(e).__name__}: {e}); node type unknown")
            continue
        if not isinstance(meta, dict):
            if problems is not None:
                problems.append(
                    f"{_meta_path(str(sweep_dir), relative)}: not a JSON object; node type unknown"
                )
            continue
        records.append(
            [
                sweep_dir,
                point_id,
                rank,
                str(meta.get("hostname", "")),
                str(meta.get("device_name", "") or ""),
                meta.get("gpu_count"),
                str(meta.get("torch_version", "") or ""),
                str(meta.get("cuda_version", "") or ""),
                str(meta.get("python_version", "") or ""),
                str(meta.get("git_commit", "") or ""),
            ]
        )
    for sweep_dir in changed:
        _write_meta(sweep_dir, held[sweep_dir])
    return pd.DataFrame(records, columns=columns)


def _held_meta(sweep_dir: str) -> HeldMeta:
    return consolidated.read_meta(Path(sweep_dir))


def _write_meta(sweep_dir: str, held: HeldMeta) -> None:
    """Consolidate the sweep's meta files where it has MIN_FILES of them or more."""
    if len(held) >= consolidated.MIN_FILES:
        consolidated.write_meta(Path(sweep_dir), held)


def _join(folder: str, relative: str) -> str:
    """os.path.join(folder, relative) for a relative path, without its checks (100,000 points)."""
    if os.sep != "/" or relative.startswith("/") or not folder or folder.endswith("/"):
        return os.path.join(folder, relative)
    return folder + "/" + relative


def _meta_path(sweep_dir: str, relative: str) -> Path:
    """The meta file's path: in its point folder, or the sweep folder's own where there is none
    (rows directly in a folder: tests, copies)."""
    path = Path(sweep_dir) / relative
    return path if path.parent.is_dir() else Path(sweep_dir) / os.path.basename(relative)


def _meta_bytes(sweep_dir: str, relative: str, held: HeldMeta | None, changed: dict[str, int]) -> bytes:
    """The bytes of the point's meta file (points/<id>/meta-rank<k>.json, or the sweep folder's
    own where there is no point folder): from `held` where its size and time are the same, else
    read (and put in `held`, counted in `changed`)."""
    path = _join(sweep_dir, relative)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.isdir(os.path.dirname(path)):
            raise
        return Path(sweep_dir, os.path.basename(relative)).read_bytes()  # rows directly in a folder
    if held is None:
        return Path(path).read_bytes()
    stamp = (st.st_size, st.st_mtime_ns)
    entry = held.get(relative)
    if entry is not None and entry[0] == stamp:
        return entry[1]
    data = Path(path).read_bytes()
    if len(data) == stamp[0]:  # not rewritten while read: else read again next time
        held[relative] = (stamp, data)
        changed[sweep_dir] = changed.get(sweep_dir, 0) + 1
    return data
