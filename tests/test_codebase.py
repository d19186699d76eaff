"""The codebase's own rules, checked: short functions, each setting declared once, a
torch-free analysis, one direction of imports between the packages and no circle of modules
(docs/architecture.md says why each matters)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Collection, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "analysis", "harness_schema")
MAX_FUNCTION_LINES = 60
LOADER_SETTINGS = frozenset(
    {"num_workers", "persistent_workers", "pin_memory", "non_blocking", "prefetch_factor", "drop_last"}
)
SETTINGS_MODULE = Path("harness_schema/settings.py")


def modules() -> list[Path]:
    """Every Python file of the packages, relative to the repository."""
    return sorted(p.relative_to(REPO) for package in PACKAGES for p in (REPO / package).rglob("*.py"))


def parsed(path: Path) -> ast.Module:
    return ast.parse((REPO / path).read_text(), filename=str(path))


def test_no_function_is_longer_than_60_lines() -> None:
    long = [
        f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in modules()
        for node in ast.walk(parsed(path))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(long)


def _string_collections(tree: ast.Module) -> list[set[str]]:
    """The string constants of each list, tuple or set literal."""
    return [
        {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        for node in ast.walk(tree)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set))
    ]


def _class_fields(tree: ast.Module) -> dict[str, set[str]]:
    """Class name -> the names its body annotates (a dataclass's fields)."""
    return {
        node.name: {
            s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        }
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }


def test_the_loader_settings_are_declared_in_one_place() -> None:
    """A new DataLoader knob is one field in LoaderSettings: a module that lists the knobs
    again (a literal, or fields of its own) would silently miss it."""
    declared = {
        name for name, names in _class_fields(parsed(SETTINGS_MODULE)).items() if names >= LOADER_SETTINGS
    }
    assert declared == {"LoaderSettings"}
    again = [
        f"{path}: {what}"
        for path in modules()
        if path != SETTINGS_MODULE
        for what in (
            *(
                "a literal listing them all"
                for strings in _string_collections(parsed(path))
                if strings >= LOADER_SETTINGS
            ),
            *(
                f"class {name} declares them all"
                for name, names in _class_fields(parsed(path)).items()
                if names >= LOADER_SETTINGS
            ),
        )
    ]
    assert not again, (
        f"the loader settings are declared in {SETTINGS_MODULE} only (use LOADER_COLUMNS or "
        "fields(LoaderSettings)); declared again in:\n" + "\n".join(again)
    )


def test_the_worker_only_settings_are_named_once() -> None:
    """What PyTorch refuses without workers (prefetch_factor, persistent_workers) is a rule of
    settings.py (WITHOUT_WORKERS); a module that names them again as a pair restates it."""
    from harness_schema.settings import WORKER_ONLY

    assert set(WORKER_ONLY) == {"prefetch_factor", "persistent_workers"}
    again = [
        str(path)
        for path in modules()
        if path != SETTINGS_MODULE
        and any(strings >= set(WORKER_ONLY) for strings in _string_collections(parsed(path)))
    ]
    assert not again, f"use settings.WORKER_ONLY or WITHOUT_WORKERS; the pair is restated in: {again}"


IMPORT_ALL = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(" ".join(m for m in ("torch", "torchvision") if m in sys.modules))
"""


def test_the_analysis_never_imports_torch() -> None:
    """It runs on login nodes and laptops, from result folders alone."""
    names = [
        ".".join(path.with_suffix("").parts).removesuffix(".__init__")
        for path in modules()
        if path.parts[0] == "analysis"
    ]
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, *names],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"importing {', '.join(names)} imported {out.stdout.strip()}"


BACKEND_NAMES = frozenset({"inline", "local", "slurm", "sbatch"})


def _named_constants(node: ast.expr) -> list[object]:
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return []


def test_only_the_backends_compare_a_backend_name() -> None:
    """Where points run has a type (harness/backends/base.py): a policy outside
    harness/backends/ asks the backend (`here`, its methods) and never switches on its name,
    so that adding a backend is one module and one line of the registry."""
    switches = [
        f"{path}:{node.lineno}"
        for path in modules()
        if path.parts[:2] != ("harness", "backends")
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Compare)
        and any(v in BACKEND_NAMES for e in (node.left, *node.comparators) for v in _named_constants(e))
    ]
    assert not switches, "backend names compared outside harness/backends/:\n" + "\n".join(switches)


def module_name(path: Path) -> str:
    return ".".join(path.with_suffix("").parts).removesuffix(".__init__")


def imported(path: Path, known: Collection[str]) -> set[str]:
    """The modules of the packages that a file imports, at its top or inside a function (a
    lazy import still ties the two modules together). `from package import name` counts as
    the module `package.name` where that is one, else as `package`."""
    found: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(sub for sub in subs if sub in known)
            if not all(sub in known for sub in subs):
                found.add(node.module)
    return {name for name in found if name in known} - {module_name(path)}


def import_graph() -> dict[str, set[str]]:
    names = {module_name(path): path for path in modules()}
    return {name: imported(path, names) for name, path in names.items()}


# Which package may import which: harness_schema is the shared, torch-free base; the analysis reads
# result folders alone (a login node, a laptop) and so never imports the harness, which may
# import it (the report at the end of a run, tune's model).
MAY_IMPORT = {
    "harness_schema": {"harness_schema"},
    "analysis": {"analysis", "harness_schema"},
    "harness": set(PACKAGES),
}


def test_the_packages_import_in_one_direction() -> None:
    wrong = [
        f"{name} imports {target}"
        for name, targets in import_graph().items()
        for target in sorted(targets)
        if target.split(".")[0] not in MAY_IMPORT[name.split(".")[0]]
    ]
    assert not wrong, "harness -> analysis -> harness_schema, never back:\n" + "\n".join(wrong)


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in graph[name]:
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            group = [stack.pop()]
            while group[-1] != name:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_no_circle_of_imports() -> None:
    """Two modules that import each other (even lazily, inside a function) are one concept
    split in two, or a third one missing: move what both need to a module both import."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    found = circles(import_graph())
    assert not found, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in found)


