"""scripts/installer.sh: uv where it can be had, with pip's own settings handed over; pip where
not, saying so. The venv's `python` and `pip` are stand-ins that record how they were called
(the real installs are what every run of scripts/test.sh does)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def uv_spec() -> str:
    """The uv release installer.sh installs (its UV_SPEC line)."""
    found = re.search(r'^UV_SPEC="([^"]+)"$', (REPO / "scripts" / "installer.sh").read_text(), re.M)
    assert found is not None, "scripts/installer.sh sets UV_SPEC"
    return found[1]


UV_SPEC = uv_spec()

PIP_CONFIG = """\
global.find-links='/wheels/one /wheels/two'
global.extra-index-url='file:///index/a file:///index/b'
global.constraint='/etc/constraints.txt'
:env:.index-url='https://mirror.example/simple'
global.cert='/etc/ssl/certs/ca.crt'
"""


def fake_venv(root: Path, *, uv: bool, uv_install_ok: bool = True) -> Path:
    """A venv whose python and pip write their arguments (and the UV_* variables they were
    given) to calls.log. `uv`: whether `python -m uv` is there; pip installs uv when asked only
    if `uv_install_ok`."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    log = root / "calls.log"
    python = f"""#!/usr/bin/env bash
if [ "$1 $2" = "-m uv" ]; then
    {"" if uv else "exit 1"}
    if [ "$3" = --version ]; then exit 0; fi
    echo "uv $* | $(env | grep ^UV_ | sort | tr '\\n' ' ')" >> {log}
    exit 0
fi
exit 1
"""
    pip = f"""#!/usr/bin/env bash
if [ "$1" = config ]; then printf '%s' "{PIP_CONFIG}"; exit 0; fi
echo "pip $*" >> {log}
if [ "$*" = "install {UV_SPEC}" ]; then exit {0 if uv_install_ok else 1}; fi
exit 0
"""
    for name, text in (("python", python), ("pip", pip)):
        path = venv / "bin" / name
        path.write_text(text)
        path.chmod(0o755)
    return venv


def install(venv: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = f'set -euo pipefail; . scripts/installer.sh; install_packages "{venv}" "$@"'
    clean = {"PATH": "/usr/bin:/bin"} | (env or {})
    return subprocess.run(
        ["bash", "-c", script, "install", *args], cwd=REPO, capture_output=True, text=True, env=clean
    )


def calls(root: Path) -> list[str]:
    return (root / "calls.log").read_text().splitlines()


def test_uv_installs_with_pips_own_settings_and_pips_resolution(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path, uv=True)
    done = install(venv, "torch==2.14.1", "-e", ".[run]")
    assert done.returncode == 0, done.stderr
    (call,) = calls(tmp_path)
    command, _, env = call.partition(" | ")
    assert command == (
        f"uv -m uv pip install --python {venv}/bin/python --compile-bytecode "
        "--index-strategy unsafe-best-match torch==2.14.1 -e .[run]"
    )
    assert env.split() == [
        "UV_CONSTRAINT=/etc/constraints.txt",
        "UV_EXTRA_INDEX_URL=file:///index/a",
        "file:///index/b",
        "UV_FIND_LINKS=/wheels/one,/wheels/two",
        "UV_INDEX_URL=https://mirror.example/simple",
    ]


def test_a_uv_setting_already_given_is_kept(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path, uv=True)
    done = install(venv, "six", env={"UV_FIND_LINKS": "/mine"})
    assert done.returncode == 0, done.stderr
    assert "UV_FIND_LINKS=/mine " in calls(tmp_path)[0]


def test_uv_installed_into_the_venv_then_failing_leaves_the_install_to_pip(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path, uv=False)  # pip installs uv; `python -m uv` still fails
    done = install(venv, "six")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["installer: uv failed (above); pip installs instead"]
    assert calls(tmp_path) == [f"pip install {UV_SPEC}", "pip install --upgrade pip", "pip install six"]


def test_without_uv_pip_installs_and_says_so(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path, uv=False, uv_install_ok=False)
    done = install(venv, "torch==2.14.1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["installer: uv could not be installed (above); pip installs instead"]
    assert calls(tmp_path) == [
        f"pip install {UV_SPEC}",
        "pip install --upgrade pip",
        "pip install torch==2.14.1",
    ]
