"""Every setting of a spec, declared once: its name, type, default, what is allowed, whether it
can be an axis, and what it means.

Each section of the YAML is a frozen dataclass below, and each field carries its rule in its
metadata (`setting(...)`). Everything else is derived from these declarations:

- the spec's validation and its error messages (`harness/config/spec.py`),
- the plan's point settings and their hash (`harness/config/plan.py`),
- the columns of `plan.csv` and of every row (`harness_schema/rows.py`),
- the analysis's setting columns and the course's table (`analysis/`),
- the spec reference's field tables (`field_table()`, pasted into docs/reference/spec.md by
  scripts/docs_reference.py; a test keeps the page in step).

A new DataLoader knob is one `setting(...)` in `LoaderSettings` plus its use where the
DataLoader is built (`harness/execution/ladder.py`). Torch-free: the analysis imports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any

from harness_schema import rungs, script_flags, workload_names
from harness_schema.slurm_time import SLURM_TIME

REQUIRED: Any = MISSING
"""The default of a setting the spec must give."""


@dataclass(frozen=True, slots=True)
class Rule:
    """How one setting is checked, shown and stored."""

    check: Callable[[Any], bool]
    allowed: str
    """What is allowed, in words: the end of every error message about this setting."""
    doc: str
    axis: bool
    """May be given as a list of values (the plan crosses axes)."""
    in_row: bool
    """Written as a column of every row and of plan.csv."""
    cell: Callable[[Any], Any] | None
    """How the value is written into a CSV cell (None: as is)."""
    without_workers: Any = MISSING
    """The value PyTorch requires with num_workers=0, for a setting that applies to worker
    processes only (MISSING: the setting applies either way). See WITHOUT_WORKERS."""
    id_at_default: bool = True
    """Hashed into the point id even at its default. False for a setting added after sweeps
    were measured: at its default it is left out (`identity`), so their points keep their ids
    and a resume still finds them done."""
    in_id: bool = True
    """Hashed into the point id at all. False for a setting that changes how many runs a point
    gets, never what a run measures (the follow-up's cap, `Measure.decide`)."""


def setting(
    default: Any = REQUIRED,
    *,
    check: Callable[[Any], bool],
    allowed: str,
    doc: str,
    axis: bool = False,
    in_row: bool = True,
    cell: Callable[[Any], Any] | None = None,
    without_workers: Any = MISSING,
    id_at_default: bool = True,
    in_id: bool = True,
) -> Any:
    """A dataclass field that carries its rule (see Rule)."""
    metadata = {"rule": Rule(check, allowed, doc, axis, in_row, cell, without_workers, id_at_default, in_id)}
    if default is REQUIRED:
        return field(metadata=metadata)
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def rule_of(f: Field[Any]) -> Rule:
    rule = f.metadata.get("rule")
    if not isinstance(rule, Rule):
        raise TypeError(f"{f.name} is declared without setting()")
    return rule


def default_of(f: Field[Any]) -> Any:
    """The field's default (REQUIRED when the spec must give it)."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return REQUIRED


# --- checks, each with the words for what it allows ------------------------------------------


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: is_int(v) and v >= low


def optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def is_mapping(v: Any) -> bool:
    return isinstance(v, Mapping)


def _string_list(v: Any) -> bool:
    return isinstance(v, Sequence) and not isinstance(v, str) and all(isinstance(s, str) for s in v)


def _optional_name(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip() != "")


def _dataset_name(v: Any) -> bool:
    return isinstance(v, str) and (v in workload_names.DATASETS or workload_names.is_factory_path(v))


def _model_name(v: Any) -> bool:
    return isinstance(v, str) and (v in workload_names.MODELS or workload_names.is_factory_path(v))


def _lower_amp(v: Any) -> str:
    return "false" if v is False else str(v)


BOOL = "true or false"
MODEL_LOSS = "model"
"""workload.loss: the model's output carries its loss (harness/execution/train_step.py)."""
OWN_LOSS = "output.loss or output['loss'], as Hugging Face models return it"
"""Where a model's output carries its loss, as the spec's reference and `harness plan` say it."""


def _factory_path(v: Any) -> bool:
    return v is None or (isinstance(v, str) and workload_names.is_factory_path(v))


def _factory(doc: str, *, function: bool = False) -> Any:
    """An optional factory of a user's pipeline, an axis like `dataset`. Its points keep the ids
    they had before the setting existed while it is null (`id_at_default`)."""
    what = "function" if function else "factory"
    return setting(
        None,
        check=_factory_path,
        allowed=f'"package.module:{what}" or null',
        doc=doc,
        axis=True,
        id_at_default=False,
    )


def _factory_args(name: str) -> Any:
    return setting(
        {},
        check=is_mapping,
        allowed="a mapping",
        doc=f"keyword arguments of the {name} factory",
        axis=True,
        id_at_default=False,
    )


_SLURM_MEM = re.compile(r"^\d+[KMGT]?$")


# --- the sections ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkloadSettings:
    """`workload:` what is trained, and how."""

    dataset: str = setting(
        check=_dataset_name,
        allowed=f'one of {", ".join(workload_names.DATASETS)} or "package.module:factory"',
        doc="the data set: a built-in name or your own factory (with `loader`: optional, given to it)",
        axis=True,
    )
    dataset_args: Mapping[str, Any] = setting(
        {}, check=is_mapping, allowed="a mapping", doc="keyword arguments of the dataset", axis=True
    )
    model: str = setting(
        check=_model_name,
        allowed=f'one of {", ".join(workload_names.MODELS)} or "package.module:factory"',
        doc="the model: a built-in name or your own factory",
        axis=True,
    )
    model_args: Mapping[str, Any] = setting(
        {}, check=is_mapping, allowed="a mapping", doc="keyword arguments of the model", axis=True
    )
    batch_size: int = setting(
        32, check=int_at_least(1), allowed="an integer > 0", doc="samples per step, per rank", axis=True
    )
    device: str = setting(
        "auto",
        check=lambda v: v in ("auto", "cpu", "cuda"),
        allowed="auto, cpu or cuda",
        doc="auto takes a GPU when one is visible, else the CPU",
        # The row records the device actually used (cuda:3, cpu), not the one asked for.
        in_row=False,
    )
    amp: str | bool = setting(
        False,
        check=lambda v: v is False or v in ("bf16", "fp16"),
        allowed="false, bf16 or fp16",
        doc="mixed precision; fp16 needs CUDA and uses a grad scaler",
        axis=True,
        cell=_lower_amp,
    )
    compile: bool = setting(
        False, check=is_bool, allowed=BOOL, doc="torch.compile (its first step is warmup)", axis=True
    )
    channels_last: bool = setting(
        False, check=is_bool, allowed=BOOL, doc="model and inputs in channels-last memory format", axis=True
    )
    zero_grad_set_to_none: bool = setting(
        # PyTorch 2's default; the optimisation sequence of C. Rand's "PyTorch Model Performance
        # Analysis and Optimization" starts from false:
        # https://towardsdatascience.com/author/chaimrand/
        True,
        check=is_bool,
        allowed=BOOL,
        doc="optimizer.zero_grad(set_to_none=...)",
        axis=True,
    )
    gpu_normalize: bool = setting(
        False,
        check=is_bool,
        allowed=BOOL,
        doc="the loader yields uint8; /255 and Normalize run on the device (Rand's optimisation 4)",
        axis=True,
    )
    # --- a user's own pipeline: factories as "package.module:factory" (docs/guides/own-workload.md, "Your own
    # workload"; how each is called: harness/workloads/registry.py's PIPELINE_CALLS) ---
    collate: str | None = _factory("collate_fn(list of samples) -> batch (default: PyTorch's)")
    collate_args: Mapping[str, Any] = _factory_args("collate")
    sampler: str | None = _factory("a Sampler of indices, for this rank (default: random, distributed)")
    sampler_args: Mapping[str, Any] = _factory_args("sampler")
    batch_sampler: str | None = _factory("an iterable of lists of indices, for this rank (e.g. by length)")
    batch_sampler_args: Mapping[str, Any] = _factory_args("batch_sampler")
    loss: str | None = setting(
        None,
        check=lambda v: v == MODEL_LOSS or _factory_path(v),
        allowed=f'"{MODEL_LOSS}", "package.module:factory" or null',
        doc=f"loss_fn(model output, batch) -> scalar; model: the output's own loss ({OWN_LOSS}); null: "
        "that where the output carries one, else cross-entropy on (inputs, targets)",
        axis=True,
        id_at_default=False,
    )
    loss_args: Mapping[str, Any] = _factory_args("loss")
    step: str | None = _factory("step_fn(batch): forward, loss, backward, optimizer (default: SGD)")
    step_args: Mapping[str, Any] = _factory_args("step")
    batch_samples: str | None = _factory(
        "function(batch) -> its number of samples (default: the tensors' leading dimension)",
        function=True,
    )
    # --- a user's own loader, whole (harness/workloads/loader_factory.py): for loaders that
    # replace or wrap the DataLoader (torchdata.nodes, a Lightning DataModule, litdata's
    # StreamingDataLoader); called with the point's batch size and the loader settings it accepts ---
    loader: str | None = _factory(
        "your loader: factory(batch_size=, num_workers=, ..., rank=, world_size=, **loader_args) "
        "-> any iterable of batches (a DataModule: its train_dataloader())"
    )
    loader_args: Mapping[str, Any] = _factory_args("loader")
    # --- a user's own training script, measured through harness.probe (docs/guides/training-script.md):
    # the script owns its dataset, model and step, so with `script` only
    # `args` and `batch_size` may be given beside it (spec.py, SCRIPT_FIELDS) ---
    script: str | None = setting(
        None,
        check=_optional_name,
        allowed="a path to a Python script (relative to the spec's folder), or null",
        doc="your training script, which measures through harness.probe (recorded absolute)",
        id_at_default=False,
    )
    args: Sequence[str] = setting(
        (),
        check=_string_list,
        allowed="a list of strings",
        doc="the script's own command-line arguments",
        cell=" ".join,
        id_at_default=False,
    )
    flags: Mapping[str, Any] = setting(
        {},
        check=lambda v: script_flags.problem(v, FLAGGABLE, FLAGGABLE_BOOLEANS) is None,
        allowed="a mapping of settings (batch_size and the loader's) to the script's flags: \"--x\" "
        '(a boolean as --x/--no-x), "--x=" (--x=4, --x=true) or {true: --x, false: null}',
        doc="the script's own flags for the point's settings: the script's args get the values the "
        'spec names (docs: "Your own training script")',
        in_row=False,
        id_at_default=False,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class LoaderSettings:
    """`loader:` the DataLoader arguments, as PyTorch will apply them (see plan.resolve_loader)."""

    num_workers: int = setting(
        0, check=int_at_least(0), allowed="an integer >= 0", doc="worker processes per rank", axis=True
    )
    persistent_workers: bool = setting(
        False,
        check=is_bool,
        allowed=BOOL,
        doc="keep the workers alive across epochs",
        axis=True,
        without_workers=False,
    )
    pin_memory: bool = setting(
        False, check=is_bool, allowed=BOOL, doc="batches in page-locked memory (CUDA only)", axis=True
    )
    non_blocking: bool = setting(
        False,
        check=is_bool,
        allowed=BOOL,
        doc="asynchronous host-to-device copy (needs pin_memory to overlap)",
        axis=True,
    )
    prefetch_factor: int | None = setting(
        2,
        check=optional(int_at_least(1)),
        allowed="an integer >= 1 or null",
        doc="batches each worker prepares ahead (null without workers)",
        axis=True,
        without_workers=None,
    )
    drop_last: bool = setting(
        False, check=is_bool, allowed=BOOL, doc="drop each epoch's incomplete last batch", axis=True
    )


AUTO_REPEATS = "auto"
FIRST_ROUND = 3
"""With repeats: auto, the repeats of every point before any is judged (two give Student's t
of 12.7 on one degree of freedom: an interval too wide to decide anything)."""
DEFAULT_MAX_REPEATS = 10
DEFAULT_DECIDE = DEFAULT_MAX_REPEATS
"""Where measure.repeats is not given, the most repeats a contender of the best may reach
after the grid (Measure.decide): the cap of repeats: auto."""
DRAIN_FACTOR = 4
"""After the stock's own warmup steps, at most this many times more to see the stock used up
(harness/execution/loop.py); declared here, torch-free, so that `harness plan` can say it."""
MIN_PERIODS = 3
"""A window covers at least this many periods of a periodic delivery (bursts of num_workers
batches from workers in step), else it is said to be too short (harness/execution/steady.py);
torch-free, so that the analysis says it too."""
AUTO_STEPS = "auto"
AUTO_SECONDS = 2.0
"""With steps: auto and no measure.seconds, the window's least duration: criterion.rs measures
a benchmark for 5 s by default and pyperf's values last 100 ms each, 60 of them; a point has a
window per rung and repeat, so a few seconds each (harness/execution/steady.py)."""
AUTO_MAX_SECONDS = 30.0
"""With steps: auto and no measure.max_seconds, the most a window lasts before it stops
short of its precision (and says so)."""
AUTO_RSE = 0.02
"""With steps: auto, the window stops once its step rate's relative standard error (batch
means over blocks of whole periods) is at most this: 2 %, under half the 5 % margin within
which two configurations are called tied (analysis/noise.py)."""
AUTO_MIN_BLOCKS = 5
"""With steps: auto, the fewest blocks the standard error is taken over: four degrees of
freedom, below which a small scatter is a coincidence."""
AUTO_BLOCK_STEPS = 8
"""A block's least steps (rounded up to whole periods): the window's length is decided at each
block's end, under DDP a collective, which a per-step check would pay every step."""
AUTO_MAX_BATCHES = 30
"""With steps: auto, the most batches the standard error is taken over: past it, neighbouring
blocks are merged (batch means with a fixed number of batches, 10 to 30 in Schmeiser's 1982
study), so that a batch outlasts the loader's slow drifts (workers slipping out of step over
seconds) which blocks of a tenth of a second would take for noise: with 6 workers in step,
such blocks went on to the 20 s cap at 2.3 to 3.2 %."""
AUTO_BLOCK_S = 0.1
"""A block's least duration, as the window's first steps foretell it: pyperf's min_time (each
of its values lasts at least 100 ms). Blocks of 8 steps of 0.1 ms each scattered by 11 % here
(a timer's or the scheduler's hiccup of a millisecond is a block's whole length), so that 2 %
was out of reach after 2,000 of them."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Measure:
    """`measure:` how long each rung is measured. With `repeats: auto` the spec holds the first
    round in `repeats` and the budget in `max_repeats` (harness/backends/adaptive.py)."""

    warmup_steps: int = setting(
        5,
        check=int_at_least(0),
        allowed="an integer >= 0",
        doc="steps run before timing (more are added until the workers' stock is used up)",
    )
    steps: int = setting(
        50,
        check=lambda v: (is_int(v) and v >= 1) or v == AUTO_STEPS,
        allowed="an integer >= 1, or auto",
        doc="measured steps; auto: the window measures blocks of whole periods of the loader's "
        f"delivery until it has lasted `seconds` (null: {AUTO_SECONDS:g}) and its step rate's "
        f"relative standard error is at most {AUTO_RSE:.0%}, or until `max_seconds`",
    )
    repeats: int = setting(
        1,
        check=lambda v: (is_int(v) and v >= 1) or v == AUTO_REPEATS,
        allowed="an integer >= 1, or auto",
        doc="measurements of each rung, in turn (ABC ABC); 3 or more to test differences; "
        f"auto: {FIRST_ROUND}, then more for the points still undecided against the best "
        "(within max_repeats and budget_minutes); not given: 1, then more for the contenders "
        "of the best (`decide`); a number given: that many, no more",
    )
    max_repeats: int | None = setting(
        None,
        check=optional(int_at_least(FIRST_ROUND)),
        allowed=f"an integer >= {FIRST_ROUND}, or null",
        doc=f"with repeats: auto, the most repeats of one point (null: {DEFAULT_MAX_REPEATS})",
        id_at_default=False,
    )
    budget_minutes: float | None = setting(
        None,
        check=optional(lambda v: is_number(v) and v > 0),
        allowed="a number of minutes > 0, or null",
        doc="with repeats: auto, the most minutes of measuring one point, its first "
        f"{FIRST_ROUND} repeats included (null: no limit but max_repeats)",
        id_at_default=False,
    )
    decide: int | None = setting(
        None,
        check=optional(int_at_least(FIRST_ROUND)),
        allowed=f"an integer >= {FIRST_ROUND}, or null",
        doc="after the grid, more repeats, in turn, of the contenders only (the configurations "
        "whose figures lie within the margin of the best and whose interval crosses its edge), "
        "each until decided or this many repeats in all (budget_minutes and the point's limit "
        f"bound them too); where measure.repeats is not given: {DEFAULT_DECIDE} (null: none); "
        "beside a number of repeats: none unless given",
        # How many runs a point gets, never what a run measures: ids stay as they were.
        in_id=False,
    )
    loader_capacity: str | bool = setting(
        "auto",
        check=lambda v: v in ("auto", True, False),
        allowed="auto, true or false",
        doc="also time each sample-level rung's loader alone, with no train step "
        "(auto: when the rungs include device_batch or host_batch, the demand to compare with)",
    )
    seconds: float | None = setting(
        None,
        check=optional(lambda v: is_number(v) and v > 0),
        allowed="a number of seconds > 0, or null",
        doc="the window's least duration: after `steps`, it goes on in whole periods of the "
        "loader's delivery until it has lasted this long (null: `steps` alone decides)",
        # It changes what a window measures, so it is in the point id once given; at null it is
        # left out, and the points of sweeps measured before it existed keep their ids.
        id_at_default=False,
    )
    max_seconds: float | None = setting(
        None,
        check=optional(lambda v: is_number(v) and v > 0),
        allowed="a number of seconds > 0, or null",
        doc="with steps: auto, the most a window lasts before it stops short of its precision "
        f"and says so (null: {AUTO_MAX_SECONDS:g})",
        id_at_default=False,
    )

    @property
    def adaptive(self) -> bool:
        """repeats: auto: more repeats for the points the first round leaves undecided."""
        return self.max_repeats is not None

    @property
    def follows_up(self) -> bool:
        """More repeats after the first round: repeats: auto, or the contenders' (`decide`)."""
        return self.adaptive or self.decide is not None

    @property
    def most_repeats(self) -> int:
        """The most repeats a point may reach: max_repeats (auto), decide, else repeats."""
        return self.max_repeats or self.decide or self.repeats

    @property
    def auto_window(self) -> bool:
        """steps: auto: the spec holds the least steps in `steps` (AUTO_MIN_BLOCKS blocks), the
        least duration in `seconds` and the most in `max_seconds` (harness/config/spec.py)."""
        return self.max_seconds is not None


@dataclass(frozen=True, kw_only=True, slots=True)
class SamplerConfig:
    """`sampler:` the GPU (NVML) and host samplers that run beside the loop."""

    hz: float = setting(
        10.0,
        check=lambda v: is_number(v) and 0 < v <= 1000,
        allowed="a number in (0, 1000]",
        doc="samples per second",
    )
    gpu: bool = setting(True, check=is_bool, allowed=BOOL, doc="sample the GPU through NVML")
    host: bool = setting(True, check=is_bool, allowed=BOOL, doc="sample CPU and memory of the process tree")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileSpec:
    """`profile:` torch.profiler capture of one rung, in an extra untimed pass (so the measured
    steps never carry the profiler's overhead): skip `wait` steps, `warmup`, record `active`."""

    rung: str = setting(
        "full",
        check=lambda v: isinstance(v, str) and rungs.is_rung(v),
        allowed=rungs.allowed_text(),
        doc="the rung profiled (one of the spec's rungs)",
    )
    wait: int = setting(1, check=int_at_least(0), allowed="an integer >= 0", doc="steps skipped")
    warmup: int = setting(1, check=int_at_least(0), allowed="an integer >= 0", doc="steps traced, discarded")
    active: int = setting(3, check=int_at_least(1), allowed="an integer >= 1", doc="steps recorded")
    repeat: int = setting(1, check=int_at_least(1), allowed="an integer >= 1", doc="cycles recorded")


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmConfig:
    """`slurm:` the resources of one point (one array task)."""

    nodes: int = setting(
        1,
        check=int_at_least(1),
        allowed="an integer >= 1, or a list of them (an axis)",
        doc="nodes per point; a list: the points run at each scale",
        axis=True,
    )
    gpus_per_node: int = setting(
        1,
        check=int_at_least(0),
        allowed="an integer >= 0, or a list of them (an axis)",
        doc="--gres=gpu:N; a list: the points run at each scale",
        axis=True,
    )
    tasks_per_node: int = setting(
        None,  # resolved by the spec: one task per GPU, or 1 without GPUs
        check=optional(int_at_least(1)),
        allowed="an integer >= 1, a list of them (an axis), or null for one task per GPU",
        doc="ranks per node",
        axis=True,
    )
    cpus_per_task: int | None = setting(
        None, check=optional(int_at_least(1)), allowed="an integer >= 1", doc="cores per rank"
    )
    mem: str | None = setting(
        None,
        check=optional(lambda v: isinstance(v, str) and _SLURM_MEM.match(v) is not None),
        allowed='a Slurm memory size such as "40G", or null',
        doc="memory per node",
    )
    time: str | int = setting(
        "00:20:00",
        check=lambda v: (is_int(v) and v > 0) or (isinstance(v, str) and SLURM_TIME.match(v) is not None),
        allowed='minutes, or "HH:MM:SS" / "D-HH:MM:SS"',
        doc="time limit of one point",
    )
    partition: str | None = setting(
        None, check=_optional_name, allowed="a partition name or null", doc="--partition"
    )
    account: str | None = setting(
        None, check=_optional_name, allowed="an account name or null", doc="--account"
    )
    qos: str | None = setting(None, check=_optional_name, allowed="a QoS name or null", doc="--qos")
    constraint: str | None = setting(
        None, check=_optional_name, allowed="a constraint expression or null", doc="--constraint"
    )
    hint: str | None = setting(
        None,
        check=_optional_name,
        allowed="a Slurm --hint value (e.g. nomultithread) or null",
        doc="--hint",
    )
    exclusive: bool = setting(False, check=is_bool, allowed=BOOL, doc="--exclusive")
    array_parallelism: int = setting(
        16, check=int_at_least(1), allowed="an integer >= 1", doc="array tasks running at once"
    )
    setup: tuple[str, ...] = setting(
        (),
        check=lambda v: (
            isinstance(v, Sequence) and not isinstance(v, str) and all(isinstance(s, str) for s in v)
        ),
        allowed="a list of shell lines",
        doc="lines run before the job (module load ...)",
    )
    extra: Mapping[str, str | int | bool] = setting(
        {},
        check=lambda v: isinstance(v, Mapping) and all(isinstance(x, (str, int, bool)) for x in v.values()),
        allowed="a mapping of extra sbatch options to values",
        doc="any other sbatch option",
    )

    @property
    def world_size(self) -> int:
        """Ranks of one point: every task of every node is a DDP rank."""
        return self.nodes * self.tasks_per_node

    def at(self, scale: Scale) -> SlurmConfig:
        """The same resources at another size (a point's, where sizes are an axis)."""
        return replace(
            self, nodes=scale.nodes, gpus_per_node=scale.gpus_per_node, tasks_per_node=scale.tasks_per_node
        )


SCALE_FIELDS: tuple[str, ...] = ("nodes", "gpus_per_node", "tasks_per_node")
"""The fields of `slurm:` that may be axes: together, the size of a point (its Scale)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Scale:
    """The size of one point: its nodes, the GPUs of each, its ranks on each. With one value
    of each in the spec, every point has the spec's; with a list (slurm.nodes: [1, 2]), the
    plan crosses them with the other axes and a point's size is part of its id."""

    nodes: int
    gpus_per_node: int
    tasks_per_node: int

    @property
    def world_size(self) -> int:
        """Ranks of the point: every task of every node is a DDP rank."""
        return self.nodes * self.tasks_per_node

    @property
    def gpus(self) -> int:
        """GPUs the point holds in all."""
        return self.nodes * self.gpus_per_node

    def label(self) -> str:
        """2 nodes × 4 GPUs (8 ranks): how the plan and the report name a scale."""
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}"
        return f"{nodes} × {self.gpus_per_node} GPU(s) ({self.world_size} rank(s))"

    @staticmethod
    def of(cfg: SlurmConfig) -> Scale:
        """The scale a SlurmConfig's own values give (a spec of one scale)."""
        return Scale(nodes=cfg.nodes, gpus_per_node=cfg.gpus_per_node, tasks_per_node=cfg.tasks_per_node)


DEFAULT_BATCH_TIMEOUT_S = 300.0
"""A DataLoader worker with no batch for this long is taken for stuck (a read that never
returns, a dead NFS or Lustre mount): long enough for a slow first batch (a worker's start,
a cold cache over the network), short against a sweep left to run overnight."""
DEFAULT_DIST_TIMEOUT_S = 300.0
"""How long a rank waits for the others in a collective before its point fails: a rank whose
rung failed stops the point, and the others then fail after this instead of hanging for
torch's default of 30 minutes (10 for NCCL)."""


def _seconds(low_exclusive: bool) -> Callable[[Any], bool]:
    return lambda v: is_number(v) and (v > 0 if low_exclusive else v >= 0)


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """`limits:` how long the harness waits before it calls a wait a fault. Not part of a
    point's id: a limit changes when a point gives up, not what it measures."""

    batch_timeout_s: float = setting(
        DEFAULT_BATCH_TIMEOUT_S,
        check=_seconds(low_exclusive=False),
        allowed="a number of seconds >= 0 (0: wait forever)",
        doc="seconds without a batch from the DataLoader's workers before the rung fails and "
        "its workers are ended (num_workers > 0; without workers the point's own limit applies)",
    )
    dist_timeout_s: float = setting(
        DEFAULT_DIST_TIMEOUT_S,
        check=_seconds(low_exclusive=True),
        allowed="a number of seconds > 0",
        doc="seconds a rank waits for the others in a collective before the point fails",
    )
    point_minutes: float | None = setting(
        None,
        check=optional(lambda v: is_number(v) and v > 0),
        allowed="a number of minutes > 0, or null",
        doc="the wall-clock limit of one point, all its rungs and repeats: past it the point's "
        "units not done are failed rows and its processes are ended, never requeued "
        "(null: slurm.time on local and slurm, 60 inline)",
    )


SECTIONS: dict[str, type] = {
    "workload": WorkloadSettings,
    "loader": LoaderSettings,
    "measure": Measure,
    "sampler": SamplerConfig,
    "profile": ProfileSpec,
    "slurm": SlurmConfig,
    "limits": Limits,
}
AXIS_SECTIONS: dict[str, type] = {"workload": WorkloadSettings, "loader": LoaderSettings}
"""The sections whose fields may be axes: together they are a point's settings."""


def setting_fields() -> dict[str, Field[Any]]:
    """Dotted name (loader.num_workers) -> field, for every workload and loader setting."""
    return {f"{name}.{f.name}": f for name, cls in AXIS_SECTIONS.items() for f in fields(cls)}


WITHOUT_WORKERS: dict[str, Any] = {
    f.name: rule_of(f).without_workers
    for f in fields(LoaderSettings)
    if rule_of(f).without_workers is not MISSING
}
"""The loader settings that apply to worker processes only, and the value each must take with
num_workers=0: torch.utils.data.DataLoader raises on a prefetch_factor or on
persistent_workers=True without workers (torch/utils/data/dataloader.py). The plan resolves
them to these values (plan.resolve_loader); the analysis does not count them as a choice
among num_workers=0 points (WORKER_ONLY)."""
WORKER_ONLY: tuple[str, ...] = tuple(WITHOUT_WORKERS)

WORKLOAD_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(WorkloadSettings) if rule_of(f).in_row)
LOADER_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(LoaderSettings) if rule_of(f).in_row)
SETTING_COLUMNS: tuple[str, ...] = (*WORKLOAD_COLUMNS, *LOADER_COLUMNS)
"""The settings every row carries, as columns, in declaration order."""

