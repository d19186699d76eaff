from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.overrides import OverrideError, parse_override
from harness.config.plan import expand
from harness.config.spec import SpecError, load_spec, parse_spec
from tests.conftest import TINY_WORKLOAD


@pytest.fixture
def spec_file(write_spec) -> Path:
    return write_spec("name: t\n" + TINY_WORKLOAD + "loader: {num_workers: 0}\n")


def test_a_list_value_makes_an_axis(spec_file: Path) -> None:
    spec = load_spec(spec_file, ["loader.num_workers=[0,4,8]"])
    assert spec.field_values["loader.num_workers"] == (0, 4, 8)
    assert len(expand(spec).points) == 3


def test_values_are_yaml_null_and_true_included(spec_file: Path) -> None:
    spec = load_spec(
        spec_file, ["loader.pin_memory=true", "loader.prefetch_factor=null", "measure.steps=100"]
    )
    assert spec.field_values["loader.pin_memory"] == (True,)
    assert spec.field_values["loader.prefetch_factor"] == (None,)
    assert spec.measure.steps == 100


def test_a_nested_key_changes_one_entry_and_keeps_its_neighbours(spec_file: Path) -> None:
    spec = load_spec(spec_file, ["workload.dataset_args.size=1000"])
    assert spec.field_values["workload.dataset_args"] == ({"size": 1000, "image_size": 8, "resize": None},)


def test_a_missing_section_is_created(spec_file: Path) -> None:
    spec = load_spec(spec_file, ["slurm.partition=gpu_p5", "slurm.extra.gres=gpu:2"])
    assert spec.slurm.partition == "gpu_p5"
    assert spec.slurm.extra == {"gres": "gpu:2"}


def test_a_later_override_wins(spec_file: Path) -> None:
    assert load_spec(spec_file, ["measure.steps=5", "measure.steps=7"]).measure.steps == 7


def test_the_spec_text_is_the_merged_spec_and_reads_back_the_same(spec_file: Path) -> None:
    spec = load_spec(spec_file, ["loader.num_workers=[0,2]", "measure.steps=9"])
    assert spec.text.startswith(f"# {spec_file} with overrides: loader.num_workers=[0,2] measure.steps=9\n")
    again = parse_spec(spec.text)
    assert again.field_values == spec.field_values and again.measure == spec.measure
    assert [p.id for p in expand(again).points] == [p.id for p in expand(spec).points]


def test_the_merged_spec_keeps_the_file_as_written_with_its_comments_commented_out(write_spec) -> None:
    original = (
        "name: t  # the lab's grid\n" + TINY_WORKLOAD + "loader:\n  num_workers: 0  # baseline: no workers\n"
    )
    spec = load_spec(write_spec(original), ["loader.num_workers=4"])
    kept = spec.text.partition("as written, before the overrides:\n")[2]
    assert kept.splitlines() == [f"#   {line}".rstrip() for line in original.splitlines()]
    assert "# baseline: no workers" in kept  # the comment survives, where the dump drops it
    assert parse_spec(spec.text).field_values["loader.num_workers"] == (4,)  # the copy is inert


def test_without_overrides_the_text_is_the_file_as_given(spec_file: Path) -> None:
    assert load_spec(spec_file).text == spec_file.read_text()


def test_a_bad_key_names_the_override(spec_file: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(spec_file, ["measure.steps=5", "loader.num_wrokers=8"])
    assert str(info.value) == (
        f"{spec_file}: override loader.num_wrokers=8: loader.num_wrokers: unknown key; valid keys: "
        "num_workers, persistent_workers, pin_memory, non_blocking, prefetch_factor, drop_last"
    )


def test_a_bad_value_names_the_override(spec_file: Path) -> None:
    with pytest.raises(
        SpecError, match=r"override loader\.num_workers=\[0,-1\]: loader\.num_workers\[1\]: -1 is not"
    ):
        load_spec(spec_file, ["loader.num_workers=[0,-1]"])
    with pytest.raises(
        SpecError, match=r"override measure\.steps=many: measure\.steps: 'many' is not allowed"
    ):
        load_spec(spec_file, ["measure.steps=many"])


def test_an_error_of_the_combination_names_the_override_that_made_it(write_spec) -> None:
    spec = write_spec(
        "name: t\n" + TINY_WORKLOAD + "loader: {num_workers: [0, 1], prefetch_factor: [2, 4]}\n"
        "zip: [[num_workers, prefetch_factor]]\n"
    )
    with pytest.raises(
        SpecError, match=r"override loader\.num_workers=\[0,1,2\]: zip\[0\]: zipped axes must"
    ):
        load_spec(spec, ["measure.steps=4", "loader.num_workers=[0,1,2]"])


def test_the_file_s_own_error_keeps_its_line(write_spec) -> None:
    spec = write_spec("name: t\n" + TINY_WORKLOAD + "loader:\n  num_wrokers: 2\n")
    with pytest.raises(SpecError) as info:
        load_spec(spec, ["measure.steps=4"])
    assert str(info.value).startswith(f"{spec}:10: loader.num_wrokers: unknown key")


def test_an_override_may_replace_a_bad_value_of_the_file(write_spec) -> None:
    spec = write_spec("name: t\n" + TINY_WORKLOAD + "loader: {num_workers: -1}\n")
    with pytest.raises(SpecError, match=r":9: loader\.num_workers: -1 is not allowed"):
        load_spec(spec)
    assert load_spec(spec, ["loader.num_workers=2"]).field_values["loader.num_workers"] == (2,)


def test_a_key_cannot_go_through_an_axis_or_a_number(spec_file: Path) -> None:
    with pytest.raises(
        SpecError, match=r"override workload\.batch_size\.x=1: workload\.batch_size is 8, not a mapping"
    ):
        load_spec(spec_file, ["workload.batch_size.x=1"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("loader.num_workers", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
        ("loader..x=3", "expected KEY=VALUE"),
        ("loader.num_workers=[0,", "the value is not valid YAML"),
    ],
)
def test_a_malformed_override_says_what_is_expected(text: str, message: str) -> None:
    with pytest.raises(OverrideError, match=message):
        parse_override(text)
