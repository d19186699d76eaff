from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

TINY_WORKLOAD = """\
workload:
  dataset: fake_cifar
  dataset_args: {size: 48, image_size: 8, resize: null}
  model: linear
  batch_size: 8
  device: cpu
measure: {warmup_steps: 1, steps: 3, repeats: 1}
"""


@pytest.fixture
def write_spec(tmp_path: Path):
    """write_spec(text) -> path of a spec file holding the dedented text."""

    def write(text: str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


# The variables by which a process learns its rank. Code under test sets some of them (submitit's
# export, init_process_group); one left behind makes every later in-process point a rank of a
# larger job that waits 300 s for its peers. A test that changes them must restore them.
_RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def _no_rank_variables_left_behind():
    before = {key: os.environ.get(key) for key in _RANK_VARIABLES}
    yield
    after = {key: os.environ.get(key) for key in _RANK_VARIABLES}
    changed = {key: value for key, value in after.items() if value != before[key]}
    for key, value in before.items():  # restore, so one leak fails one test, not the rest
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    assert not changed, f"the test left rank variables behind: {changed}"


@pytest.fixture
def tmpfs(tmp_path: Path):
    """A 1 MiB tmpfs mounted for the test (a disk that can fill, or be remounted read-only:
    `remount_read_only(path)`); skipped where the tests cannot mount (not root, no
    CAP_SYS_ADMIN)."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the CI runs the tests as root)")
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def remount_read_only(mount: Path) -> None:
    import subprocess

    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)


# The test command (scripts/test.sh) runs the suite in two passes: the independent tests in
# parallel (pytest-xdist), then the tests marked `serial`, two at a time, and those also marked
# `alone` with nothing beside them: the serial tests judge a measured figure (a cost injected
# and named by the ladder, nothing named where nothing is), which a machine shared with the
# parallel pass would make noisier than their margins assume. The
# tests that submit to the one Slurm cluster run one after another on one xdist process. A
# test of a real pipeline's run is `slow`, left out of the developer's quick pass (`-m "not
# slow"`, docs/contributing.md).
SLOW_FOLDERS = ("slurm", "jobs", "gpu")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers its marker only where it is loaded; the serial pass runs without
    # it (-p no:xdist), and --strict-markers would refuse the mark the hook below adds.
    config.addinivalue_line("markers", "xdist_group(name): the tests of a group run on one xdist process")


# tryfirst: pytest-xdist's worker reads the xdist_group marks in a hook of its own (it appends
# each test's group to its id, which --dist loadgroup schedules by), registered after this file,
# so called before this hook unless this one goes first: the marks came too late, every group
# was ignored, and a module's costly fixture was made once per process that ran one of its tests
# (tests/test_install.py's venv three times, 35-38 s each, in a CI-equivalent run). pytest 9.2
# ignores the id xdist 3.8 sets (item._nodeid): the groups need pytest < 9.2 as well.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    for item in items:
        # A module's costly fixture (a venv installed, a sweep run) is made once per process
        # that runs its tests: under pytest-xdist (--dist loadgroup), keep them on one.
        if item.get_closest_marker("slurm") is not None:
            # One cluster of two nodes: its tests one after another, on one xdist process, in
            # the parallel pass; those that judge a figure are marked serial themselves.
            item.add_marker(pytest.mark.xdist_group("slurm"))
        elif _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
        folder = Path(str(item.path)).resolve().relative_to(tests).parts[0]
        if folder in SLOW_FOLDERS or item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.slow)


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs)
