"""The settings are declared once: everything that lists them is derived from the declaration."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from harness.config.plan import expand
from harness.config.spec import SpecError, parse_spec
from harness_schema import settings
from harness_schema.rows import BOOL_COLUMNS, NUMBER_COLUMNS, PLAN_COLUMNS, ROW_COLUMNS
from tests.conftest import TINY_WORKLOAD

SPEC_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "spec.md"


def test_every_loader_setting_reaches_the_rows_the_plan_and_the_course_table() -> None:
    from analysis.render.tables import JEAN_ZAY_COLUMNS

    for f in fields(settings.LoaderSettings):
        assert f.name in ROW_COLUMNS and f.name in PLAN_COLUMNS and f.name in JEAN_ZAY_COLUMNS


def test_column_types_come_from_the_declared_types() -> None:
    assert {"pin_memory", "drop_last", "compile"} <= set(BOOL_COLUMNS)
    assert {"num_workers", "prefetch_factor", "batch_size"} <= set(NUMBER_COLUMNS)
    # amp is written as text (false, bf16, fp16), whatever its Python type
    assert "amp" not in BOOL_COLUMNS and "amp" not in NUMBER_COLUMNS


def test_a_bad_value_is_refused_with_the_declared_words() -> None:
    rule = settings.rule_of(next(f for f in fields(settings.LoaderSettings) if f.name == "prefetch_factor"))
    with pytest.raises(
        SpecError, match=f"loader.prefetch_factor: 0 is not allowed; expected {rule.allowed}$"
    ):
        parse_spec("name: t\n" + TINY_WORKLOAD + "loader: {prefetch_factor: 0}\n")


def test_every_setting_left_out_takes_its_declared_default() -> None:
    spec = parse_spec("name: t\nworkload: {dataset: fake_cifar, model: linear}\nprofile: {}\n")
    (point,) = expand(spec).points
    parsed = {
        "workload": point.workload,
        "loader": point.loader,
        "measure": point.measure,
        "sampler": point.sampler,
        "profile": point.profile,
        "slurm": spec.slurm,
        "limits": point.limits,
    }
    assert set(parsed) == set(settings.SECTIONS)
    # Resolved from other defaults by declared rules: no workers (num_workers 0) takes the
    # worker-only settings' values; one task per GPU (gpus_per_node 1).
    resolved = {f"loader.{name}": value for name, value in settings.WITHOUT_WORKERS.items()}
    resolved["slurm.tasks_per_node"] = 1
    # measure.repeats left out: one run a point, then the contenders' follow-up (spec._measure).
    resolved["measure.decide"] = settings.DEFAULT_DECIDE
    checked = 0
    for section, values in parsed.items():
        for f in fields(settings.SECTIONS[section]):
            default = settings.default_of(f)
            if default is settings.REQUIRED:
                continue
            dotted = f"{section}.{f.name}"
            assert getattr(values, f.name) == resolved.get(dotted, default), dotted
            checked += 1
    assert checked >= 40  # every section's fields, not a sample of them


@pytest.mark.parametrize("section", list(settings.SECTIONS))
def test_the_spec_reference_tables_are_the_declarations(section: str) -> None:
    """Each section's table as scripts/docs_reference.py pastes it: placeholders outside code
    (`transform:<k>`'s `<k>`) escaped, so that the browser shows them."""
    import importlib.util

    script = SPEC_PAGE.parents[2] / "scripts" / "docs_reference.py"
    spec = importlib.util.spec_from_file_location("docs_reference", script)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    table = generator._prose(settings.field_table(section))
    assert table in SPEC_PAGE.read_text(), (
        f"docs/reference/spec.md's table of `{section}:` is out of date with harness_schema/settings.py; "
        "regenerate it: python scripts/docs_reference.py"
    )
