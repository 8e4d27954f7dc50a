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
"$build/bin/hetc" inspect "$out/model.hplan" | head -n 40
echo "--- generating (greedy, 2 prompts of different lengths, 64 new tokens each):"
"$build/bin/hetc" run "$out/model.hplan" --prompt-ids 5,17,42,7 --prompt-ids 1,2 --max-new 64 --verbose
