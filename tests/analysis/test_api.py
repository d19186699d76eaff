"""The notebook API (`import analysis`), as analysis/__init__.py documents it."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import analysis

REPO = Path(__file__).resolve().parents[2]


def test_the_documented_names_are_exported() -> None:
    documented = {
        "tidy",
        "load_results",
        "load_meta",
        "load_samples",
        "summarize",
        "loader_tables",
        "recommend",
        "ladder_verdicts",
        "compare",
        "find_stragglers",
        "build_report",
    }
    assert documented <= set(analysis.__all__)
    for name in analysis.__all__:
        assert callable(getattr(analysis, name)), name


def test_the_functions_named_like_modules_stay_functions() -> None:
    """`analysis.compare` and `analysis.recommend` are modules too: importing them must not
    replace the functions a notebook calls."""
    importlib.import_module("analysis.compare")
    importlib.import_module("analysis.recommend")
    from analysis import compare, recommend

    assert compare is analysis.compare and compare.__module__ == "analysis.compare"
    assert recommend is analysis.recommend and recommend.__module__ == "analysis.recommend"


def test_a_notebook_session_from_the_docstring(real_sweep: Path) -> None:
    frame = analysis.tidy([real_sweep])
    loaded = analysis.load_results([real_sweep])
    assert len(frame) == len(loaded.rows) and loaded.problems == []
    summary = analysis.summarize(loaded.rows)
    tables = analysis.loader_tables(summary)
    assert set(tables) == {"node-a", "node-b"}
    recs = analysis.recommend(summary)
    assert {r.group for r in recs} == {"node-a", "node-b"}
    assert analysis.build_report([real_sweep]).points == 3


def test_compare_from_a_notebook(real_sweep_pair: tuple[Path, Path]) -> None:
    before, after = real_sweep_pair
    comparison = analysis.compare([before], [after])
    assert comparison.matched == 2  # num_workers 0 and 1, matched on their settings


def test_import_analysis_never_imports_torch_or_matplotlib() -> None:
    code = "import sys, analysis; print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


def test_the_docs_notebook_runs_as_written(real_sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (REPO / "docs" / "guides" / "notebook.md").read_text()
    snippet = re.search(r"```python\n# a notebook\n(.*?)```", text, re.S)
    assert snippet, "docs/guides/notebook.md shows a notebook"
    namespace: dict[str, object] = {}
    exec(snippet.group(1).replace("results/grid", str(real_sweep)), namespace)
    assert "samples_per_s" in capsys.readouterr().out
    assert set(namespace["tables"]) == {"node-a", "node-b"}  # type: ignore[call-overload]
