"""The workload's factories checked when the spec loads, each error with its line: the dataset
and model (imported, or a built-in's signature), the user's pipeline (collate, sampler,
batch_sampler, loss, step, batch_samples) and a loader factory, each bound to what the harness
passes it and each of the spec's `<field>_args`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.config import step_source
from harness.config.spec_checker import Checker
from harness.config.spec_grid import SequenceStep
from harness.workloads import loader_factory, registry
from harness_schema.settings import MODEL_LOSS


def check_factories(c: Checker, axes: dict[str, tuple[Any, ...]]) -> tuple[str, ...]:
    """Fail at load time, with a line, on a user factory that cannot import or bind, or a
    dataset class that cannot yield uint8 when gpu_normalize asks it to. A step_ms taken from
    a sweep is resolved here to its number (step_source.py); returns where it came from."""
    try:
        bases = (Path.cwd(), *([Path(c.file).parent] if c.file else []))
        resolved = step_source.resolve_model_args(
            axes["workload.model_args"], models=axes["workload.model"], bases=bases
        )
    except step_source.StepSourceError as e:
        raise c.fail("workload.model_args", str(e)) from e
    axes["workload.model_args"] = resolved.args
    if True in axes["workload.gpu_normalize"]:
        for name in axes["workload.dataset"]:
            if name is not None and not _yields_uint8(name):
                raise c.fail(
                    "workload.gpu_normalize",
                    f"dataset {name!r} cannot yield uint8 images (it has no to_uint8() method); "
                    "gpu_normalize needs fake_cifar, image_folder or a dataset that has one",
                )
    for kind, table, args_field in (
        ("dataset", registry.DATASETS, "workload.dataset_args"),
        ("model", registry.MODELS, "workload.model_args"),
    ):
        for i, name in enumerate(axes[f"workload.{kind}"]):
            path = f"workload.{kind}" if len(axes[f"workload.{kind}"]) == 1 else f"workload.{kind}[{i}]"
            if name is not None:  # a dataset left to workload.loader's factory
                _check_factory(c, (kind, table, path, args_field), name, axes[args_field])
    return resolved.notes


def _yields_uint8(name: str) -> bool:
    if name in registry.DATASETS:  # a built-in: known without importing it (and torch)
        return name in registry.UINT8_DATASETS
    factory = registry.resolve(name, registry.DATASETS, "dataset")
    return not isinstance(factory, type) or hasattr(factory, "to_uint8")


def _check_factory(
    c: Checker, where: tuple[str, Mapping[str, str], str, str], name: str, all_args: tuple[Any, ...]
) -> None:
    """Each of the spec's argument mappings binds to the factory: a built-in's signature is
    data (registry.BUILTIN_PARAMETERS); a user's factory is imported."""
    kind, table, path, args_field = where
    factory: Any = None
    if name not in table:
        try:
            factory = registry.resolve(name, table, kind)
        except registry.FactoryError as e:
            raise c.fail(path, str(e)) from e
    place = loader_factory.dataset_place(factory) if kind == "dataset" and factory is not None else ()
    for args in all_args:
        call_args = dict(args)
        if kind == "model" and (factory is None or registry.accepts(factory, "num_classes")):
            call_args.setdefault("num_classes", 10)
        own = [name for name in place if name in call_args]
        if own:
            raise c.fail(
                args_field,
                f"{own[0]} is the point's own: dataset {name!r} asks for it, so the harness passes "
                f"it (workload.batch_size, the rank's place); remove it from dataset_args",
            )
        call_args.update(dict.fromkeys(place, 1))
        try:
            if factory is None:
                registry.check_builtin(name, table, kind, call_args)
            else:
                registry.check_arguments(factory, call_args)
        except registry.FactoryError as e:
            raise c.fail(args_field, f"does not fit {kind} {name!r}: {e}") from e


def check_pipeline(
    c: Checker, axes: Mapping[str, tuple[Any, ...]], sequence: tuple[SequenceStep, ...]
) -> None:
    """The factories of a user's pipeline (collate, sampler, batch_sampler, loss, step,
    batch_samples), each imported and bound to what the harness passes it plus each of the
    spec's `<field>_args`; and the pairs that cannot go together. One line each, naming the
    field and the factory (registry.PIPELINE_CALLS: how each is called)."""
    given = {kind: _pipeline_values(c, axes, sequence, kind) for kind in registry.PIPELINE_FIELDS}
    for kind, names in given.items():
        for name, path in names:
            if kind == "loss" and name == MODEL_LOSS:
                continue  # the model's own loss: no factory to load
            try:
                factory = registry.resolve(name, {}, kind)
            except registry.FactoryError as e:
                raise c.fail(path, f"cannot load {kind} {name!r}: {e}") from e
            args_values = (
                () if kind == "batch_samples" else _all_values(axes, sequence, f"workload.{kind}_args")
            )
            for args in args_values or ({},):
                try:
                    registry.check_pipeline_call(kind, factory, args)
                except registry.FactoryError as e:
                    raise c.fail(
                        f"workload.{kind}_args" if args else path, f"does not fit {kind} {name!r}: {e}"
                    ) from e
        args_field = f"workload.{kind}_args"
        if not names and any(axes.get(args_field, ({},))):
            raise c.fail(args_field, f"{kind}_args given without workload.{kind} (the factory they are for)")
    for first, second, why in _PIPELINE_CONFLICTS:
        if given[first] and given[second]:
            raise c.fail(given[second][0][1], f"give {first} or {second}, not both: {why}")
    if given["step"] and "fp16" in axes["workload.amp"]:
        raise c.fail(
            "workload.amp",
            f"fp16 with step {given['step'][0][0]!r}: loss scaling (a GradScaler) is the step's own "
            "business; use amp: bf16, or autocast and scale in your step with amp: false",
        )


