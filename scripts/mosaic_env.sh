#!/usr/bin/env bash
# Create .venv-mosaic (once): an environment of its own for MosaicML Streaming, which cannot be
# installed beside the `libs` extra (mosaicml-streaming 0.13.0 pins numpy<2.2 and, through
# transformers<5, huggingface-hub<1.0, which breaks Hugging Face `datasets` 5): torch and
# torchvision as in .venv, the harness (editable, `run` extra) and mosaicml-streaming 0.13.0.
# tests/harness/examples/test_mosaic.py runs the harness in it (and skips, saying so, without it).
# Idempotent: a second run only checks. Log: .venv-mosaic/setup.log.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${HARNESS_MOSAIC_VENV:-.venv-mosaic}"
TORCH_SPEC="${HARNESS_TORCH:-torch==2.14.1 torchvision==0.29.1}"
MOSAIC_SPEC="mosaicml-streaming==0.13.0"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.harness-installed"
want="$(cat pyproject.toml; echo "$TORCH_SPEC $MOSAIC_SPEC")"
# shellcheck source=scripts/installer.sh
. scripts/installer.sh
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log="$VENV/setup.log"
    echo "mosaic_env: installing into $VENV ($TORCH_SPEC, $MOSAIC_SPEC and the harness; log: $log)" >&2
    {
        # shellcheck disable=SC2086
        install_packages "$VENV" $TORCH_SPEC &&
        # torch and torchvision named with their releases, so that Mosaic's resolver keeps
        # the ones on disk.
        # One editable install of this checkout at a time (scripts/setup.sh says why).
        (
            if command -v flock >/dev/null 2>&1; then flock 9; fi
            # shellcheck disable=SC2086
            install_packages "$VENV" -e ".[run]" "$MOSAIC_SPEC" $TORCH_SPEC
        ) 9<pyproject.toml &&
        "$VENV/bin/pip" check
    } > "$log" 2>&1 || { tail -30 "$log" >&2; echo "mosaic_env: the install failed; see $log" >&2; exit 1; }
    "$VENV/bin/python" -c "import torch, streaming, harness" # fail here, not later
    printf '%s' "$want" > "$stamp"
fi
