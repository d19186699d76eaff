#!/usr/bin/env bash
# The README's test command: set up, lint, type-check, build the documentation site, and run the
# whole test suite (which checks the docs' links, runs their examples, and their generated pages).
#
# HARNESS_TEST_PYTHON=/path/to/python: that Python instead of .venv, with nothing set up or
# installed (a GPU machine's own PyTorch, often without a network: scripts/gpu_suite.sh runs
# this so); ruff and mypy run where that Python has them, and a line says so where it has not.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${HARNESS_TEST_PYTHON:-}" ]; then
    py="$HARNESS_TEST_PYTHON"
    # The harness from this checkout, in an interpreter where it is not installed.
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    # MosaicML Streaming in an environment of its own (it cannot sit beside the `libs` extra),
    # for tests/harness/examples/test_mosaic.py, which skips, saying so, where it is missing.
    # Installed while .venv is (scripts/installer.sh; their editable installs of this checkout
    # take turns: scripts/setup.sh); its lines are printed when it is waited for, before the
    # suite.
    mosaic_out="$(mktemp)"
    trap 'rm -f "$mosaic_out"' EXIT
    if command -v flock >/dev/null 2>&1; then
        bash scripts/mosaic_env.sh >"$mosaic_out" 2>&1 &
        mosaic=$!
        bash scripts/setup.sh
    else  # without flock, the editable installs could not take turns: one after the other
        bash scripts/setup.sh
        bash scripts/mosaic_env.sh >"$mosaic_out" 2>&1 &
        mosaic=$!
    fi
    py=.venv/bin/python
fi
has() { "$py" -c "import $1" >/dev/null 2>&1; }
# The browser test of the HTML report (tests/analysis/test_browser.py) needs Chromium: installed
# here only as root on Debian when it is missing (a fresh CI machine); otherwise that test skips.
# In the background, while the code is checked and the site built; waited for before the suite.
chromium=""
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] && ! command -v chromium >/dev/null 2>&1; then
    echo "installing chromium for the browser test (log: /tmp/harness-chromium-install.log)"
    {
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
            >/tmp/harness-chromium-install.log 2>&1 ||
            echo "chromium could not be installed (see the log): the browser test will be skipped"
    } &
    chromium=$!
fi
if [ -z "${HARNESS_TEST_PYTHON:-}" ] || has ruff; then
    "$py" -m ruff check harness analysis harness_schema tests benchmarks
    "$py" -m ruff format --check harness analysis harness_schema tests benchmarks
else
    echo "test.sh: $py has no ruff: lint skipped (pip install ruff, or bring its wheel)"
fi
if [ -z "${HARNESS_TEST_PYTHON:-}" ] || has mypy; then
    "$py" -m mypy
else
    echo "test.sh: $py has no mypy: type check skipped (pip install mypy, or bring its wheel)"
fi
# The documentation site, built as CI builds it: --strict fails on a broken link or anchor, a
# page outside the nav, an API name mkdocstrings cannot find (into build/site, gitignored).
if [ -z "${HARNESS_TEST_PYTHON:-}" ] || has mkdocs; then
    NO_MKDOCS_2_WARNING=1 "$py" -m mkdocs build --strict --quiet --site-dir build/site
else
    echo "test.sh: $py has no mkdocs: documentation build skipped (pip install -e '.[dev]')"
fi
# What ran in the background: the suite needs both.
if [ -n "$chromium" ]; then
    wait "$chromium"
fi
if [ -n "${mosaic:-}" ]; then
    mosaic_status=0
    wait "$mosaic" || mosaic_status=$?
    cat "$mosaic_out"
    rm -f "$mosaic_out"
    [ "$mosaic_status" = 0 ] || echo "test.sh: no MosaicML Streaming environment (see .venv-mosaic/setup.log): test_mosaic.py will skip"
fi
# The suite. With arguments, pytest runs them as given. Without: the independent tests in
# parallel (pytest-xdist: HARNESS_TEST_WORKERS processes, 3 by default, since most tests wait on
# sleeps and subprocesses more than they compute), then the tests marked `serial` (those that
# judge a measured figure: tests/conftest.py) two at a time, then those marked `alone`. Every run lists its
# 30 slowest tests. A developer's quick pass: bash scripts/test.sh -m "not slow"
durations=(--durations=30)
if [ "$#" -gt 0 ] || ! has xdist; then
    exec "$py" -m pytest "${durations[@]}" "$@"
fi
parallel=0
# One intra-op thread a test process (and the ranks and scripts it starts): 3 processes of 2
# threads each on 2 cores oversubscribe them, and OpenMP's threads then wait on each other
# (a mobilenet step on 8 small images took 5-11 s so, 0.08-0.25 s with one thread).
OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
    "$py" -m pytest -n "${HARNESS_TEST_WORKERS:-3}" --dist loadgroup -m "not serial" "${durations[@]}" || parallel=$?
serial=0
# The serial pass too: alone on the machine, its tests still start two ranks, a script, or a
# rank and its workers beside each other, and two threads each oversubscribe the 2 cores as
# well (the imagenet example's two local ranks: 30 and 81 s with one thread, 98 and 99 s with
# the default two, each pair run in turn beside the same load).
# Two at a time (HARNESS_SERIAL_WORKERS, 2 by default): their windows mostly wait on emulated
# steps and sleeping reads (0.02-0.1 busy cores), so two beside each other took 0.63-0.69 of
# the time of one after the other with every verdict the same (hf_text's five, fabric's and
# timm's five); a machine busy with the parallel pass's 3 processes is what they avoid. Those
# marked `alone` (they start CPU burners of their own, a worker that kills its process, or judge
# a figure the test beside them scatters) then run with nothing beside them. Three at a time
# took 0.75 of the time (the cores a third idle, not 60 %) and gave false verdicts in two runs
# of two: `transforms` named where nothing was injected (detection's real transforms slowed by
# the load beside them), a what-if lost.
serial_workers="${HARNESS_SERIAL_WORKERS:-2}"
if [ "$serial_workers" -gt 1 ]; then
    OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
        "$py" -m pytest -n "$serial_workers" --dist loadgroup -m "serial and not alone" "${durations[@]}" || serial=$?
    OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
        "$py" -m pytest -p no:xdist -m "serial and alone" "${durations[@]}" || serial=$((serial | $?))
else
    OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
        "$py" -m pytest -p no:xdist -m serial "${durations[@]}" || serial=$?
fi
echo "test.sh: parallel pass exit status $parallel, serial pass $serial"
exit $((parallel != 0 || serial != 0))
