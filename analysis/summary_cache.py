"""A sweep's summary and recommendations kept beside its consolidated rows
(consolidated-summary-<by>.parquet), so that a report made again on rows that did not change
neither aggregates them nor judges every point again (issue #36: summarize and recommend were
half of a report on 100,000 points; a report runs in a loop while a sweep fills, and once per
format after it ends).

The summary of a sweep's points (analysis.aggregate.summarize: a row per group, point and rung)
depends on the sweep's rows alone and on the groups they fall in, and its recommendations
(analysis.grid.recommend: a group's within a sweep) on its summary alone: so the summaries and
recommendations of the sweeps one after the other are those of all the rows at once (tests
check it). A report summarizes each consolidated sweep on its own, and takes its summary and
the lines of its recommendations from its file where the key kept there is the key of the rows
it holds now:

- the sweep's folder, and its rank files, each with its size and modification time when the
  report read it (analysis/cells.py): a file rewritten, added or gone (a resume, a sweep still
  filling) gives another key, and its rows are summarized: never a stale figure;
- the columns of the rows and their types (typed over every sweep of a report: an integer
  column is float where another sweep has a blank);
- each row's group and node type (`--by gpu` takes them from the meta files);
- the code that reads, types, summarizes and judges rows (every module of analysis/ and
  harness_schema/) and the versions of Python, pandas, numpy and pyarrow.

Like the consolidated rows it is never wrong, only of use or not, and safe to delete. It is
written for the sweeps that are consolidated (listed whole, consolidated.MIN_FILES rank files or
more) where the folder is writable, and only where the summary reads back as it was made, every
value and type (analysis/exact_frame.py); sweeps without one are summarized together, as before.
A report that draws plots (HTML, --plots) judges every sweep again: the plots need more of a
recommendation than its lines.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import harness_schema
from analysis import aggregate, exact_frame
from analysis.consolidated import write_parquet
from analysis.grid.recommend import Recommendation, recommend

log = logging.getLogger(__name__)

FILE = "consolidated-summary-{by}.parquet"
VERSION = 1
_KEY = b"pipeline-harness"


def path_of(sweep_dir: str | Path, by: str) -> Path:
    return Path(sweep_dir) / FILE.format(by=by)


@dataclass(frozen=True, slots=True)
class Said:
    """A recommendation as the text of a report says it: what the text formats print of one
    (analysis.grid.recommend.render_recommendations), kept with its sweep's summary."""

    group: str
    sweep_dir: str
    heading: str
    said: tuple[str, ...]

    def title(self) -> str:
        return self.heading

    def lines(self) -> list[str]:
        return list(self.said)


@dataclass(slots=True)
class Summaries:
    """A report's summary, and what of it was kept or is to keep, per sweep."""

    summary: pd.DataFrame
    said: dict[str, list[Said]] = field(default_factory=dict)
    """Per sweep taken from its file: its recommendations, as said."""
    made: dict[str, tuple[str, pd.DataFrame]] = field(default_factory=dict)
    """Per sweep of a key summarized now: the key, and its summary (kept with its recommendations)."""
    by: str = "node"


def summarize(
    rows: pd.DataFrame, by: str = "node", meta: pd.DataFrame | None = None, *, keys: dict[str, str]
) -> Summaries:
    """aggregate.summarize(rows, by, meta), each sweep of `keys` (analysis.load.Loaded.file_keys:
    per consolidated sweep, what its rows were read from) taken from its file where it was made
    from the same rows, else made (and kept by `recommendations`); the others summarized together."""
    if not keys or not (rows["status"] == "ok").any():
        return Summaries(aggregate.summarize(rows, by=by, meta=meta), by=by)
    grouped = aggregate.with_groups(rows, by, meta)
    codes, sweeps = pd.factorize(grouped["sweep_dir"])
    starts = (np.flatnonzero(np.diff(codes)) + 1).tolist()
    if len(starts) != len(sweeps) - 1 or not any(s in keys for s in sweeps):
        # A sweep's rows apart (files of two harness versions' headers), or none kept: at once.
        return Summaries(aggregate.summarize_grouped(grouped), by=by)
    bounds = list(zip([0, *starts], [*starts, len(codes)], strict=True))
    out = Summaries(pd.DataFrame(), by=by)
    parts: dict[str, pd.DataFrame] = {}
    rest = [n for n, sweep in enumerate(sweeps) if sweep not in keys]
    if rest:  # summarized together: many small sweeps cost one summary, not one each
        together = pd.concat([grouped.iloc[slice(*bounds[n])] for n in rest])
        if (together["status"] == "ok").any():
            made = aggregate.summarize_grouped(together)
            parts.update(dict(iter(made.groupby("sweep_dir", sort=False))))
    for n, sweep in enumerate(sweeps):
        part = grouped.iloc[slice(*bounds[n])]
        if sweep not in keys or not (part["status"] == "ok").any():
            continue  # a sweep without an ok row has no point to summarize, as at once
        key = _key(part, str(sweep), keys[sweep], by)
        held = _read(str(sweep), by, key)
        if held is None:
            parts[sweep] = aggregate.summarize_grouped(part)
            out.made[str(sweep)] = (key, parts[sweep])
        else:
            parts[sweep], out.said[str(sweep)] = held
    ordered = [parts[s] for s in sweeps if s in parts]
    out.summary = (
        pd.concat(ordered, ignore_index=True) if len(ordered) > 1 else ordered[0].reset_index(drop=True)
    )
    return out


