"""A DataFrame in a Parquet file exactly: every column's dtype, and every value of its type and
bits (a summary's tuples of runs, its text, its NaN), or not at all (to_table says None).

Apart from the summary kept (analysis/summary_cache.py): what keeps a frame exactly is a
question of pandas' and pyarrow's types alone, and `same` is the check a kept frame must pass.
"""

from __future__ import annotations

import json
import math
from itertools import islice
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

_STRING = "pandas-string:"
_PLAIN = (str, int, float, bool, type(None))
"""The values an object column may hold to be kept as JSON, and tuples of them."""


def to_table(frame: pd.DataFrame) -> tuple[pa.Table, dict[str, str]] | None:
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


def from_table(table: pa.Table, kinds: dict[str, str]) -> pd.DataFrame:
    columns: dict[str, pd.Series] = {}
    for name in table.column_names:
        kind, column = kinds[name], table.column(name)
        if kind.startswith(_STRING):
            storage, na = kind[len(_STRING) :].split(":")
            dtype = pd.StringDtype(storage, na_value=np.nan if na == "nan" else pd.NA)
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
