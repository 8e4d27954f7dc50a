#!/usr/bin/python3
"""End-to-end check of hetc against PyTorch on a seeded Llama preset.

    /usr/bin/python3 tests/e2e/check_against_torch.py --hetc BUILD/bin/hetc --preset tiny \\
        --workdir DIR [--no-constant-folding] [--external-data]

1. exports the preset (seed 0) to DIR/model.onnx with models/export.py;
2. runs the PyTorch reference (models/reference.py) on a ragged batch of three prompts, each on
   its own, greedy, --max-new tokens;
3. hetc compile DIR/model.onnx --target host --max-batch 4 --max-seq 128 -o DIR/model.hplan;
4. hetc run DIR/model.hplan --prompt-ids P (per prompt) --max-new N --logits-out DIR/hetc_logits.npy;
5. compares: the generated ids line by line must be identical, and for every (sequence, step)
   row of logits, max|hetc - torch| <= tolerance * max|torch row|.
Exits non-zero with one clear message on any failure.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import (PROMPTS, CheckFailed, check_hetc_binary, export, main_wrapper,  # noqa: E402
                        prompt_arg, reference, run)


def parse_token_lines(text, what, expected_lines, expected_len):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != expected_lines:
        raise CheckFailed(f"{what}: expected {expected_lines} lines of generated ids, got {len(lines)}:\n"
                          + "\n".join("    " + line for line in lines[:10]))
    result = []
    for i, line in enumerate(lines):
        try:
            ids = [int(t) for t in line.split()]
        except ValueError:
            raise CheckFailed(f"{what}: line {i + 1} is not a list of token ids: {line!r}")
        if len(ids) != expected_len:
            raise CheckFailed(f"{what}: line {i + 1} has {len(ids)} ids, expected {expected_len}")
        result.append(ids)
    return result


def top2_gap(row):
    top = np.sort(row)[-2:]
    return float(top[1] - top[0])


def compare(torch_tokens, torch_logits, hetc_tokens, hetc_logits, tolerance):
    if hetc_logits.shape != torch_logits.shape:
        raise CheckFailed(f"hetc logits have shape {list(hetc_logits.shape)}, expected "
                          f"{list(torch_logits.shape)} = [sequences, max-new, vocab]")
    if not np.all(np.isfinite(hetc_logits)):
        bad = np.argwhere(~np.isfinite(hetc_logits))[0]
        raise CheckFailed(f"hetc logits contain NaN or Inf (first at sequence {bad[0]}, step {bad[1]}, "
                          f"id {bad[2]})")
    if not np.any(hetc_logits):
        raise CheckFailed("hetc logits are all zero")

    # Rows are only comparable up to the first differing token of a sequence; after it the two
    # runs continue from different contexts.
    worst = (0.0, None)
    first_logit_failure = None
    first_token_failure = None
    for s in range(torch_logits.shape[0]):
        for t in range(torch_logits.shape[1]):
            ref = torch_logits[s, t].astype(np.float64)
            got = hetc_logits[s, t].astype(np.float64)
            scale = float(np.max(np.abs(ref)))
            err = float(np.max(np.abs(got - ref))) / max(scale, 1e-30)
            if err > worst[0]:
                worst = (err, (s, t))
            if err > tolerance and first_logit_failure is None:
                first_logit_failure = (s, t, err)
            if hetc_tokens[s][t] != torch_tokens[s][t]:
                if first_token_failure is None:
                    first_token_failure = (s, t, err, top2_gap(torch_logits[s, t]) / max(scale, 1e-30))
                break

    where = "" if worst[1] is None else f" at sequence {worst[1][0]}, step {worst[1][1]}"
    print(f"worst logits error relative to max |torch row|: {worst[0]:.3e}{where} (tolerance {tolerance:g})")
    if first_token_failure is not None:
        s, t, err, gap = first_token_failure
        raise CheckFailed(
            f"generated ids differ: sequence {s}, step {t}: hetc {hetc_tokens[s][t]}, torch "
            f"{torch_tokens[s][t]} (logits error in that row {err:.3e}; torch's top-2 gap "
            f"{gap:.3e} of max |logit|)\n    hetc : {' '.join(map(str, hetc_tokens[s]))}\n"
            f"    torch: {' '.join(map(str, torch_tokens[s]))}")
    if first_logit_failure is not None:
        s, t, err = first_logit_failure
        raise CheckFailed(f"logits differ: sequence {s}, step {t}: max|hetc - torch| = {err:.3e} of "
                          f"max |torch row| > {tolerance:g} (tokens hetc {hetc_tokens[s][t]}, "
                          f"torch {torch_tokens[s][t]})")
    return worst[0]


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = export(a.preset, a.workdir, a.no_constant_folding, a.external_data, seed=0)

    tokens_txt, logits_npy = reference(a.workdir, PROMPTS, a.max_new, os.path.join(a.workdir, "torch"))
    with open(tokens_txt) as f:
        torch_tokens = parse_token_lines(f.read(), "torch tokens.txt", len(PROMPTS), a.max_new)
    torch_logits = np.load(logits_npy)
    gaps = [top2_gap(r) / max(float(np.max(np.abs(r))), 1e-30) for r in torch_logits.reshape(-1, torch_logits.shape[-1])]
    print(f"smallest top-2 logit gap in the torch run: {min(gaps):.3e} of max |logit|")

    plan = os.path.join(a.workdir, "model.hplan")
    if os.path.exists(plan):
        os.remove(plan)
    run([a.hetc, "compile", onnx_path, "--target", "host", "--max-batch", "4", "--max-seq", "128",
         "-o", plan], "hetc compile", timeout=a.timeout)
    if not os.path.isfile(plan):
        raise CheckFailed(f"hetc compile succeeded but wrote no plan at {plan}")

    hetc_logits_path = os.path.join(a.workdir, "hetc_logits.npy")
    if os.path.exists(hetc_logits_path):
        os.remove(hetc_logits_path)
    cmd = [a.hetc, "run", plan]
    for p in PROMPTS:
        cmd += ["--prompt-ids", prompt_arg(p)]
    cmd += ["--max-new", str(a.max_new), "--logits-out", hetc_logits_path]
    proc = run(cmd, "hetc run", timeout=a.timeout)
    hetc_tokens = parse_token_lines(proc.stdout, "hetc run output", len(PROMPTS), a.max_new)
    with open(os.path.join(a.workdir, "hetc_tokens.txt"), "w") as f:
        f.write(proc.stdout)
    if not os.path.isfile(hetc_logits_path):
        raise CheckFailed(f"hetc run wrote no logits at {hetc_logits_path}")
    try:
        hetc_logits = np.load(hetc_logits_path)
    except Exception as e:  # a malformed .npy is a failure of the run, not of this script
        raise CheckFailed(f"cannot read {hetc_logits_path}: {e}")
    if hetc_logits.dtype != np.float32:
        raise CheckFailed(f"hetc logits are {hetc_logits.dtype}, expected float32")

    err = compare(torch_tokens, torch_logits, hetc_tokens, hetc_logits, a.tolerance)
    print(f"PASS: preset {a.preset}{' without constant folding' if a.no_constant_folding else ''}"
          f"{' with external data' if a.external_data else ''}: {len(PROMPTS)} sequences x {a.max_new} "
          f"tokens identical to PyTorch, worst logits error {err:.3e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True, help="path to the hetc binary")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--workdir", required=True)
    p.add_argument("--no-constant-folding", action="store_true")
    p.add_argument("--external-data", action="store_true")
    p.add_argument("--max-new", type=int, default=32)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--timeout", type=int, default=600, help="seconds allowed for each hetc command")
    a = p.parse_args(argv)
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