FLAGGABLE: tuple[str, ...] = ("batch_size", *LOADER_COLUMNS)
"""The settings a spec may map to a script's own flags (workload.flags)."""
FLAGGABLE_BOOLEANS: tuple[str, ...] = tuple(
    f.name for f in fields(LoaderSettings) if isinstance(default_of(f), bool)
)


def values(section: object) -> dict[str, Any]:
    """A section's fields by name, in declaration order: what `dataclasses.asdict` gives for
    these sections (none holds a dataclass), without its deep copy of every mapping and list,
    which a plan of 1,000 points paid 7,000 times (2.4 s, issue #36). The values are the
    section's own: read them, do not change them (the section is frozen)."""
    return {name: getattr(section, name) for name, _, _ in _rules(type(section))}


def identity(section: object) -> dict[str, Any]:
    """A section's settings as the point id hashes them: every field, except one declared
    `id_at_default=False` while it holds its default."""
    out: dict[str, Any] = {}
    for name, always, default in _rules(type(section)):
        if always is None:  # never hashed (Rule.in_id)
            continue
        value = getattr(section, name)
        if always or value != default:
            out[name] = value
    return out


_RULES: dict[type, tuple[tuple[str, bool | None, Any], ...]] = {}


def _rules(cls: type) -> tuple[tuple[str, bool | None, Any], ...]:
    """(name, hashed even at its default (None: never hashed), default) per field of a section
    class, read from its declarations once, not once per point. A field of no setting()
    (RunPass's) is hashed always."""
    rules = _RULES.get(cls)
    if rules is None:
        rules = _RULES[cls] = tuple((f.name, _hashed(f), default_of(f)) for f in fields(cls))
    return rules


