"""A sweep's summary kept beside its consolidated rows (consolidated-summary-<by>.parquet), so
that a report made again on rows that did not change does not aggregate them again (issue #36:
summarize was a fourth of a report on 100,000 points; a report runs in a loop while a sweep
fills, and once per format after it ends).

The summary of a sweep's points (analysis.aggregate.summarize: a row per group, point and rung)
depends on the sweep's rows alone and on the groups they fall in, so the summaries of the
sweeps one after the other are the summary of all the rows at once (a test checks it). A report
summarizes each consolidated sweep on its own, and takes its summary from its file where the
key kept in the file is the key of the rows it holds now:

- the sweep's folder, and its rank files, each with its size and modification time when the
  report read it (analysis/cells.py): a file rewritten, added or gone (a resume, a sweep still
  filling) gives another key, and its rows are summarized: never a stale figure;
- the columns of the rows and their types (typed over every sweep of a report: an integer
  column is float where another sweep has a blank);
- each row's group and node type (`--by gpu` takes them from the meta files);
- the code that reads, types and summarizes rows (every module of analysis/ and
  harness_schema/) and the versions of Python, pandas, numpy and pyarrow.

Like the consolidated rows it is never wrong, only of use or not, and safe to delete. It is
written for the sweeps that are consolidated (listed whole, consolidated.MIN_FILES rank files or
more) where the folder is writable, and only where it reads back as it was made, every value
and type; sweeps without one are summarized together, as before.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import sys
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import harness_schema
from analysis import aggregate
from analysis.consolidated import write_parquet

log = logging.getLogger(__name__)

FILE = "consolidated-summary-{by}.parquet"
VERSION = 1
_KEY = b"pipeline-harness"
_STRING = "pandas-string:"
_PLAIN = (str, int, float, bool, type(None))
"""The values an object column may hold to be kept (as JSON), and tuples of them."""


def path_of(sweep_dir: str | Path, by: str) -> Path:
    return Path(sweep_dir) / FILE.format(by=by)


def summarize(
    rows: pd.DataFrame, by: str = "node", meta: pd.DataFrame | None = None, *, keys: dict[str, str]
) -> pd.DataFrame:
    """aggregate.summarize(rows, by, meta), each sweep of `keys` (analysis.load.Loaded.file_keys:
    per consolidated sweep, what its rows were read from) taken from its file where it was made
    from the same rows, else made and kept; the other sweeps summarized together."""
    if not keys or not (rows["status"] == "ok").any():
        return aggregate.summarize(rows, by=by, meta=meta)
    grouped = aggregate.with_groups(rows, by, meta)
    codes, sweeps = pd.factorize(grouped["sweep_dir"])
    starts = (np.flatnonzero(np.diff(codes)) + 1).tolist()
    if len(starts) != len(sweeps) - 1 or not any(s in keys for s in sweeps):
        # A sweep's rows apart (files of two harness versions' headers), or none kept: at once.
        return aggregate.summarize_grouped(grouped)
    bounds = list(zip([0, *starts], [*starts, len(codes)], strict=True))
    parts: dict[str, pd.DataFrame] = {}
    rest = [n for n, sweep in enumerate(sweeps) if sweep not in keys]
    if rest:  # summarized together: many small sweeps cost one summary, not one each
        together = pd.concat([grouped.iloc[slice(*bounds[n])] for n in rest])
        if (together["status"] == "ok").any():
            made = aggregate.summarize_grouped(together)
            parts.update(dict(iter(made.groupby("sweep_dir", sort=False))))
    for n, sweep in enumerate(sweeps):
        if sweep not in keys:
            continue
        part = grouped.iloc[slice(*bounds[n])]
        if not (part["status"] == "ok").any():
            continue  # no point of it to summarize, as at once
        key = _key(part, str(sweep), keys[sweep], by)
        summary = _read(str(sweep), by, key)
        if summary is None:
            summary = aggregate.summarize_grouped(part)
            _write(str(sweep), by, key, summary)
        parts[sweep] = summary
    ordered = [parts[s] for s in sweeps if s in parts]
    return pd.concat(ordered, ignore_index=True) if len(ordered) > 1 else ordered[0].reset_index(drop=True)


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


def _read(sweep: str, by: str, key: str) -> pd.DataFrame | None:
    """The summary kept for `key`; None where there is none, or it was made from other rows."""
    path = path_of(sweep, by)
    try:
        meta = json.loads((pq.read_schema(path).metadata or {})[_KEY])
        if meta.get("version") != VERSION or meta.get("key") != key:
            return None
        return _decode(pq.read_table(path), meta["kinds"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as e:
        log.debug("%s: not used (%s); the sweep is summarized", path, e)
        return None


def _write(sweep: str, by: str, key: str, summary: pd.DataFrame) -> bool:
    """Keep the summary for `key`, only where it reads back as it is (else False)."""
    encoded = _encode(summary)
    if encoded is None or not same(_decode(*encoded), summary):
        log.debug("%s: the summary does not keep exactly; not written", path_of(sweep, by))
        return False
    table, kinds = encoded
    return write_parquet(path_of(sweep, by), table, {"version": VERSION, "key": key, "kinds": kinds})


def _encode(frame: pd.DataFrame) -> tuple[pa.Table, dict[str, str]] | None:
    """The frame as a table, with each column's kind: a numpy dtype, "str" (text), "json" (any
    other object column of _PLAIN values and tuples of them); None where a column is none of these."""
    arrays, kinds = [], {}
    for name in frame.columns:
        values = frame[name]
        dtype = values.dtype
        if not isinstance(name, str):
            return None
        if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            arrays.append(pa.array(values.to_numpy()))
            kinds[name] = dtype.str
        elif isinstance(dtype, pd.StringDtype):  # pandas 3's text (the group keys)
            arrays.append(pa.array(values.tolist(), pa.string(), from_pandas=True))
            kinds[name] = f"{_STRING}{dtype.storage}:{'nan' if dtype.na_value is not pd.NA else 'NA'}"
        elif isinstance(dtype, np.dtype) and dtype.kind == "O":
            items = values.tolist()
            if all(type(v) is str for v in items):
                arrays.append(pa.array(items, pa.string()))
                kinds[name] = "str"
            elif (kind := _tuple_kind(items)) is not None:  # each point's runs: a list per row
                flat = [v for item in items for v in item]
                offsets = np.cumsum([0, *map(len, items)], dtype=np.int32)
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, _TUPLES[kind])))
                kinds[name] = kind
            elif all(map(_plain, items)):
                arrays.append(pa.array([json.dumps(v) for v in items], pa.string()))
                kinds[name] = "json"
            else:
                return None
        else:
            return None
    return pa.table(arrays, names=list(frame.columns)), kinds


_TUPLES = {"tuple-float": pa.float64(), "tuple-str": pa.string()}
"""Object columns of tuples kept as lists: floats (each point's runs' figures), and text or
None (their passes)."""


def _tuple_kind(items: list[Any]) -> str | None:
    """The _TUPLES kind of a column of tuples, where every tuple holds floats, or text and None."""
    if not all(type(v) is tuple for v in items):
        return None
    types = {type(v) for item in items for v in item}
    if types <= {float}:
        return "tuple-float"
    return "tuple-str" if types <= {str, type(None)} else None


def _plain(value: Any) -> bool:
    return type(value) in _PLAIN or (type(value) is tuple and all(map(_plain, value)))


def _decode(table: pa.Table, kinds: dict[str, str]) -> pd.DataFrame:
    columns: dict[str, pd.Series] = {}
    for name in table.column_names:
        kind, column = kinds[name], table.column(name)
        if kind.startswith(_STRING):
            storage, na = kind[len(_STRING) :].split(":")
            dtype = pd.StringDtype(storage, na_value=np.nan if na == "nan" else pd.NA)  # type: ignore[call-arg]
            columns[name] = pd.Series(column.to_pylist(), dtype=dtype)
        elif kind == "str":
            # Through the column's distinct values: a setting's column holds few of them.
            encoded = column.combine_chunks().dictionary_encode()
            values = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
            columns[name] = pd.Series(values[encoded.indices.to_numpy()], dtype=object)
        elif kind in _TUPLES:
            lists = column.combine_chunks()
            sizes = np.diff(lists.offsets.to_numpy()).tolist()
            values = lists.values
            flat = values.to_numpy().tolist() if kind == "tuple-float" else values.to_pylist()
            rest = iter(flat)
            columns[name] = pd.Series([tuple(islice(rest, n)) for n in sizes], dtype=object)
        elif kind == "json":
            # One parse of the whole column: a call per cell was most of the reading.
            parsed = json.loads("[" + ",".join(column.to_pylist()) + "]")
            columns[name] = pd.Series([_tuples(v) for v in parsed], dtype=object)
        else:
            columns[name] = pd.Series(column.to_numpy().astype(np.dtype(kind), copy=False))
    return pd.DataFrame(columns)


def _tuples(value: Any) -> Any:
    """JSON's arrays back as the tuples they were (a summary holds no lists)."""
    return tuple(_tuples(v) for v in value) if type(value) is list else value


def same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """The same columns, index, dtypes, and every value of the same type and bits (NaN equal to
    NaN, -0.0 apart from 0.0): stricter than pandas.testing, which takes None for NaN."""
    if list(a.columns) != list(b.columns) or type(a.index) is not type(b.index):
        return False
    if not a.index.equals(b.index):
        return False
    for name in a.columns:
        x, y = a[name], b[name]
        if x.dtype != y.dtype:
            return False
        if isinstance(x.dtype, np.dtype) and x.dtype.kind in "biuf":
            if x.to_numpy().tobytes() != y.to_numpy().tobytes():
                return False
        elif not all(map(_same_value, x.tolist(), y.tolist())):
            return False
    return True


def _same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(map(_same_value, a, b))
    if type(a) is float:
        return repr(a) == repr(b) or (math.isnan(a) and math.isnan(b))
    return bool(a == b)
