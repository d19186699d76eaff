"""`workload.loader`: a loader the user's factory builds whole, for the loaders that replace or
wrap PyTorch's DataLoader (a loader of threads, a DataModule's loader, a DataLoader subclass
of a streaming library's, a DALI-style iterator).

The harness calls `factory(**passed, **loader_args)`, where `passed` holds those of the point's
own values the factory's signature accepts (by name, or all of them through `**kwargs`), the
convention of a dataset factory's `num_classes`: `batch_size`, the loader settings
(`LOADER_SETTINGS`), the rank's place (`rank`, `world_size`, `seed`) and, where the spec gives
`workload.dataset`, the built `dataset`. What it returns is any iterable of batches; an object
that is not iterable is opened by the adapter that knows it (harness/adapters/: `train_loader`,
a DataModule as its library's trainer opens it, on several ranks with the sampler that trainer
would put in it).

A loader setting the factory does not accept cannot be applied by the harness: the plan says so
(`untaken_note`), an axis over it is refused at load time (its points would measure one loader
under several labels), and the rows record what the loader itself reports (a DataLoader's
attributes), else leave the cell empty: never the spec's value as if it had been applied.

Torch-free at import: the spec's check and the plan use it on a login node.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.workloads import registry
from harness_schema.settings import LOADER_COLUMNS

LOADER_SETTINGS: tuple[str, ...] = tuple(name for name in LOADER_COLUMNS if name != "non_blocking")
"""The loader settings a factory may take. `non_blocking` is not among them: it is the copy's,
and the harness makes the copy (its timed part of loading) whatever the loader is."""
PLACE: tuple[str, ...] = ("batch_size", "rank", "world_size", "seed")
PASSED: tuple[str, ...] = (*PLACE, *LOADER_SETTINGS, "dataset")
"""Every keyword the harness may pass to a loader factory, each only if the factory accepts it."""

DATASET_PLACE: tuple[str, ...] = ("batch_size", "rank", "world_size")
"""What a dataset factory gets beside its dataset_args, where it asks for them (by name; a
`**kwargs` does not ask): a streaming library's data set takes batch_size, a sharded stream
its rank and world size."""


def passed(factory: Callable[..., Any], *, with_dataset: bool = False) -> tuple[str, ...]:
    """The keywords of PASSED the harness gives `factory` (those it accepts)."""
    names = PASSED if with_dataset else PASSED[:-1]
    return tuple(name for name in names if registry.accepts(factory, name))


def untaken(factory: Callable[..., Any]) -> tuple[str, ...]:
    """The loader settings `factory` does not accept: measured as its loader sets them."""
    return tuple(name for name in LOADER_SETTINGS if not registry.accepts(factory, name))


def dataset_place(factory: Callable[..., Any]) -> tuple[str, ...]:
    """The names of DATASET_PLACE that a dataset factory's signature names."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return ()
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(n for n in DATASET_PLACE if n in parameters and parameters[n].kind in named)


def check_call(factory: Callable[..., Any], args: Mapping[str, Any], *, with_dataset: bool) -> None:
    """Raise FactoryError unless `factory(**passed, **args)` binds, naming what is wrong: a
    point's own value given in loader_args, or an argument the factory lacks."""
    own = sorted(set(args) & set(PASSED))
    if own:
        where = "the loader: section or workload" if set(own) - {"dataset"} else "workload.dataset"
        raise registry.FactoryError(
            f"{', '.join(own)} {'is' if len(own) == 1 else 'are'} the point's own (passed by the "
            f"harness where the factory accepts {'it' if len(own) == 1 else 'them'}); give "
            f"{'it' if len(own) == 1 else 'them'} in {where}, not in loader_args"
        )
    given = passed(factory, with_dataset=with_dataset)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # builtins without a signature: let the call itself decide
    try:
        signature.bind(**dict.fromkeys(given), **args)
    except TypeError as e:
        shown = ", ".join(f"{k}=" for k in given) or "nothing of the point's"
        raise registry.FactoryError(f"{e}; the harness passes it {shown} and loader_args") from e


def untaken_note(name: str, factory: Callable[..., Any]) -> str | None:
    """`harness plan`'s line for the settings the factory leaves to its loader; None if none."""
    left = untaken(factory)
    if not left:
        return None
    them = "it" if len(left) == 1 else "them"
    return (
        f"{', '.join(left)} not taken by {name}: measured as the loader sets {them} (the rows "
        f"record the loader's own value where it reports one, a DataLoader's attributes; empty "
        f"otherwise)"
    )


