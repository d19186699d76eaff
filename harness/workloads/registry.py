"""The built-in datasets and models (their names: harness_schema/workload_names.py), and loading of a
user's `package.module:factory`.

The tables hold import paths, not objects, so that validating a spec does not import torch
until a factory is actually needed. What a built-in accepts is kept here as data too
(BUILTIN_PARAMETERS, UINT8_DATASETS, BYTES_DATASETS), so that `harness plan` and `submit` check a spec's
arguments without importing torch or torchvision (seconds on a login node); a test holds the
data equal to the real signatures. A user's own factory is imported to be checked.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

# The names themselves are the shared schema's (settings' rules check them); resolve() and
# the callers that pass a table to it read them here.
from harness_schema.workload_names import DATASETS as DATASETS
from harness_schema.workload_names import MODELS as MODELS
from harness_schema.workload_names import is_factory_path

EMULATED_STEP_MS = 60.0
"""The emulated model's step when model_args gives none (harness/workloads/emulated.py); here,
torch-free, so that `harness plan` can price an emulated sweep."""

BUILTIN_PARAMETERS: dict[str, tuple[tuple[str, bool], ...]] = {
    # name -> its keyword-only parameters, each (name, has a default), in signature order
    "fake_cifar": (
        ("size", True),
        ("image_size", True),
        ("resize", True),
        ("num_classes", True),
        ("seed", True),
        ("read_ms", True),
        ("stall_ms", True),
        ("stall_probability", True),
    ),
    "starved": (
        ("size", True),
        ("input_size", True),
        ("crop", True),
        ("mask_ratio", True),
        ("num_classes", True),
    ),
    "image_folder": (
        ("root", False),
        ("image_size", True),
        ("augment", True),
        ("page_cache", True),
        ("store_rate", True),
    ),
    "image_shards": (("root", False), ("image_size", True), ("augment", True), ("page_cache", True)),
    "resnet18": (("num_classes", False),),
    "resnet50": (("num_classes", False),),
    "toy_conv": (("num_classes", False), ("width", True), ("depth", True)),
    "linear": (("num_classes", False), ("pool", True)),
    "emulated": (("num_classes", False), ("step_ms", True)),
}

UINT8_DATASETS: frozenset[str] = frozenset({"fake_cifar", "image_folder", "image_shards"})
"""The built-in datasets that have a to_uint8() method (what gpu_normalize needs)."""

BYTES_DATASETS: frozenset[str] = frozenset({"image_folder", "image_shards"})
"""The built-in datasets with read_bytes() and decode() (what the raw_bytes rung needs)."""


class WorkloadError(RuntimeError):
    """A factory failed or returned the wrong thing; the message names which and why. Here, not
    in build.py, so that loader_factory.py (which build.py imports) raises it too."""


class FactoryError(ValueError):
    """A dataset or model name that cannot be turned into a factory; the message says why."""


def resolve(name: str, table: Mapping[str, str], kind: str) -> Callable[..., Any]:
    """The factory for a registered name or a "package.module:factory" path."""
    target = table.get(name)
    if target is None:
        if not is_factory_path(name):
            raise FactoryError(
                f"unknown {kind} {name!r}; expected one of {', '.join(sorted(table))} "
                f'or "package.module:factory"'
            )
        target = name
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # a user's module may raise anything while importing
        raise FactoryError(f"cannot import {module_name!r}: {type(e).__name__}: {e}") from e
    factory: Any = module
    walked = module_name
    # An attribute path after the colon (a class's classmethod: `datasets:Dataset.from_dict`),
    # walked one name at a time so that the one missing is the one named.
    for i, part in enumerate(attr.split(".")):
        found = getattr(factory, part, None)
        if found is None:
            what = "callable" if "." not in attr else "attribute"
            raise FactoryError(f"{walked!r} has no {what} {part!r}")
        factory, walked = found, f"{walked}{':' if i == 0 else '.'}{part}"
    if not callable(factory):
        raise FactoryError(f"{walked!r} is not callable (a {type(factory).__name__})")
    return factory


def builtin_signature(name: str) -> inspect.Signature:
    """The signature of a built-in factory, from BUILTIN_PARAMETERS: nothing imported."""
    return inspect.Signature(
        [
            inspect.Parameter(
                param,
                inspect.Parameter.KEYWORD_ONLY,
                default=None if has_default else inspect.Parameter.empty,
            )
            for param, has_default in BUILTIN_PARAMETERS[name]
        ]
    )


def check_builtin(name: str, table: Mapping[str, str], kind: str, args: Mapping[str, Any]) -> None:
    """check_arguments for a name of `table`, without importing its factory."""
    if name not in table:
        raise FactoryError(f"{name!r} is not a built-in {kind}")
    check_arguments(builtin_signature(name), args)


def check_arguments(factory: Callable[..., Any] | inspect.Signature, args: Mapping[str, Any]) -> None:
    """Raise FactoryError if `factory(**args)` would not bind, naming the accepted arguments."""
    if isinstance(factory, inspect.Signature):
        signature = factory
    else:
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):
            return  # builtins without a signature: let the call itself decide
    try:
        signature.bind(**args)
    except TypeError as e:
        accepted = [
            p.name
            for p in signature.parameters.values()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        raise FactoryError(f"{e}; accepted: {', '.join(accepted) or 'none'}") from e


PIPELINE_CALLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # field -> (the positional arguments, the keyword arguments) the harness passes to the
    # factory, before the spec's `<field>_args` (docs/guides/own-workload.md).
    "collate": ((), ()),  # factory(**collate_args) -> collate_fn(list of samples) -> batch
    "sampler": (("dataset",), ("rank", "world_size", "seed")),  # -> Sampler
    "batch_sampler": (("dataset",), ("batch_size", "drop_last", "rank", "world_size", "seed")),
    "loss": ((), ()),  # factory(**loss_args) -> loss_fn(output, batch) -> scalar tensor
    "step": (("model",), ("device",)),  # -> step_fn(batch): forward, loss, backward, optimizer
    "batch_samples": (("batch",), ()),  # the function itself, called on every batch
}
"""How the harness calls each factory of a user's pipeline (workload.<field>)."""

PIPELINE_FIELDS: tuple[str, ...] = tuple(PIPELINE_CALLS)


def check_pipeline_call(field: str, factory: Callable[..., Any], args: Mapping[str, Any]) -> None:
    """Raise FactoryError unless `factory` accepts what the harness passes it plus `args`."""
    positional, keywords = PIPELINE_CALLS[field]
    taken = sorted(set(args) & set(keywords))
    if taken:
        raise FactoryError(
            f"{', '.join(taken)} {'is' if len(taken) == 1 else 'are'} passed by the harness "
            f"(the point's own); remove {'it' if len(taken) == 1 else 'them'} from {field}_args"
        )
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # builtins without a signature: let the call itself decide
    placeholders = dict.fromkeys(keywords)
    try:
        signature.bind(*(None for _ in positional), **placeholders, **args)
    except TypeError as e:
        shown = [*positional, *(f"{k}=" for k in keywords), f"**{field}_args"]
        expected = "batch" if field == "batch_samples" else ", ".join(shown)
        raise FactoryError(f"{e}; the harness calls it as ({expected})") from e


def accepts(factory: Callable[..., Any], name: str) -> bool:
    """Whether `factory` takes a keyword argument `name` (by name, or through **kwargs)."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        (p.name == name and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)) or p.kind is p.VAR_KEYWORD
        for p in parameters
    )
