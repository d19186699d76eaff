"""How the harness names a user's object in its messages: by its class and the module that
defines it (`mypkg.data.Shards`, `mylib.tokenization.BatchEncoding`), so that a class named
like one of PyTorch's (`IterableDataset`) or a common name (`Dataset`, `Batch`) says whose it
is. Python's own types keep their short names (`tuple`, `dict`)."""

from __future__ import annotations


def type_name(value: object) -> str:
    """`value`'s class with its module: `module.QualName`; `tuple` for a builtin's."""
    cls = type(value)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"