def recommendations(summaries: Summaries, *, said: bool = True) -> Sequence[Recommendation | Said]:
    """recommend(summary): with `said` (a report of text alone), the sweeps' taken from their
    files as said, the others made; without, all made. Each sweep summarized now is kept with
    its recommendations' lines."""
    summary = summaries.summary
    kept = summaries.said if said else {}
    made = recommend(summary[~summary["sweep_dir"].isin(list(kept))] if kept else summary)
    for sweep, (key, part) in summaries.made.items():
        mine = [Said(r.group, sweep, r.title(), tuple(r.lines())) for r in made if r.sweep_dir == sweep]
        _write(sweep, summaries.by, key, part, mine)
    if not kept:
        return made
    # In recommend's order: by group, then sweep (its groupby's sorted keys).
    every: list[Recommendation | Said] = [*made, *(s for lines in kept.values() for s in lines)]
    return sorted(every, key=lambda r: (r.group, r.sweep_dir))


def _key(rows: pd.DataFrame, sweep: str, files: str, by: str) -> str:
    """What the sweep's summary is made from (the module's list), as one digest."""
    digest = hashlib.sha256()
    for text in (str(VERSION), code_version(), by, sweep, files):
        digest.update(text.encode() + b"\0")
    digest.update(repr([(str(c), str(t)) for c, t in rows.dtypes.items()]).encode() + b"\0")
    for column in ("group", "node_type"):
        digest.update("\0".join(map(str, rows[column].tolist())).encode() + b"\1")
    return digest.hexdigest()


@functools.cache
def code_version() -> str:
    """A digest of every module of analysis/ and harness_schema/, and of the versions of Python
    and the libraries that compute the figures: another of either makes every summary again."""
    digest = hashlib.sha256()
    for package in (Path(aggregate.__file__).parent, Path(harness_schema.__file__).parent):
        for path in sorted(package.rglob("*.py")):
            digest.update(path.relative_to(package.parent).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    digest.update(f"{sys.version}|{pd.__version__}|{np.__version__}|{pa.__version__}".encode())
    return digest.hexdigest()


def _read(sweep: str, by: str, key: str) -> tuple[pd.DataFrame, list[Said]] | None:
    """The summary and recommendations kept for `key`; None where there are none, or they were
    made from other rows."""
    path = path_of(sweep, by)
    try:
        meta = json.loads((pq.read_schema(path).metadata or {})[_KEY])
        if meta.get("version") != VERSION or meta.get("key") != key:
            return None
        said = [Said(g, sweep, t, tuple(lines)) for g, t, lines in meta["said"]]
        return exact_frame.from_table(pq.read_table(path), meta["kinds"]), said
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as e:
        log.debug("%s: not used (%s); the sweep is summarized", path, e)
        return None


def _write(sweep: str, by: str, key: str, summary: pd.DataFrame, said: list[Said]) -> bool:
    """Keep the summary and recommendations for `key`, only where the summary reads back as it
    is (else False)."""
    encoded = exact_frame.to_table(summary)
    if encoded is None or not exact_frame.same(exact_frame.from_table(*encoded), summary):
        log.debug("%s: the summary does not keep exactly; not written", path_of(sweep, by))
        return False
    table, kinds = encoded
    meta = {
        "version": VERSION,
        "key": key,
        "kinds": kinds,
        "said": [[s.group, s.heading, s.said] for s in said],
    }
    return write_parquet(path_of(sweep, by), table, meta)