def ranks_note(name: str, factory: Callable[..., Any], ranks: int) -> str | None:
    """`harness plan`'s line for a factory that cannot split the data between the spec's `ranks`
    (it takes neither `rank` nor `world_size`, and is not known to make a holder whose loader
    an adapter re-makes by rank: `makes_loader_holder`); None where it can, or one rank. The
    harness keeps a loader a factory returns (nothing says a trainer would re-make it), so a
    plain DataLoader would give every rank the whole data set."""
    from harness.adapters import registry as adapters

    if ranks <= 1 or any(registry.accepts(factory, place) for place in ("rank", "world_size")):
        return None
    if adapters.first(lambda adapter: adapter.makes_loader_holder(factory)):
        return None
    fix = adapters.first(lambda adapter: adapter.ranks_fix())
    return (
        f"{name} takes neither rank nor world_size, and the spec runs {ranks} ranks "
        f"(slurm.nodes × slurm.tasks_per_node{_RANKS_WHERE}): "
        "unless its loader splits the data by rank itself (a "
        "DistributedSampler over the process group, a stream sharded by node), each rank reads the "
        f"whole data set, an epoch {ranks} times the training's; accept rank and world_size and "
        f"split by them{f', or {fix}' if fix else ''}"
    )


_RANKS_WHERE = ", on Slurm and with --backend local; an inline run has one"


def is_ranks_note(note: str) -> bool:
    """Whether a plan's note is ranks_note's: a sweep whose backend runs one rank per point
    (inline) leaves it out of its plan.json, since no rank there reads another's share."""
    return _RANKS_WHERE in note


def axis_over_untaken(
    name: str, factory: Callable[..., Any], loader_axes: Mapping[str, Sequence[Any]]
) -> str | None:
    """Why an axis over a setting the factory does not take is refused; None if there is none."""
    for setting in untaken(factory):
        values = loader_axes.get(setting, ())
        if len(values) > 1:
            return (
                f"{setting} is an axis, but {name} does not take {setting}: its points would measure "
                f"the same loader under {len(values)} labels; add {setting} to the factory's "
                "parameters, or give one value"
            )
    return None


def rung_notes(name: str, rungs: Sequence[str]) -> list[str]:
    """`harness plan`'s lines on the sample-level rungs of a loader factory: what serves them is
    only known once the loader is built (its `.dataset`)."""
    from harness_schema import rungs as rung_names

    sample = [r for r in rungs if r != "full" and rung_names.is_sample_level(r)]
    if not sample:
        return []
    return [
        f"rung{'s' if len(sample) > 1 else ''} {', '.join(sample)} of {name}: measured only where its "
        "loader exposes a map-style dataset (.dataset, as a torch DataLoader does: a plain DataLoader "
        "over a cached sample, with its collate_fn and settings); skipped otherwise (a loader of "
        "threads, a DALI iterator, a stream), the rows saying why. device_batch, host_batch and full "
        "are measured on the loader itself"
    ]


def call(
    factory: Callable[..., Any],
    name: str,
    args: Mapping[str, Any],
    values: Mapping[str, Any],
) -> Any:
    """`factory(**accepted values, **args)`, then the loader in what it made (train_loader, on
    the rank `values` place it). Raises registry.FactoryError-free RuntimeErrors naming the
    factory (WorkloadError)."""
    given = {k: v for k, v in values.items() if k in passed(factory, with_dataset="dataset" in values)}
    place = {k: values[k] for k in ("rank", "world_size", "seed") if k in values}
    try:
        made = factory(**given, **args)
        return train_loader(made, **place)
    except registry.WorkloadError:
        raise
    except Exception as e:
        raise registry.WorkloadError(f"loader {name!r} failed to build: {type(e).__name__}: {e}") from e


def train_loader(made: Any, *, rank: int = 0, world_size: int = 1, seed: int = 0) -> Any:
    """The iterable of batches in what a factory made: the thing itself, or the loader the
    adapter that knows it opens (`train_loader`: a DataModule's train_dataloader(), on several
    ranks with the sampler its trainer would put in it)."""
    from harness.adapters import registry as adapters
    from harness.adapters.base import NotALoader
    from harness.naming import type_name

    once = one_shot(made)
    if once:
        raise registry.WorkloadError(once)
    if _iterable(made):
        return made
    try:
        loader = adapters.first(
            lambda adapter: adapter.train_loader(made, rank=rank, world_size=world_size, seed=seed)
        )
    except NotALoader as e:
        raise registry.WorkloadError(str(e)) from None
    if loader is None:
        raise registry.WorkloadError(
            f"the loader factory returned {type_name(made)}, which is not iterable (no __iter__) "
            "and has no train_dataloader(); return the loader, or a DataModule"
        )
    return loader


def _iterable(value: Any) -> bool:
    return callable(getattr(value, "__iter__", None))


def one_shot(value: Any) -> str | None:
    """Why `value` cannot be the loader, where it is a generator or one of Python's own
    iterators (map, zip, iter(list)...): spent after one pass. An iterator class of a
    library's (DALI's, which starts a new pass after the last) is not judged: its __iter__ may
    well reset it."""
    from harness.naming import type_name

    python_own = type(value).__module__ in ("builtins", "itertools")
    builtin = python_own and callable(getattr(value, "__next__", None))
    if not (inspect.isgenerator(value) or builtin):
        return None
    return (
        f"the loader is a {type_name(value)}, an iterator that can be read once: the harness "
        "reads the loader again at every rung and epoch (a new iter() each, as a training "
        "loop does); give the loader itself (the DataLoader, the Loader) and wrap what "
        "probe.measure returns instead (log_every(probe.measure(loader, device), ...))"
    )
