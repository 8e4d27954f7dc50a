#!/usr/bin/python3
"""How far a plan's KV cache format moves its logits and greedy ids, against the same model's
other formats and against PyTorch in float32. A measurement, not a test.

    /usr/bin/python3 tools/kv-accuracy.py --hetc build/bin/hetc --preset small --workdir DIR \\
        [--max-new 64] [--threads N]

Exports the preset (seed 0), compiles it with BF16 weights and each of --kv bf16 and int8, and
with float32 weights and --kv f32, bf16 and int8; runs three prompts greedily (--max-new ids each)
on every plan and on models/reference.py; then compares pairs. For each pair and sequence: the
greedy ids both runs agree on before their first difference, and over the rows up to that point
(after it the runs continue from different contexts) the worst logits error relative to the
row's max |logit| of the second run of the pair.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "e2e"))
from e2e_common import export, prompt_arg, reference, run  # noqa: E402

# Three prompts of different lengths, every id below the vocabulary of every preset.
PROMPTS = [
    [5, 17, 42, 7, 99, 3, 250, 11, 64, 128, 31, 77],
    [1, 2, 3, 4],
    [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 3, 3, 3, 9, 100, 12, 240, 33, 1],
]

PLANS = [("bf16", "bf16"), ("bf16", "int8"), ("f32", "f32"), ("f32", "bf16"), ("f32", "int8")]


def read_tokens(text, count):
    lines = [line.split() for line in text.splitlines() if line.strip()]
    return [[int(t) for t in line] for line in lines[:count]]


def compare(a_tokens, a_logits, b_tokens, b_logits):
    """Per sequence: (ids agreed before the first difference, worst relative logits error over
    those rows and the one that differs)."""
    out = []
    for s in range(len(b_tokens)):
        agreed, worst = 0, 0.0
        for t in range(len(b_tokens[s])):
            ref = b_logits[s, t].astype(np.float64)
            err = float(np.max(np.abs(a_logits[s, t] - ref))) / max(float(np.max(np.abs(ref))), 1e-30)
            worst = max(worst, err)
            if a_tokens[s][t] != b_tokens[s][t]:
                break
            agreed += 1
        out.append((agreed, worst))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True)
    p.add_argument("--preset", default="small")
    p.add_argument("--workdir", required=True)
    p.add_argument("--max-new", type=int, default=64)
    p.add_argument("--threads", type=int, default=0, help="hetc run --threads (0: its default)")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = export(a.preset, a.workdir)

    runs = {}
    tokens_txt, logits_npy = reference(a.workdir, PROMPTS, a.max_new,
                                       os.path.join(a.workdir, "torch"))
    with open(tokens_txt) as f:
        runs["torch f32"] = (read_tokens(f.read(), len(PROMPTS)), np.load(logits_npy))
    for weights, kv in PLANS:
        name = f"{weights} weights, {kv} KV"
        plan = os.path.join(a.workdir, f"{weights}-{kv}.hplan")
        run([a.hetc, "compile", onnx_path, "--target", "host", "--max-batch", str(len(PROMPTS)),
             "--max-seq", str(max(map(len, PROMPTS)) + a.max_new), "--weights", weights, "--kv", kv,
             "-o", plan], "hetc compile")
        logits_path = os.path.join(a.workdir, f"{weights}-{kv}.npy")
        cmd = [a.hetc, "run", plan, "--max-new", str(a.max_new), "--logits-out", logits_path]
        for prompt in PROMPTS:
            cmd += ["--prompt-ids", prompt_arg(prompt)]
        if a.threads:
            cmd += ["--threads", str(a.threads)]
        proc = run(cmd, "hetc run")
        runs[name] = (read_tokens(proc.stdout, len(PROMPTS)), np.load(logits_path))

    pairs = [("bf16 weights, int8 KV", "bf16 weights, bf16 KV"),
             ("bf16 weights, int8 KV", "torch f32"),
             ("bf16 weights, bf16 KV", "torch f32"),
             ("f32 weights, int8 KV", "f32 weights, f32 KV"),
             ("f32 weights, int8 KV", "torch f32"),
             ("f32 weights, bf16 KV", "torch f32"),
             ("f32 weights, f32 KV", "torch f32")]
    rows = runs["torch f32"][1].reshape(-1, runs["torch f32"][1].shape[-1]).astype(np.float64)
    top2 = np.sort(rows, axis=-1)[:, -2:]
    gaps = (top2[:, 1] - top2[:, 0]) / np.max(np.abs(rows), axis=-1)
    print(f"\npreset {a.preset}: {len(PROMPTS)} prompts x {a.max_new} greedy ids; PyTorch's top-2 "
          f"logit gap relative to max |logit|: median {np.median(gaps):.2e}, smallest "
          f"{np.min(gaps):.2e} (a perturbation of that size may change an id)")
    print(f"{'run':<24} {'against':<24} {'ids agreed (per sequence)':<28} worst logits error")
    for first, second in pairs:
        result = compare(*runs[first], *runs[second])
        agreed = ", ".join(str(n) for n, _ in result)
        total = sum(n for n, _ in result)
        worst = max(w for _, w in result)
        print(f"{first:<24} {second:<24} {agreed + f' ({total}/{len(PROMPTS) * a.max_new})':<28} "
              f"{worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
