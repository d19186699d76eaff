#!/usr/bin/env bash
# The README's second command: set up, lint, type-check, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check harness analysis tests benchmarks
.venv/bin/ruff format --check harness analysis tests benchmarks
.venv/bin/mypy
# The browser test of the HTML report (tests/analysis/test_browser.py) needs Chromium: installed
# here only as root on Debian when it is missing (a fresh CI machine); otherwise that test skips.
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] && ! command -v chromium >/dev/null 2>&1; then
    echo "installing chromium for the browser test (log: /tmp/harness-chromium-install.log)"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
        >/tmp/harness-chromium-install.log 2>&1 ||
        echo "chromium could not be installed (see the log): the browser test will be skipped"
fi
exec .venv/bin/python -m pytest "$@"
