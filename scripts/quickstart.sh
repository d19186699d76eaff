#!/usr/bin/env bash
# The README's first command: set up, then run jobs/quickstart.yaml inline on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/harness run "${1:-jobs/quickstart.yaml}"