def _hashed(f: Field[Any]) -> bool | None:
    if "rule" not in f.metadata:
        return True
    rule = rule_of(f)
    return rule.id_at_default if rule.in_id else None


def setting_cells(workload: WorkloadSettings, loader: LoaderSettings) -> dict[str, Any]:
    """The row's setting columns: each value as its rule writes it into a cell."""
    out: dict[str, Any] = {}
    for obj in (workload, loader):
        for f in fields(obj):
            rule = rule_of(f)
            if rule.in_row:
                value = getattr(obj, f.name)
                out[f.name] = rule.cell(value) if rule.cell else value
    return out


def column_type(name: str) -> type:
    """bool, int, float or str: how a reader restores a setting column from its CSV text."""
    for cls in AXIS_SECTIONS.values():
        for f in fields(cls):
            if f.name == name:
                if rule_of(f).cell is not None:
                    return str
                text = str(f.type)
                for t in (bool, int, float):
                    if text.split(" | ")[0] == t.__name__:
                        return t
                return str
    raise KeyError(name)


def field_table(section: str) -> str:
    """The section's fields as a Markdown table (docs/reference/spec.md's tables are these, verbatim)."""
    lines = ["| field | default | allowed | axis | meaning |", "|---|---|---|---|---|"]
    for f in fields(SECTIONS[section]):
        rule = rule_of(f)
        default = default_of(f)
        shown = "required" if default is REQUIRED else _yaml(default)
        axis = "yes" if rule.axis else ""
        lines.append(f"| `{f.name}` | {shown} | {rule.allowed} | {axis} | {rule.doc} |")
    return "\n".join(lines)


def _yaml(value: Any) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return "`[]`" if not value else f"`{list(value)}`"
    return f"`{value}`" if value != {} else "`{}`"


if __name__ == "__main__":  # python -m harness_schema.settings [SECTION...]: the spec reference's tables
    import sys

    for name in sys.argv[1:] or list(SECTIONS):
        print(f"`{name}:`\n\n{field_table(name)}\n")