LIBRARY_NAME = re.compile(
    r"(?<![a-z])(timm|webdataset|lightning|accelerate|transformers|litdata|mosaic|mosaicml|torchdata"
    r"|hugging ?face)(?![a-z])",
    re.IGNORECASE,
)
"""The libraries the adapters know (harness/adapters/registry.py), as code or prose names them:
a word of its own (`SplitDataset` holds "litdata" and names nothing; `lightning_fabric` names
Lightning)."""
MAY_NAME_LIBRARIES = (
    Path("harness/adapters"),
    Path("harness/examples"),
    Path("harness/workloads/make_data.py"),  # `harness make-data --webdataset` writes its shards
    Path("harness/cli.py"),  # make-data's flag
)
MAX_MODULES_NAMING_LIBRARIES = 2


def test_no_core_module_names_a_library() -> None:
    """What is a library's is its adapter's (harness/adapters/: one file, one registry line):
    the core asks the registry and never names a library, in code or in prose. The examples,
    and the data maker with the flag that asks for its layout, may."""
    core = [
        path
        for path in modules()
        if path.parts[0] == "harness" and not any(path.is_relative_to(p) for p in MAY_NAME_LIBRARIES)
    ]
    named = [
        f"{path}:{number}: {line.strip()}"
        for path in core
        for number, line in enumerate((REPO / path).read_text().splitlines(), start=1)
        if LIBRARY_NAME.search(line)
    ]
    assert not named, "a library named in a core module (move it to its adapter):\n" + "\n".join(named)
    allowed = {p for p in MAY_NAME_LIBRARIES if p.suffix == ".py"}
    assert len(allowed) <= MAX_MODULES_NAMING_LIBRARIES
