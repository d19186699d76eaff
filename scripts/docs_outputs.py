"""Regenerate the outputs pasted in README.md and docs/ from real runs, never by hand.

A fenced block preceded by `<!-- output: COMMAND -->` holds what COMMAND prints (stdout and
stderr), run with bash from the repository's root; `<!-- output(slow): COMMAND -->` marks a
command that takes a while (the quick start: about a minute), run only with --slow. A first line
`$ ...` in the block is the command as the reader would type it, and is kept.

    python scripts/docs_outputs.py            # rewrite the fast blocks
    python scripts/docs_outputs.py --slow     # and the slow ones (a real quick start)
    python scripts/docs_outputs.py --check    # exit 1 naming each fast block out of date (tests)

A command runs once however many blocks show it. `harness` is this checkout's: the directory
of the running Python comes first on PATH, and the checkout first on PYTHONPATH.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- output(\(slow\))?: (.+?) -->\n```[^\n]*\n(.*?)^```$", re.M | re.S)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def run(command: str) -> str:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep),
        "COLUMNS": "100",
    }
    out = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    text = "\n".join(line.rstrip() for line in (out.stdout + out.stderr).strip("\n").splitlines())
    return text + "\n"


def shown(pasted: str) -> tuple[str, str]:
    """The block's `$ command` line (or ""), and the output after it."""
    if pasted.startswith("$ "):
        first, _, rest = pasted.partition("\n")
        return first + "\n", rest
    return "", pasted


def blocks(slow: bool) -> list[tuple[Path, str, str]]:
    """(page, command, pasted output) of every marked block, the slow ones only with `slow`."""
    found = []
    for page in pages():
        for m in MARKER.finditer(page.read_text()):
            if slow or not m.group(1):
                found.append((page, m.group(2), shown(m.group(3))[1]))
    return found


def main(argv: list[str]) -> int:
    check, slow = "--check" in argv, "--slow" in argv
    outputs: dict[str, str] = {}
    stale = []
    for page, command, pasted in blocks(slow):
        if command not in outputs:
            outputs[command] = run(command)
        if outputs[command] != pasted:
            stale.append(f"{page.relative_to(ROOT)}: the output of `{command}` differs from what is pasted")
    if check:
        for line in stale:
            print(f"{line}: python scripts/docs_outputs.py")
        return 1 if stale else 0

    def fresh(m: re.Match[str]) -> str:
        command = m.group(2)
        if command not in outputs:
            return m.group(0)
        head = m.group(0)[: m.start(3) - m.start(0)]
        return f"{head}{shown(m.group(3))[0]}{outputs[command]}```"

    for page in pages():
        text = page.read_text()
        new = MARKER.sub(fresh, text)
        if new != text:
            page.write_text(new)
            print(f"wrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
