"""The torch-free install: a plain `pip install .` of a clone in a fresh venv pulls no torch,
and gives plan, report and export; `harness run` there says which extra to install.

Needs pip to reach the package index (or its wheel cache): skipped, with pip's own words, where
it cannot. Only there: an install that fails while the index answers (a misspelt or withdrawn
dependency) fails the test. About a minute with a warm pip cache (pandas, matplotlib, pyarrow,
submitit wheels).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.analysis.conftest import synthetic_row, write_rows

REPO = Path(__file__).resolve().parents[1]
RUN_EXTRA_PACKAGES = ("torch", "torchvision", "nvidia-ml-py", "scipy")


def index_unreachable(python: Path) -> str | None:
    """pip's last words when it cannot reach its package index (asked for the versions of pip
    itself, which every index has), None when it can. "No matching distribution" alone says
    nothing: a misspelt dependency gives it too, with the index answering."""
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "--retries", "0", "--timeout", "15"]
    probe = subprocess.run(
        [*pip, "index", "versions", "pip"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if probe.returncode == 0:
        return None
    return (probe.stderr.strip().splitlines() or ["(no output)"])[-1]


def install(python: Path, source: Path) -> None:
    """pip install `source` into the venv of `python`: skip where the index is unreachable, fail
    on any other failure, with pip's words."""
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    done = subprocess.run([*pip, "install", "--quiet", str(source)], capture_output=True, text=True)
    if done.returncode == 0:
        return
    offline = index_unreachable(python)
    if offline is not None:
        pytest.skip(f"pip cannot reach the package index: {offline}")
    pytest.fail(
        f"pip install of {source.name} failed while the package index answers:\n{done.stderr[-3000:]}"
    )


def installed_packages() -> list[str]:
    """The top-level packages pyproject.toml installs (its `include` patterns, read, not
    repeated here: a package added there and not copied here failed only in a fresh install)."""
    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return [pattern.rstrip("*") for pattern in found["include"]]


def project_copy(root: Path) -> Path:
    """A copy of the project to install: an in-tree build would leave build/ and *.egg-info
    in the working tree."""
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    for package in installed_packages():
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    return source


def fresh_venv(root: Path) -> Path:
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with `pip install <a copy of the project>`, no extra."""
    root = tmp_path_factory.mktemp("install")
    source = project_copy(root)
    venv = fresh_venv(root)
    install(venv / "bin" / "python", source)
    return venv


def test_a_misspelt_dependency_fails_the_install_instead_of_skipping_it(tmp_path: Path) -> None:
    """The skip above is for an unreachable index only: a dependency the index does not have
    gives pip's "No matching distribution" too, and must fail the test."""
    source = project_copy(tmp_path)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"tabulate>=0.9"', '"tabulatte>=0.9"', 1))
    venv = fresh_venv(tmp_path)
    offline = index_unreachable(venv / "bin" / "python")
    if offline is not None:
        pytest.skip(f"pip cannot reach the package index: {offline}")
    try:
        install(venv / "bin" / "python", source)
    except pytest.skip.Exception as e:
        pytest.fail(f"a misspelt dependency was taken for an unreachable index: {e}")
    except pytest.fail.Exception as e:
        assert "pip install of source failed while the package index answers:" in str(e)
        assert "tabulatte" in str(e)  # pip's words name the dependency
    else:
        pytest.fail("a project with a misspelt dependency installed")


def _harness(venv: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "harness"), *args], cwd=cwd, capture_output=True, text=True)


