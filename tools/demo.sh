#!/usr/bin/env bash
# The main job on the default model: install what is missing, build, export the small Llama with
# seeded weights, compile it for this host, generate from it, and time the generation.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
build=${HETC_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja
cmake --build "$build" -j"${HETC_JOBS:-2}"

out=${HETC_DEMO_DIR:-out/demo}
preset=${HETC_DEMO_PRESET:-small}
prompts=(--prompt-ids 5,17,42,7 --prompt-ids 1,2)
hetc="$build/bin/hetc"
mkdir -p "$out"
/usr/bin/python3 models/export.py --preset "$preset" --out "$out"

# The deployable plan (bf16 weights, the default) and a float32 one for the exact check.
"$hetc" compile "$out/model.onnx" --target host --max-batch 4 --max-seq 4096 -o "$out/model.hplan"
"$hetc" compile "$out/model.onnx" --target host --max-batch 4 --max-seq 4096 --weights f32 \
  -o "$out/model-f32.hplan"
"$hetc" inspect "$out/model.hplan" > "$out/inspect.txt"
sed -n '1,24p' "$out/inspect.txt"
echo "... (the whole decision record: $out/inspect.txt)"

echo "--- generating (greedy, 2 prompts of different lengths, 64 new tokens each, bf16 weights):"
"$hetc" run "$out/model.hplan" "${prompts[@]}" --max-new 64 --verbose | tee "$out/hetc_tokens.txt"
"$hetc" run "$out/model-f32.hplan" "${prompts[@]}" --max-new 64 > "$out/hetc_f32_tokens.txt"

echo "--- the same prompts in PyTorch (float32, the reference):"
/usr/bin/python3 models/reference.py --model-dir "$out" "${prompts[@]}" --max-new 64 \
  --out "$out/reference"
if ! cmp -s "$out/hetc_f32_tokens.txt" "$out/reference/tokens.txt"; then
  echo "the float32 plan's greedy tokens differ from PyTorch's:" >&2
  diff "$out/hetc_f32_tokens.txt" "$out/reference/tokens.txt" >&2
  exit 1
fi
echo "float32 plan: greedy tokens identical to PyTorch's"
# bf16 weights move the logits by about 1e-2, so greedy paths part at the first near tie.
/usr/bin/python3 - "$out/hetc_tokens.txt" "$out/reference/tokens.txt" <<'PY'
import sys
ours, ref = (open(p).read().splitlines() for p in sys.argv[1:3])
for i, (a, b) in enumerate(zip(ours, ref)):
    a, b = a.split(), b.split()
    same = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), len(b))
    print(f"bf16 plan, sequence {i}: first {same} of {len(b)} tokens identical to PyTorch float32")
PY

echo "--- decode benchmark (bf16 plan; ratios to the read bandwidth measured in the same run):"
"$hetc" bench "$out/model.hplan" --context 0 --gen 32
"$hetc" bench "$out/model.hplan" --context 2048 --gen 16
