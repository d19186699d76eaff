"""YAML loaded with the line of every dotted field: what a spec's error messages point at."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.config.spec import SpecError, parse_spec
from harness_schema.yaml_lines import YamlSyntaxError, load_yaml_with_lines
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


def alias_bomb(levels: int = 9) -> str:
    """Nested anchors, each level nine aliases of the one before: 9**levels values expanded
    (the issue's 856-byte spec: `plan` took 33 s and 3.4 GB before its error)."""
    names = "abcdefghijklmnop"[:levels]
    lines = [f"a: &a [{', '.join(['x'] * 9)}]"]
    for before, name in itertools.pairwise(names):
        lines.append(f"{name}: &{name} [{', '.join([f'*{before}'] * 9)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_the_first_field_past_the_bound(tmp_path: Path) -> None:
    """Through the command a user runs, in a subprocess: without the guard it would take
    minutes and gigabytes, so the timeout only keeps a regression from hanging the suite."""
    spec = tmp_path / "bomb.yaml"
    spec.write_text(alias_bomb())
    ended = subprocess.run(
        [sys.executable, "-m", "harness", "plan", str(spec)], capture_output=True, text=True, timeout=60
    )
    assert ended.returncode == 2 and ended.stdout == ""
    assert ended.stderr == (
        f"harness: {spec}:5: e: expands to 66,430 values through aliases (*name); at most 10,000 "
        "are allowed: write the values out, or use fewer aliases\n"
    )


def test_a_few_aliases_are_still_a_spec() -> None:
    loaded = load_yaml_with_lines("x: &x {k: [1, 2]}\ny: *x\nz: [*x, *x]\n")
    assert loaded.data["z"] == [{"k": [1, 2]}, {"k": [1, 2]}]
    assert loaded.lines["y.k"] == 1  # the anchor's line: where the values are written
    spec = parse_spec("name: t\n" + TINY_WORKLOAD + "loader: {num_workers: &n [0, 1]}\nrungs: [full]\n")
    assert spec.field_values["loader.num_workers"] == (0, 1)


@pytest.mark.parametrize("text", ["a: &a [1, *a]\n", "a: &a {b: {c: *a}}\n"])
def test_an_alias_inside_its_own_anchor_is_refused(text: str) -> None:
    with pytest.raises(
        YamlSyntaxError, match=r"^an alias inside its own anchor .* makes an endless value"
    ) as e:
        load_yaml_with_lines(text)
    assert e.value.line == 1


def test_nesting_too_deep_is_one_line_not_a_traceback() -> None:
    with pytest.raises(YamlSyntaxError, match=r"^invalid YAML: nested too deeply for a spec$"):
        load_yaml_with_lines("[" * 5000 + "]" * 5000)