def test_the_base_install_pulls_no_torch(base_venv: Path) -> None:
    listed = subprocess.run(
        [str(base_venv / "bin" / "python"), "-m", "pip", "list", "--format", "freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.lower()
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert "pipeline-harness" in installed
    assert installed.isdisjoint(RUN_EXTRA_PACKAGES), sorted(installed & set(RUN_EXTRA_PACKAGES))
    imported = subprocess.run([str(base_venv / "bin" / "python"), "-c", "import torch"], capture_output=True)
    assert imported.returncode != 0


def test_plan_works_without_torch(base_venv: Path) -> None:
    done = _harness(base_venv, "plan", "jobs/quickstart.yaml")
    assert done.returncode == 0, done.stderr
    assert "point" in done.stdout


def test_report_and_export_work_without_torch(base_venv: Path, tmp_path: Path) -> None:
    write_rows(tmp_path, synthetic_row(num_workers=0, point_id="p0"), synthetic_row(num_workers=2))
    done = _harness(base_venv, "report", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "recommendation for n1" in done.stdout
    out = tmp_path / "rows.parquet"
    done = _harness(base_venv, "report", str(tmp_path), "--format", "parquet", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0


def test_run_says_which_extra_to_install(base_venv: Path, tmp_path: Path) -> None:
    done = _harness(
        base_venv, "run", str(REPO / "jobs/quickstart.yaml"), "--results", str(tmp_path / "results")
    )
    assert done.returncode == 2
    assert done.stderr == (
        "harness: run needs PyTorch: pip install 'pipeline-harness[run]' "
        "(or load your cluster's PyTorch module first)\n"
    )
    assert not (tmp_path / "results").exists()  # refused before a sweep folder is made


def test_the_worker_says_which_extra_to_install(base_venv: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(base_venv / "bin" / "python"), "-m", "harness.backends.worker", str(tmp_path), "--index", "0"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "pip install 'pipeline-harness[run]'" in done.stderr


def test_the_missing_extra_is_named_without_importing_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.extras import MissingExtra, require_run_extra

    require_run_extra("run")  # this venv has the run extra: no complaint
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    with pytest.raises(MissingExtra, match=r"^run needs PyTorch: pip install 'pipeline-harness\[run\]' \("):
        require_run_extra("run")


def test_tune_on_slurm_imports_no_torch(base_venv: Path) -> None:
    # The driver runs on a login node: it submits and follows, the jobs run the points.
    modules = (
        "harness.tune.driver, harness.backends.slurm.backend, harness.backends.follow, analysis.tune.report"
    )
    code = f"import sys, {modules}; assert 'torch' not in sys.modules, 'torch imported'"
    done = subprocess.run([str(base_venv / "bin" / "python"), "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


# The import names of the `libs` extra's packages (pyproject.toml), and of the `profile` extra's
# HolisticTraceAnalysis: a GPU machine's own PyTorch (scripts/gpu_suite.sh) often has none of them.
OPTIONAL_MODULES = (
    "datasets",
    "litdata",
    "torchdata",
    "lightning",
    "jsonargparse",
    "accelerate",
    "timm",
    "transformers",
    "hta",
)

_COLLECT_WITHOUT = """
import importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Missing())
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests"]))
"""


def test_every_optional_library_is_named_here() -> None:
    libs = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["libs"]
    assert len(libs) == len(OPTIONAL_MODULES) - 1, (
        f"the libs extra has {len(libs)} packages and OPTIONAL_MODULES names {len(OPTIONAL_MODULES) - 1}: "
        "add the new library's import name, so that the collection test below hides it"
    )


def test_the_suite_collects_without_the_optional_libraries() -> None:
    """`pytest -m gpu` with the `run` extra alone (the GPU suite on a machine's own PyTorch): a
    test module that imports an optional library at its top must skip, saying so, not stop the
    collection of every other module."""
    code = _COLLECT_WITHOUT.format(blocked=set(OPTIONAL_MODULES))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    errors = [line for line in done.stdout.splitlines() if line.startswith("ERROR ")]
    assert not errors, done.stdout[-3000:]
    assert done.returncode in (0, 5), done.stdout[-3000:]  # 5: every test deselected, none in error
    assert "is not installed" in done.stdout  # the modules that need one say so


def test_the_install_page_lists_every_library_of_the_libs_extra() -> None:
    """docs/getting-started/install.md's libs row names each package with its pinned version
    (transformers was missing from it)."""
    libs = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["libs"]
    page = (REPO / "docs" / "getting-started" / "install.md").read_text()
    (row,) = [line for line in page.splitlines() if '`pip install ".[libs]"`' in line]
    missing = [pin for pin in libs if " ".join(pin.split("==")) not in row]
    assert missing == [], f"install.md's libs row lacks {missing}"