def optional_fields(raw: Any) -> tuple[str, ...]:
    """With workload.loader, the dataset may be left to the loader's factory."""
    return ("dataset",) if isinstance(raw, Mapping) and raw.get("loader") is not None else ()


_LOADER_OWNS = ("collate", "sampler", "batch_sampler")
"""What a loader factory's loader does itself: given beside it, they would not be used."""


def check_loader(
    c: Checker,
    axes: Mapping[str, tuple[Any, ...]],
    sequence: tuple[SequenceStep, ...],
    rungs: Sequence[str],
    ranks: int,
) -> list[str]:
    """workload.loader's factory: imported, bound to what the harness passes it and each
    loader_args; no axis over a setting it does not take; nothing beside it that its loader
    would ignore. Returns the plan's lines on the settings it leaves to its loader, and on the
    data it cannot split between the point's `ranks`."""
    names = _pipeline_values(c, axes, sequence, "loader")
    if not names:
        if any(_all_values(axes, sequence, "workload.loader_args")):
            raise c.fail(
                "workload.loader_args", "loader_args given without workload.loader (the factory they are for)"
            )
        return []
    for field_name in _LOADER_OWNS:
        if _pipeline_values(c, axes, sequence, field_name):
            raise c.fail(
                f"workload.{field_name}",
                f"not used with workload.loader: the factory's loader does its own {field_name}; "
                "give yours to the factory (through loader_args)",
            )
    with_dataset = any(name is not None for name in _all_values(axes, sequence, "workload.dataset"))
    loader_axes = {k.removeprefix("loader."): v for k, v in axes.items() if k.startswith("loader.")}
    notes: list[str] = []
    for name, path in names:
        try:
            factory = registry.resolve(name, {}, "loader")
        except registry.FactoryError as e:
            raise c.fail(path, f"cannot load loader {name!r}: {e}") from e
        for args in _all_values(axes, sequence, "workload.loader_args"):
            try:
                loader_factory.check_call(factory, args, with_dataset=with_dataset)
            except registry.FactoryError as e:
                raise c.fail(
                    "workload.loader_args" if args else path, f"does not fit loader {name!r}: {e}"
                ) from e
        refused = loader_factory.axis_over_untaken(name, factory, loader_axes)
        if refused is not None:
            setting = refused.split(" ", 1)[0]
            raise c.fail(f"loader.{setting}", refused)
        for note in (
            loader_factory.untaken_note(name, factory),
            *loader_factory.rung_notes(name, rungs),
            loader_factory.ranks_note(name, factory, ranks),
        ):
            if note is not None and note not in notes:
                notes.append(note)
    return notes


def _all_values(
    axes: Mapping[str, tuple[Any, ...]], sequence: tuple[SequenceStep, ...], dotted: str
) -> tuple[Any, ...]:
    return (*axes[dotted], *(step.overrides[dotted] for step in sequence if dotted in step.overrides))


_PIPELINE_CONFLICTS = (
    ("sampler", "batch_sampler", "the batch sampler chooses the indices itself"),
    ("step", "loss", "the step computes its own loss"),
)


def _pipeline_values(
    c: Checker, axes: Mapping[str, tuple[Any, ...]], sequence: tuple[SequenceStep, ...], field: str
) -> list[tuple[str, str]]:
    """(factory name, the dotted path where the spec gives it) for each non-null value of
    workload.<field>, on its axis and in the sequence's steps."""
    dotted = f"workload.{field}"
    values = axes[dotted]
    found = [
        (name, dotted if len(values) == 1 else f"{dotted}[{i}]")
        for i, name in enumerate(values)
        if name is not None
    ]
    for i, step in enumerate(sequence):
        name = step.overrides.get(dotted)
        if name is not None:
            keys = (f"sequence[{i}].{dotted}", f"sequence[{i}].{field}")
            found.append((name, next((k for k in keys if k in c.loaded.lines), keys[0])))
    return found
