#!/usr/bin/env bash
# Create .venv (once) and install the harness with the extras HARNESS_EXTRAS names (all, by default): its `run` extra (what a job
# needs: torch, torchvision, NVML, scipy), its `dev` extra (the test tools, and the docs site through the `docs` extra it includes)
# and its `libs` extra (the data libraries of the shipped examples, Hugging Face datasets,
# LitData, torchdata and Lightning, and the training libraries of the shipped scripts, Hugging
# Face Accelerate and timm, whose examples run in the tests).
# Idempotent: a second run only checks. torch/torchvision are pinned to the releases these machines carry on
# disk. A login node that only reads results needs `pip install .` alone, and a cluster whose
# PyTorch comes from a module installs the base into that environment: docs/getting-started/install.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${HARNESS_VENV:-.venv}"
TORCH_SPEC="${HARNESS_TORCH:-torch==2.14.1 torchvision==0.29.1}"
# The extras to install: all of them for the tests (scripts/test.sh); the quick start needs
# `run` alone (scripts/quickstart.sh), which spares a first-time user minutes of installing
# the examples' libraries, the test tools and the documentation site.
EXTRAS="${HARNESS_EXTRAS:-run,dev,libs}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.harness-installed"
want="$(cat pyproject.toml; echo "$TORCH_SPEC"; echo "$EXTRAS")"
# A venv set up with every extra serves the quick start as it is.
everything="$(cat pyproject.toml; echo "$TORCH_SPEC"; echo "run,dev,libs")"
if [ -f "$stamp" ] && [ "$EXTRAS" = run ] && [ "$(cat "$stamp")" = "$everything" ]; then
    exit 0
fi
# shellcheck source=scripts/installer.sh
. scripts/installer.sh
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    # The installer's chatter goes to a log, so that the commands' output stays the tables.
    log="$VENV/setup.log"
    echo "setup: installing into $VENV ($TORCH_SPEC and the harness; a minute the first time; log: $log)" >&2
    {
        # shellcheck disable=SC2086
        install_packages "$VENV" $TORCH_SPEC &&
        # The editable install writes pipeline_harness.egg-info beside pyproject.toml: one
        # install at a time (scripts/test.sh installs .venv-mosaic meanwhile; flock, where there, takes turns).
        (
            if command -v flock >/dev/null 2>&1; then flock 9; fi
            install_packages "$VENV" -e ".[$EXTRAS]"
        ) 9<pyproject.toml
    } > "$log" 2>&1 || { tail -30 "$log" >&2; echo "setup: the install failed; see $log" >&2; exit 1; }
    # fail here, not later
    if [ "$EXTRAS" = run ]; then
        "$VENV/bin/python" -c "import torch, torchvision, scipy, pyarrow, harness"
    else
        "$VENV/bin/python" -c "import torch, torchvision, scipy, pyarrow, mkdocs, xdist, datasets, litdata, torchdata.nodes, lightning, accelerate, timm, transformers, harness"
    fi
    printf '%s' "$want" > "$stamp"
fi
