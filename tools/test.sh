#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test (lit, unit, end to end); then
# the sanitizer stage (docs/fuzzing.md): the runtime, the unit tests and hetc serve's end-to-end
# checks built with AddressSanitizer and UndefinedBehaviorSanitizer, and every fuzz target for a
# bounded time. HETC_SKIP_SANITIZE=1 skips that stage.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
build=${HETC_BUILD_DIR:-build}
jobs=${HETC_JOBS:-2}
# The tests fork their Python scripts from one server (tests/torch_forkserver.py); end it with us.
trap '/usr/bin/python3 tests/torch_forkserver.py stop || true' EXIT
cmake -S . -B "$build" -G Ninja
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure -j"$jobs"

if [ "${HETC_SKIP_SANITIZE:-0}" = 1 ]; then
  echo "test: HETC_SKIP_SANITIZE=1: the sanitizer build, its tests and the fuzz targets are skipped"
  exit 0
fi
# Symbolized sanitizer reports: llvm-symbolizer from PATH, or clang's or LLVM 19's.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null; then
  for s in /usr/lib/llvm-14/bin/llvm-symbolizer /usr/lib/llvm-19/bin/llvm-symbolizer; do
    if [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH=$s; break; fi
  done
fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
san=${HETC_SANITIZE_BUILD_DIR:-build-sanitize}
start=$SECONDS
# Its end-to-end checks compile their plans with the hetc just built (the sanitized one has no
# compiler). The ONNX fuzz target, which fuzzes for seconds here, is built unoptimized.
tools/configure-sanitize.sh "$san" -DHETC_COMPILER_HETC="$(cd "$build" && pwd)/bin/hetc" \
  -DHETC_FUZZ_ONNX_OPT=-O0
cmake --build "$san" -j"$jobs" --target sanitized-tests
built=$SECONDS
ctest --test-dir "$san" --output-on-failure -j"$jobs"
echo "test: sanitizer stage: built in $((built - start)) s, tests and fuzz targets ran in" \
     "$((SECONDS - built)) s"
