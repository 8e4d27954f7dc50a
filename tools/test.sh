#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test (lit, unit, end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
build=${HETC_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja
cmake --build "$build" -j"${HETC_JOBS:-2}"
ctest --test-dir "$build" --output-on-failure -j1
