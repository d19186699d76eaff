#!/usr/bin/env bash
# The README's second command: set up, lint, type-check, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check harness analysis tests benchmarks
.venv/bin/ruff format --check harness analysis tests benchmarks
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
