#!/usr/bin/env bash
# The GPU machine's check (docs/gpu.md), prepared on a development machine and run on the GPU
# machine in one call of at most 8 minutes:
#
#   tools/gpu-check.sh pack       here: builds what the check runs (the device tests and
#                                 libhetc_cuda.so, which link no tokenizer, ICU or oneDNN) and
#                                 copies it into gpu-pack/ (git-ignored; a few MB)
#   tools/gpu-check.sh run OUT    there, from the repository's root with gpu-pack/ carried:
#                                 writes OUT/gpu-check.json, OUT/summary.txt and the logs
#
# What it measures today: the card and driver; the device tests with HETC_REQUIRE_GPU=1 (each
# CUDA kernel against the software device and a reference); through PyTorch on the same card,
# device-to-device copy bandwidth, bf16 matrix-product TFLOP/s (cuBLASLt underneath) and decode
# tokens/s of the Llama-3.2-1B shape with transformers (the baseline hetc's GPU decode is to
# beat); the host CPU's flags. hetc's own GPU decode is not measured: the executor does not run
# plans on the GPU yet.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

if [ "$mode" = pack ]; then
  build=${HETC_BUILD_DIR:-build}
  cmake -S . -B "$build" -G Ninja -DHETC_CUDA=ON >/dev/null
  cmake --build "$build" -j"${HETC_JOBS:-2}" --target hetc-device-tests hetc_cuda
  rm -rf gpu-pack && mkdir -p gpu-pack/bin gpu-pack/lib
  cp "$build/bin/hetc-device-tests" gpu-pack/bin/
  cp "$build/lib/libhetc_cuda.so" gpu-pack/lib/
  du -sh gpu-pack
  echo "gpu-check: packed; on the GPU machine run: tools/gpu-check.sh run \$OUT (carry gpu-pack)"
  exit 0
fi

if [ "$mode" != run ] || [ $# -lt 2 ]; then
  echo "usage: tools/gpu-check.sh pack | run OUT" >&2
  exit 2
fi
out=$2
mkdir -p "$out"
[ -x gpu-pack/bin/hetc-device-tests ] || { echo "gpu-check: no gpu-pack/: run 'tools/gpu-check.sh pack' first and carry it" >&2; exit 2; }
python=$(command -v python3)
exec > >(tee "$out/summary.txt") 2>&1
echo "gpu-check: $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# The card, the driver, the host.
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/card.txt" 2>&1 || true
echo "card: $(cat "$out/card.txt")"
grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512|amx)' | tr '\n' ' ' >"$out/cpu-flags.txt" || true
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) [$(cat "$out/cpu-flags.txt")]"

# The device tests, a skip being a failure.
set +e
HETC_REQUIRE_GPU=1 timeout 120 gpu-pack/bin/hetc-device-tests --gtest_output=json:"$out/device-tests.json" \
  >"$out/device-tests.log" 2>&1
tests=$?
set -e
echo "device tests: exit $tests ($(grep -E '^\[  (PASSED|FAILED) ' "$out/device-tests.log" | tr '\n' ' '))"

# PyTorch on the same card: copy bandwidth, bf16 matrix products, and the 1B shape's decode.
set +e
PYTHONUNBUFFERED=1 timeout 300 "$python" - "$out/torch.json" >"$out/torch.log" 2>&1 <<'PY'
import json, sys, time
import torch
result = {"torch": torch.__version__}
dev = torch.device("cuda")
result["device"] = torch.cuda.get_device_name(0)

def timed(fn, reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps

src = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
dst = torch.empty_like(src)
seconds = timed(lambda: dst.copy_(src), 10)
result["copy_gbs_read_plus_write"] = 2 * src.numel() / seconds / 1e9
del src, dst
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
seconds = timed(lambda: a @ b, 10)
result["bf16_matmul_tflops_8192"] = 2 * 8192 ** 3 / seconds / 1e12
del a, b
try:
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                         num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                         max_position_embeddings=8192, rope_theta=500000.0,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(dtype=torch.bfloat16, device=dev).eval()
    decode = {}
    for batch in (1, 16, 64):
        ids = torch.randint(0, config.vocab_size, (batch, 16), device=dev)
        with torch.no_grad():
            model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)
            torch.cuda.synchronize()
            start = time.perf_counter()
            new = 128
            model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False)
            torch.cuda.synchronize()
        decode[str(batch)] = batch * new / (time.perf_counter() - start)
    result["transformers_decode_tokens_per_s_1b_bf16"] = decode
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    result["llama_1b_weight_bytes"] = weights
except Exception as e:  # noqa: BLE001 - reported, the rest stands
    result["transformers_error"] = repr(e)
json.dump(result, open(sys.argv[1], "w"), indent=1)
print(json.dumps(result, indent=1))
PY
torch_status=$?
set -e
echo "pytorch: exit $torch_status"
cat "$out/torch.log" | tail -20

"$python" - "$out" "$tests" "$torch_status" <<'PY'
import json, os, sys
out, tests, torch_status = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def read(name):
    try:
        return open(os.path.join(out, name)).read().strip()
    except OSError:
        return ""
report = {"card": read("card.txt"), "cpu_flags": read("cpu-flags.txt").split(),
          "device_tests_exit": tests, "torch_exit": torch_status,
          "not_measured": "hetc's GPU decode and prefill: the executor does not run plans on the GPU yet"}
try:
    report["device_tests"] = json.load(open(os.path.join(out, "device-tests.json")))
except (OSError, ValueError):
    pass
try:
    report["torch"] = json.load(open(os.path.join(out, "torch.json")))
except (OSError, ValueError):
    pass
json.dump(report, open(os.path.join(out, "gpu-check.json"), "w"), indent=1)
PY
echo "gpu-check: wrote $out/gpu-check.json"
[ "$tests" -eq 0 ]
