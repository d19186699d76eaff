"""YAML loaded with the line of every dotted field: what a spec's error messages point at."""

from __future__ import annotations

import textwrap

import pytest

from harness.config.spec import SpecError, parse_spec
from harness.config.yaml_lines import YamlSyntaxError, load_yaml_with_lines
from tests.conftest import TINY_WORKLOAD

TEXT = textwrap.dedent(
    """\
    name: grid
    loader:
      num_workers: [0, 2]
      pin_memory: true
    rungs:
      - device_batch
      - full
    slurm: {partition: gpu, extra: {reservation: r1}}
    """
)


def test_every_dotted_field_has_its_line() -> None:
    loaded = load_yaml_with_lines(TEXT)
    assert loaded.data["loader"] == {"num_workers": [0, 2], "pin_memory": True}
    assert loaded.lines["name"] == 1
    assert loaded.lines["loader"] == 2 and loaded.lines["loader.num_workers"] == 3
    assert loaded.lines["loader.pin_memory"] == 4
    assert loaded.lines["rungs[0]"] == 6 and loaded.lines["rungs[1]"] == 7
    assert loaded.lines["slurm.extra.reservation"] == 8  # flow style: the line it is on


def test_a_field_without_a_line_takes_its_closest_ancestors() -> None:
    loaded = load_yaml_with_lines(TEXT)
    assert loaded.line_of("loader.num_workers[1]") == 3  # a list item of a flow sequence
    assert loaded.line_of("loader.prefetch_factor") == 2  # not given: where loader is
    assert loaded.line_of("profile.rung") == 1  # no section at all: the document's start


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("a: 1\nb:\n  c: 2\n  c: 3\n", "duplicate key 'c'", 4),
        ("a: [1, 2\nb: 3\n", "invalid YAML: expected ',' or ']', but got ':'", 2),
        ("a: 1\n\tb: 2\n", "invalid YAML: found character '\\t' that cannot start any token", 2),
    ],
)
def test_bad_yaml_is_refused_with_its_line(text: str, message: str, line: int) -> None:
    with pytest.raises(YamlSyntaxError) as error:
        load_yaml_with_lines(text)
    assert str(error.value) == message and error.value.line == line


def test_an_empty_document_is_no_data() -> None:
    assert load_yaml_with_lines("").data is None
    assert load_yaml_with_lines("# only a comment\n").data is None


def test_a_spec_error_names_the_line_of_the_field() -> None:
    """What a user reads: the spec's line, not the line of the section or of the file's start."""
    spec = "name: t\n" + TINY_WORKLOAD + "loader:\n  num_workers: 1\n  pin_memory: 3\n"
    with pytest.raises(
        SpecError, match=r"^<spec>:11: loader\.pin_memory: 3 is not allowed; expected true or false$"
    ):
        parse_spec(spec)
    twice = "name: t\n" + TINY_WORKLOAD + "loader:\n  num_workers: 1\n  num_workers: 2\n"
    with pytest.raises(SpecError, match=r"^<spec>:11: duplicate key 'num_workers'$"):
        parse_spec(twice)
