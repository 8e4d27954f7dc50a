#!/usr/bin/env bash
# One fuzz target as the test command runs it:
#   run_fuzzer.sh FUZZER NAME SECONDS WORKDIR
# replays every reproducer in tests/fuzz/regressions/NAME/ (each must now pass), then fuzzes for
# SECONDS from a copy of the seed corpus tests/fuzz/corpus/NAME/ (the repository's files are never
# written). Any crash, sanitizer report, leak, timeout or out-of-memory fails; the input that did
# it is left in WORKDIR/findings/.
set -euo pipefail
fuzzer=$1 name=$2 seconds=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
# Per input: a limit well above any seed's time under load, and the memory of a plan or model
# that the code under test must refuse rather than allocate.
options=(-timeout=60 -rss_limit_mb=2560 -print_final_stats=1)

rm -rf "$work"
mkdir -p "$work/corpus" "$work/findings"
shopt -s nullglob
regressions=("$here/regressions/$name"/*)
if [ ${#regressions[@]} -gt 0 ]; then
  echo "== $name: replaying ${#regressions[@]} reproducer(s) from tests/fuzz/regressions/$name"
  "$fuzzer" "${options[@]}" "${regressions[@]}"
fi
cp -R "$here/corpus/$name/." "$work/corpus/"
echo "== $name: fuzzing for $seconds s from $(ls "$work/corpus" | wc -l) seed(s)"
if ! "$fuzzer" "${options[@]}" -max_total_time="$seconds" -artifact_prefix="$work/findings/" \
    "$work/corpus"; then
  echo "FAIL: $name: the fuzzer found an input that fails; reproducer(s) in $work/findings/:" >&2
  ls -l "$work/findings" >&2
  echo "(see docs/fuzzing.md: replay one with '$fuzzer FILE'; fixed, add it to" \
       "tests/fuzz/regressions/$name/)" >&2
  exit 1
fi
