"""harness/probe/check_run.py: `harness plan`'s check run makes the adapters' changes to a
library's modules (a framework's validation before the loop, skipped), whether the script
imports the library before the probe or after it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.adapters import registry
from harness.adapters.base import NoAnswer
from harness.adapters.lightning import Lightning
from harness.probe import check_run


class Changes(NoAnswer):
    def __init__(self, changes: dict[str, Callable[[Any], None]]) -> None:
        self.changes = changes

    def before_loop(self) -> dict[str, Callable[[Any], None]] | None:
        return self.changes


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module `fake_framework_<n>` on the path, not imported yet, and an adapter that asks
    for its `validate` to be replaced; the finders as they were after."""
    name = f"fake_framework_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("def validate():\n    return 'validated'\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def skip(module: Any) -> None:
        module.validate = lambda: "skipped"

    monkeypatch.setattr(registry, "ADAPTERS", [Changes({name: skip})])
    finders = list(sys.meta_path)
    yield name
    sys.meta_path[:] = finders
    sys.modules.pop(name, None)


def test_a_module_imported_after_the_probe_is_changed_as_its_import_ends(library: str) -> None:
    check_run.install()
    module = __import__(library)
    assert module.validate() == "skipped"


def test_a_module_imported_before_the_probe_is_changed_at_once(library: str) -> None:
    module = __import__(library)
    assert module.validate() == "validated"
    check_run.install()
    assert module.validate() == "skipped"


def test_lightnings_adapter_skips_the_trainers_sanity_validation() -> None:
    asked = Lightning().before_loop()
    assert asked is not None
    assert set(asked) == {"lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer"}


def test_a_note_of_a_change_reaches_harness_plan_through_the_jobs_report(
    library: str, harnessed, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    """A change's note (a validation skipped) is said on stderr and told to the check run's job,
    whose report file `harness plan` reads it from whole (check_notes), spaces and all."""
    from harness.adapters import base
    from harness.execution.script import _reported
    from harness.execution.script_check import check_notes
    from harness.execution.script_end import Ended
    from harness.probe import handshake
    from tests.harness.probe.common import script_point

    monkeypatch.setattr(base, "NOTE_HEARERS", [])
    job = harnessed(script_point(), check=True)
    handshake.say_imported()  # as `import harness.probe` does: the check run's changes installed
    line = "harness.probe: harness plan's check run skips the framework's validation: 100% | done"
    base.note(line)
    assert capfd.readouterr().err == line + "\n"
    ended = Ended(returncode=0, stderr_tail="", **_reported(job.report_path))
    assert check_notes(ended) == ["harness plan's check run skips the framework's validation: 100% | done"]
