#!/usr/bin/env bash
# The README's first command: set up (the `run` extra alone: what a measurement needs), then
# run jobs/quickstart.yaml inline on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
HARNESS_EXTRAS="${HARNESS_EXTRAS:-run}" bash scripts/setup.sh
exec .venv/bin/harness run "${1:-jobs/quickstart.yaml}"
