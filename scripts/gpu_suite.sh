#!/usr/bin/env bash
# The tests on a GPU machine with the Python at hand, installing nothing: for a machine whose
# PyTorch comes with it (a cluster's module, a vendor's image), often without a network.
# It first says what that Python lacks, or that it sees no GPU, and stops there. Then:
#   1. the GPU acceptance suite (tests/gpu, marked gpu): every GPU path that this machine's
#      GPUs can prove; a test that needs more (two GPUs, HolisticTraceAnalysis) skips, saying so;
#   2. the rest of the suite, as scripts/test.sh runs it (lint and types where that Python has
#      ruff and mypy, then every test not marked gpu), unless --gpu-only.
# Where pip can reach the network, the README's test command does it all: bash scripts/test.sh
#
#   PYTHON=/path/to/python bash scripts/gpu_suite.sh [--gpu-only] [pytest options]   # default: python3
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
gpu_only=0
if [ "${1:-}" = "--gpu-only" ]; then
    gpu_only=1
    shift
fi
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
echo "gpu_suite: 1/2 the GPU acceptance suite (tests/gpu)"
gpu_status=0
"$PYTHON" -m pytest -m gpu tests/gpu "$@" || gpu_status=$?
if [ "$gpu_only" = 1 ]; then
    exit "$gpu_status"
fi
echo "gpu_suite: 2/2 the rest of the suite (scripts/test.sh with $PYTHON, nothing installed)"
rest_status=0
HARNESS_TEST_PYTHON="$PYTHON" bash scripts/test.sh -m "not gpu" "$@" || rest_status=$?
echo "gpu_suite: tests/gpu exit status $gpu_status, the rest $rest_status"
exit $((gpu_status != 0 || rest_status != 0))
