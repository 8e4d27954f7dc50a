#!/usr/bin/env bash
# Runs the same models through two builds of hetc and compares what they generate, byte for byte:
# the greedy tokens and the --logits-out file of every preset x weights x KV format, and of a plan
# with --max-step-tokens 4 (chunked prefill, mixed steps). Each build compiles its own plan, and
# each runtime also runs the other build's plan when it can load it.
#
#   tools/compare-builds.sh OLD/bin/hetc NEW/bin/hetc [WORKDIR]
#
# Prints one line per case and exits 1 when any output differs.
set -euo pipefail
old=$1
new=$2
work=${3:-$(mktemp -d)}
python=/usr/bin/python3
cd "$(dirname "$0")/.."
mkdir -p "$work"

prompts=(--prompt-ids 5,17,42,7,99,3 --prompt-ids 1,2 --prompt-ids 200,201,202,203,204,205,206,207,208,209,210)
differ=0
cases=0

# run BUILD PLAN OUT: tokens to OUT.txt, logits to OUT.npy; "refused" in OUT.txt when it cannot run.
run() {
  if ! "$1" run "$2" "${prompts[@]}" --max-new 16 --threads 2 --logits-out "$3.npy" >"$3.txt" 2>"$3.err"; then
    echo refused >"$3.txt"
    rm -f "$3.npy"
  fi
}

same() { cmp -s "$1.txt" "$2.txt" && { [ ! -e "$1.npy" ] && [ ! -e "$2.npy" ] || cmp -s "$1.npy" "$2.npy"; }; }

for preset in tiny odd small; do
  model=$work/$preset
  [ -e "$model/model.onnx" ] || "$python" models/export.py --preset "$preset" --out "$model" >/dev/null
  for variant in "f32 f32" "f32 bf16" "f32 int8" "bf16 bf16" "bf16 int8" "bf16 f32" "bf16 bf16 4"; do
    read -r weights kv steps <<<"$variant"
    name=$preset-$weights-w-$kv-kv${steps:+-steps$steps}
    flags=(--target host --max-batch 4 --max-seq 256 --weights "$weights" --kv "$kv")
    [ -n "$steps" ] && flags+=(--max-step-tokens "$steps")
    for build in old new; do
      bin=$old
      [ $build = new ] && bin=$new
      "$bin" compile "$model/model.onnx" "${flags[@]}" -o "$work/$name.$build.hplan" 2>"$work/$name.$build.compile.err"
    done
    run "$old" "$work/$name.old.hplan" "$work/$name.old"
    run "$new" "$work/$name.new.hplan" "$work/$name.new"
    run "$new" "$work/$name.old.hplan" "$work/$name.new-on-old"
    cases=$((cases + 1))
    verdict="identical"
    if ! same "$work/$name.old" "$work/$name.new" || grep -q refused "$work/$name.new.txt"; then
      verdict="DIFFERENT"
      differ=1
    fi
    cross="new runtime on the old plan: "
    if grep -q refused "$work/$name.new-on-old.txt"; then
      cross+="refused ($(tail -1 "$work/$name.new-on-old.err"))"
    elif same "$work/$name.old" "$work/$name.new-on-old"; then
      cross+="identical"
    else
      cross+="DIFFERENT"
      differ=1
    fi
    printf '%-28s %s; %s\n' "$name" "$verdict" "$cross"
  done
done
echo "$cases cases in $work: $([ $differ = 0 ] && echo 'all outputs identical' || echo 'outputs differ')"
exit $differ
