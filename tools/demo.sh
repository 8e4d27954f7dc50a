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
mkdir -p "$out"
/usr/bin/python3 models/export.py --preset "$preset" --out "$out"
"$build/bin/hetc" compile "$out/model.onnx" --target host --max-batch 4 --max-seq 4096 -o "$out/model.hplan"
"$build/bin/hetc" inspect "$out/model.hplan" > "$out/inspect.txt"
sed -n '1,24p' "$out/inspect.txt"
echo "... (the whole decision record: $out/inspect.txt)"

echo "--- generating (greedy, 2 prompts of different lengths, 64 new tokens each):"
"$build/bin/hetc" run "$out/model.hplan" --prompt-ids 5,17,42,7 --prompt-ids 1,2 --max-new 64 \
  --verbose | tee "$out/hetc_tokens.txt"

echo "--- the same prompts in PyTorch (float32, the reference):"
/usr/bin/python3 models/reference.py --model-dir "$out" --prompt-ids 5,17,42,7 --prompt-ids 1,2 \
  --max-new 64 --out "$out/reference"
if cmp -s "$out/hetc_tokens.txt" "$out/reference/tokens.txt"; then
  echo "hetc's greedy tokens are identical to PyTorch's"
else
  echo "hetc's greedy tokens differ from PyTorch's:" >&2
  diff "$out/hetc_tokens.txt" "$out/reference/tokens.txt" >&2
  exit 1
fi
