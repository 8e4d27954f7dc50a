#!/usr/bin/env bash
# Configures the sanitizer build (docs/fuzzing.md): clang 14 with AddressSanitizer,
# UndefinedBehaviorSanitizer and libFuzzer; the runtime alone (HETC_BUILD_COMPILER=OFF), plus the
# compiler's front end inside the ONNX importer's fuzz target. tools/test.sh and tools/fuzz.sh use it.
#
#   tools/configure-sanitize.sh [BUILD_DIR (default build-sanitize)] [CMAKE_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-sanitize}
shift $(($# > 0 ? 1 : 0))
cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DHETC_SANITIZE=ON -DHETC_BUILD_COMPILER=OFF -DHETC_CUDA=OFF "$@"
