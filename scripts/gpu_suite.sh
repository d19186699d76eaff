#!/usr/bin/env bash
# The GPU acceptance suite (tests/gpu) with the Python at hand, installing nothing: for a GPU
# machine whose PyTorch comes with it (a cluster's module, a vendor's image), often without a
# network. It first says what that Python lacks, or that it sees no GPU, and stops there.
# Where pip can reach the network, the README's test command does it all: bash scripts/test.sh -m gpu
#
#   PYTHON=/path/to/python bash scripts/gpu_suite.sh [pytest options]   # default: python3
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
# The harness from this checkout, for the check below, the tests and the ranks they start
# (torchrun, submitit).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" - <<'PY'
import sys

from harness.extras import missing_modules

# What a job imports (the [run] extra, by module name) and the test runner; HTA is optional:
# its test skips without it.
missing = missing_modules(
    ("torch", "torchvision", "submitit", "pandas", "yaml", "tabulate", "psutil", "pynvml",
     "matplotlib", "pyarrow", "scipy", "pytest")
)
if missing:
    sys.exit(
        f"gpu_suite: {sys.executable} lacks {', '.join(missing)}: pip install -e '.[run,dev]' "
        "into it, or bring their wheels where there is no network"
    )
import torch

if not torch.cuda.is_available():
    sys.exit(f"gpu_suite: torch {torch.__version__} of {sys.executable} sees no CUDA device: run it on a GPU machine")
names = sorted({torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())})
print(f"gpu_suite: {sys.executable}, torch {torch.__version__}, {torch.cuda.device_count()} GPU(s): {', '.join(names)}")
PY
exec "$PYTHON" -m pytest -m gpu tests/gpu "$@"
