#!/usr/bin/python3
"""A million-token plan: compiles, reserves its KV cache without touching it, and decodes at
position 1,000,000 (after a synthetic fill: a real prefill of a million positions is not a test).

    check_million.py --hetc BUILD/bin/hetc --workdir DIR

The tiny preset's KV is 256 bytes per position in bf16 (2 layers x 2 KV heads x head_dim 16 x K and
V), so 1,048,576 positions take 256 MiB, and 512 MiB with --kv f32: the BF16 cache holds twice the
context in the same memory. Timing is a benchmark's business; this checks that it runs and what
it reports is self-consistent.
"""

import json
import os
import sys

from e2e_common import CheckFailed, check_hetc_binary, check_main, export, run

MAX_SEQ = 1048576
CONTEXT = 1000000


def inspect_json(hetc, plan):
    proc = run([hetc, "inspect", "--json", plan], "hetc inspect")
    try:
        return json.loads(proc.stdout)
    except ValueError as e:
        raise CheckFailed(f"hetc inspect --json printed no JSON: {e}")


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = export("tiny", a.workdir)
    with open(os.path.join(a.workdir, "config.json")) as f:
        config = json.load(f)

    arenas = {}
    for kv in ("bf16", "f32"):
        plan = os.path.join(a.workdir, f"million_{kv}.hplan")
        run([a.hetc, "compile", onnx_path, "--target", "host", "--max-batch", "1", "--max-seq",
             str(MAX_SEQ), "--kv", kv, "-o", plan], "hetc compile")
        cache = inspect_json(a.hetc, plan)["kv_cache"]
        element = {"bf16": 2, "f32": 4}[kv]
        want = 2 * config["layers"] * config["kv_heads"] * config["head_dim"] * element * MAX_SEQ
        if cache["max_seq"] != MAX_SEQ or cache["dtype"] != kv.upper():
            raise CheckFailed(f"--kv {kv} plan: KV cache {cache['dtype']} of max_seq "
                              f"{cache['max_seq']}, expected {kv.upper()} of {MAX_SEQ}")
        if cache["arena_size"] < want:
            raise CheckFailed(f"--kv {kv} plan: KV arena {cache['arena_size']} bytes, below the "
                              f"{want} bytes {MAX_SEQ} positions need")
        arenas[kv] = cache["arena_size"]
    if arenas["bf16"] * 2 != arenas["f32"]:
        raise CheckFailed(f"the BF16 KV arena ({arenas['bf16']} bytes) is not half the float32 "
                          f"one ({arenas['f32']} bytes)")

    plan = os.path.join(a.workdir, "million_bf16.hplan")
    proc = run([a.hetc, "bench", plan, "--contexts", f"0,{CONTEXT}", "--gen", "2", "--fill",
                "synthetic", "--no-paired", "--probe-mib", "64", "--json"], "hetc bench")
    try:
        report = json.loads(proc.stdout)
    except ValueError as e:
        raise CheckFailed(f"hetc bench --json printed no JSON: {e}")
    points = {p["context"]: p for p in report.get("points", [])}
    if sorted(points) != [0, CONTEXT]:
        raise CheckFailed(f"hetc bench measured contexts {sorted(points)}, expected [0, {CONTEXT}]")
    far = points[CONTEXT]
    if far["fill"] != "synthetic" or far["average_context"] != CONTEXT + 1.5:
        raise CheckFailed(f"the point at {CONTEXT}: fill {far['fill']!r}, average context "
                          f"{far['average_context']} (expected synthetic, {CONTEXT + 1.5})")
    kv_bytes = 2 * config["layers"] * config["kv_heads"] * config["head_dim"] * 2
    if far["kv_bytes_per_token"] != kv_bytes * (CONTEXT + 1.5):
        raise CheckFailed(f"the point at {CONTEXT} reads {far['kv_bytes_per_token']} KV bytes per "
                          f"token, expected {kv_bytes} x {CONTEXT + 1.5}")
    if not far["ms_per_token"] > points[0]["ms_per_token"] > 0:
        raise CheckFailed(f"decoding at {CONTEXT} positions took {far['ms_per_token']} ms per "
                          f"token, not more than at 0 ({points[0]['ms_per_token']} ms)")
    print(f"PASS: a {MAX_SEQ}-position plan (KV {arenas['bf16'] >> 20} MiB in bf16, "
          f"{arenas['f32'] >> 20} MiB in f32) decoded at position {CONTEXT}: "
          f"{far['ms_per_token']:.3g} ms per token")


def main():
    return check_main(check, __doc__)


if __name__ == "__main__":
    sys.exit(main())
