#!/usr/bin/env bash
# Runs one fuzz target for longer than the test command does (docs/fuzzing.md):
#
#   tools/fuzz.sh NAME [SECONDS (default 600)] [LIBFUZZER_OPTIONS...]
#   tools/fuzz.sh --list
#
# NAME is a target of tests/fuzz (fuzz_NAME.cpp). Builds hetc-fuzz-NAME in the sanitizer build
# (build-sanitize/, or $HETC_SANITIZE_BUILD_DIR; configured by tools/configure-sanitize.sh when it
# is not there), replays tests/fuzz/regressions/NAME/, then fuzzes from the seed corpus
# tests/fuzz/corpus/NAME/ (read, never written) and a working corpus that grows from run to run,
# BUILD/fuzz/NAME/corpus/. What fails (a crash, a sanitizer report, a leak, a timeout, running out
# of memory) is left in BUILD/fuzz/NAME/findings/ and ends the run with exit code 1. The extra
# options go to libFuzzer (e.g. -jobs=2 -workers=2, -max_len=N).
set -euo pipefail
cd "$(dirname "$0")/.."
san=${HETC_SANITIZE_BUILD_DIR:-build-sanitize}
if [ "${1:-}" = --list ] || [ $# -eq 0 ]; then
  echo "usage: tools/fuzz.sh NAME [SECONDS] [LIBFUZZER_OPTIONS...]; targets:"
  ls tests/fuzz | sed -n 's/^fuzz_\(.*\)\.cpp$/  \1/p'
  [ $# -eq 0 ] && exit 2 || exit 0
fi
name=$1
seconds=${2:-600}
shift $(($# > 1 ? 2 : 1))
if [ ! -f "tests/fuzz/fuzz_$name.cpp" ]; then
  echo "fuzz: no target '$name' (tests/fuzz/fuzz_$name.cpp); tools/fuzz.sh --list" >&2
  exit 2
fi
[ -f "$san/CMakeCache.txt" ] || tools/configure-sanitize.sh "$san"
# A long run of the ONNX target wants its executions: optimized (tools/test.sh builds it at -O0).
if [ "$name" = onnx_import ]; then
  cmake "$san" -DHETC_FUZZ_ONNX_OPT=-O1 >/dev/null
fi
cmake --build "$san" -j"${HETC_JOBS:-2}" --target "hetc-fuzz-$name"

# Symbolized sanitizer reports: llvm-symbolizer from PATH, or clang's or LLVM 19's.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null; then
  for s in /usr/lib/llvm-14/bin/llvm-symbolizer /usr/lib/llvm-19/bin/llvm-symbolizer; do
    if [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH=$s; break; fi
  done
fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
fuzzer=$san/bin/hetc-fuzz-$name
work=$san/fuzz/$name
mkdir -p "$work/corpus" "$work/findings"
options=(-timeout=60 -rss_limit_mb=2560 -print_final_stats=1)
shopt -s nullglob
regressions=(tests/fuzz/regressions/"$name"/*)
if [ ${#regressions[@]} -gt 0 ]; then
  echo "fuzz: replaying ${#regressions[@]} reproducer(s) of tests/fuzz/regressions/$name"
  "$fuzzer" "${options[@]}" "${regressions[@]}"
fi
echo "fuzz: $name for $seconds s; findings go to $work/findings/"
if ! "$fuzzer" "${options[@]}" -max_total_time="$seconds" -artifact_prefix="$work/findings/" \
    "$@" "$work/corpus" "tests/fuzz/corpus/$name"; then
  echo "fuzz: $name failed; reproducer(s) in $work/findings/ (docs/fuzzing.md: fixed, copy one" \
       "to tests/fuzz/regressions/$name/)" >&2
  exit 1
fi
