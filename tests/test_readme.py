"""The README and the documentation run as written (a front door that lies is a defect).

What a page presents as runnable is run: every file it shows whole (a fenced block whose first
line names it, `# mypipeline.py`, `# jobs/spectra.yaml`; an `(abridged)` one is not whole) is
written out, its Python compiled and its specs planned, and the walk-throughs are run. Outputs
pasted under `<!-- output: COMMAND -->` are what COMMAND prints today (scripts/docs_outputs.py
regenerates them), and the reference pages are what scripts/docs_reference.py generates from
the code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
NAMED = re.compile(r"^```(?:python|yaml)\n# ([\w./-]+\.(?:py|yaml))\n(.*?)^```$", re.M | re.S)


def named_blocks(page: Path) -> dict[str, str]:
    """The files a page shows whole: name -> text."""
    return {m.group(1): m.group(2) for m in NAMED.finditer(page.read_text())}


def write_files(page: Path, folder: Path) -> dict[str, str]:
    files = named_blocks(page)
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`harness ...` as the page says to run it: in the folder of its files, PYTHONPATH=."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env={"PYTHONPATH": f"{cwd}{os.pathsep}{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


RUNNABLE = [page for page in PAGES if named_blocks(page)]


def test_the_pages_show_runnable_files() -> None:
    shown = {name for page in RUNNABLE for name in named_blocks(page)}
    assert {"mypipeline.py", "jobs/spectra.yaml", "mytext.py", "jobs/text.yaml", "grid.yaml"} <= shown


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_page_shows_compiles_and_plans(page: Path, tmp_path: Path) -> None:
    files = write_files(page, tmp_path)
    for name, text in files.items():
        if name.endswith(".py"):
            compile(text, name, "exec")
    for name in (n for n in files if n.endswith(".yaml")):
        out = harness("plan", name, cwd=tmp_path)
        assert out.returncode == 0, f"{page.name}: harness plan {name}: {out.stderr}"


def _table_rows(stdout: str) -> list[str]:
    """The rows of the first table: after its header (the line of the settings every row shares
    comes before it) and its rule."""
    lines = stdout.split("\n\n")[0].splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith("jobid"))
    return lines[header + 2 :]


def test_the_own_pipeline_example_runs(tmp_path: Path) -> None:
    write_files(DOCS / "getting-started" / "own-pipeline.md", tmp_path)
    out = harness("run", "jobs/spectra.yaml", "measure.warmup_steps=1", "measure.steps=2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(_table_rows(out.stdout)) == 2  # num_workers 0 and 2


def test_the_text_example_runs(tmp_path: Path) -> None:
    """The any-pipeline walk-through: collate, batch sampler and loss of the user's own."""
    write_files(DOCS / "guides" / "own-workload.md", tmp_path)
    small = ["measure.warmup_steps=1", "measure.steps=2", "measure.repeats=1", "rungs=[full]"]
    out = harness("run", "jobs/text.yaml", *small, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(_table_rows(out.stdout)) == 2


def test_the_pasted_outputs_are_what_the_commands_print() -> None:
    out = subprocess.run(
        [sys.executable, "scripts/docs_outputs.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_generated_reference_pages_are_the_code() -> None:
    """docs/reference/cli.md from the parser, spec.md's tables from the settings' declarations,
    layout.md from the modules' docstrings, columns.md from the rows' fields."""
    out = subprocess.run(
        [sys.executable, "scripts/docs_reference.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_readme_is_a_front_door() -> None:
    """Short enough to read to the end, and it leads into every part of the manual."""
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    for part in ("getting-started", "guides", "reference", "concepts"):
        assert f"](docs/{part}/" in text, part


def _joined(page: Path) -> str:
    return " ".join(page.read_text().split())


def test_the_docs_say_in_which_order_repeats_run() -> None:
    """Here, passes of one repeat of each point (tests/harness/test_sweeps.py reads that order
    from the rows); on Slurm, a task's repeats back to back, and why."""
    timing = _joined(DOCS / "concepts" / "timing.md")
    assert "in passes of one repeat each: A0 B0 C0, A1 B1 C1, ... (not A0 A1 A2 B0 ...)" in timing
    assert "measures each missing unit once, still in passes" in timing
    assert "A task runs its point's repeats back to back" in _joined(DOCS / "guides" / "slurm.md")


def test_a_stale_pasted_output_is_rewritten_from_a_real_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scripts/docs_outputs.py: what a block shows is what its command prints, the reader's
    `$ command` line kept, a slow block left alone without --slow."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_outputs", ROOT / "scripts" / "docs_outputs.py")
    assert spec and spec.loader
    outputs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(outputs)
    page = tmp_path / "page.md"
    slow = "<!-- output(slow): echo slow -->\n```\nkept\n```\n"
    page.write_text("<!-- output: echo fresh; echo err >&2 -->\n```\n$ say it\nstale\n```\n" + slow)
    monkeypatch.setattr(outputs, "ROOT", tmp_path)
    monkeypatch.setattr(outputs, "pages", lambda: [page])
    assert outputs.main(["--check"]) == 1
    assert outputs.main([]) == 0
    assert (
        page.read_text()
        == "<!-- output: echo fresh; echo err >&2 -->\n```\n$ say it\nfresh\nerr\n```\n" + slow
    )
    assert outputs.main(["--check"]) == 0
