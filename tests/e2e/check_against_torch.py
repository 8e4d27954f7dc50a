#!/usr/bin/python3
"""End-to-end check of hetc against PyTorch on a seeded Llama preset.

    /usr/bin/python3 tests/e2e/check_against_torch.py --hetc BUILD/bin/hetc --preset tiny \\
        --workdir DIR [--no-constant-folding] [--external-data] [--weights f32|bf16] \
        [--kv f32|bf16|int8]

1. exports the preset (seed 0) to DIR/model.onnx with models/export.py;
2. hetc compile DIR/model.onnx --target host --max-batch 4 --max-seq 128 --weights W
   -o DIR/model.hplan (W = f32 by default);
3. runs the PyTorch reference (models/reference.py) on a ragged batch of three prompts, each on
   its own, greedy, --max-new tokens. With --weights bf16 the reference the check holds hetc to
   is the same model in float32 on the plan's BF16 operands (tests/e2e/reference_bf16.py: weights
   rounded to bf16, and linear inputs too when `hetc inspect` shows the plan's kernels convert
   activation rows to bf16); hetc's distance from the float32-weight run is printed as well, for
   information. With an INT8 KV cache (`hetc inspect` shows the dtype) K and V are quantised in
   the reference as the plan stores them (reference_bf16.py --quantize-kv-int8), with float32
   or bf16 weights, and hetc's distance from the plain float32 run is printed too;
4. hetc run DIR/model.hplan --prompt-ids P (per prompt) --max-new N --logits-out DIR/hetc_logits.npy;
5. compares: the generated ids line by line must be identical, and for every (sequence, step)
   row of logits, max|hetc - torch| <= tolerance * max|torch row|.
Exits non-zero with one clear message on any failure.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import (PROMPTS, CheckFailed, check_hetc_binary, export, main_wrapper,  # noqa: E402
                        prompt_arg, reference, run)

REFERENCE_BF16 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_bf16.py")


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


def measure(torch_tokens, torch_logits, hetc_tokens, hetc_logits, tolerance, near_ties=None):
    """The worst row error (relative to max |torch row|) with its row, the first row over the
    tolerance and the first differing token with its row error and torch's top-2 gap. Rows are
    only comparable up to the first differing token of a sequence; after it the two runs continue
    from different contexts. With a `near_ties` list, a differing token whose row has torch's
    top-2 gap at most that row's error (within the tolerance) is a near tie: either id is what
    the numbers allow. It is appended there as (s, t, hetc id, torch id, error, gap) and ends the
    comparison of its sequence without failing it."""
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
                gap = top2_gap(torch_logits[s, t]) / max(scale, 1e-30)
                if near_ties is not None and gap <= err <= tolerance:
                    near_ties.append((s, t, hetc_tokens[s][t], torch_tokens[s][t], err, gap))
                elif first_token_failure is None:
                    first_token_failure = (s, t, err, gap)
                break
    return worst, first_logit_failure, first_token_failure


def compare(torch_tokens, torch_logits, hetc_tokens, hetc_logits, tolerance, allow_near_ties=False):
    if hetc_logits.shape != torch_logits.shape:
        raise CheckFailed(f"hetc logits have shape {list(hetc_logits.shape)}, expected "
                          f"{list(torch_logits.shape)} = [sequences, max-new, vocab]")
    if not np.all(np.isfinite(hetc_logits)):
        bad = np.argwhere(~np.isfinite(hetc_logits))[0]
        raise CheckFailed(f"hetc logits contain NaN or Inf (first at sequence {bad[0]}, step {bad[1]}, "
                          f"id {bad[2]})")
    if not np.any(hetc_logits):
        raise CheckFailed("hetc logits are all zero")

    near_ties = [] if allow_near_ties else None
    worst, first_logit_failure, first_token_failure = measure(
        torch_tokens, torch_logits, hetc_tokens, hetc_logits, tolerance, near_ties)
    where = "" if worst[1] is None else f" at sequence {worst[1][0]}, step {worst[1][1]}"
    print(f"worst logits error relative to max |torch row|: {worst[0]:.3e}{where} (tolerance {tolerance:g})")
    for s, t, got, want, err, gap in near_ties or []:
        print(f"NEAR TIE (not a failure): sequence {s}, step {t}: hetc {got}, torch {want}; torch's "
              f"top-2 gap {gap:.3e} of max |logit| is within that row's error {err:.3e}; the "
              f"sequence is compared up to this step")
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


def load_reference(a, what, script=None, extra_args=(), subdir="torch"):
    tokens_txt, logits_npy = reference(a.workdir, PROMPTS, a.max_new, os.path.join(a.workdir, subdir),
                                       script, extra_args)
    with open(tokens_txt) as f:
        tokens = parse_token_lines(f.read(), f"{what} tokens.txt", len(PROMPTS), a.max_new)
    logits = np.load(logits_npy)
    gaps = [top2_gap(r) / max(float(np.max(np.abs(r))), 1e-30) for r in logits.reshape(-1, logits.shape[-1])]
    print(f"smallest top-2 logit gap in the {what} run: {min(gaps):.3e} of max |logit|")
    return tokens, logits


def plan_roundings(hetc, plan, timeout):
    """What the plan rounds on this host, from hetc inspect --json: (activation rows to bf16, for
    linear kernels that read them converted: ConvertRowsBf16 among the kernels; the KV cache
    dtype: "F32", "BF16" (K and V rounded to bf16) or "INT8" (quantised per row))."""
    proc = run([hetc, "inspect", "--json", plan], "hetc inspect", timeout=timeout)
    try:
        inspected = json.loads(proc.stdout)
    except ValueError as e:
        raise CheckFailed(f"hetc inspect --json printed no JSON: {e}")
    kernels = inspected.get("kernels", [])
    if not kernels:
        raise CheckFailed("hetc inspect --json lists no kernels for this host")
    kv_dtype = inspected.get("kv_cache", {}).get("dtype")
    if kv_dtype not in ("F32", "BF16", "INT8"):
        raise CheckFailed(f"hetc inspect --json shows KV cache dtype {kv_dtype!r}")
    return any(k.get("op") == "ConvertRowsBf16" for k in kernels), kv_dtype


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = export(a.preset, a.workdir, a.no_constant_folding, a.external_data, seed=0)

    plan = os.path.join(a.workdir, "model.hplan")
    if os.path.exists(plan):
        os.remove(plan)
    run([a.hetc, "compile", onnx_path, "--target", "host", "--max-batch", "4", "--max-seq", "128",
         "--weights", a.weights] + (["--kv", a.kv] if a.kv else []) + ["-o", plan],
        "hetc compile", timeout=a.timeout)
    if not os.path.isfile(plan):
        raise CheckFailed(f"hetc compile succeeded but wrote no plan at {plan}")

    f32_tokens, f32_logits = load_reference(a, "torch")
    round_inputs, kv_dtype = plan_roundings(a.hetc, plan, a.timeout)
    if a.weights == "bf16" or kv_dtype == "INT8":
        operands = (["bf16 weights"] if a.weights == "bf16" else ["float32 weights"]) + (
            ["bf16 linear inputs"] if round_inputs and a.weights == "bf16" else []) + (
            ["bf16 K and V"] if kv_dtype == "BF16" else []) + (
            ["int8 K and V (a scale per head and position)"] if kv_dtype == "INT8" else [])
        print(f"reference: PyTorch in float32 on {', '.join(operands)}, as the plan on this host")
        torch_tokens, torch_logits = load_reference(
            a, "torch (plan operands)", REFERENCE_BF16,
            (["--round-inputs"] if round_inputs and a.weights == "bf16" else [])
            + (["--round-kv"] if kv_dtype == "BF16" else [])
            + (["--quantize-kv-int8"] if kv_dtype == "INT8" else [])
            + (["--f32-weights"] if a.weights == "f32" else []),
            "torch_operands")
    else:
        torch_tokens, torch_logits = f32_tokens, f32_logits

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

    if (a.weights == "bf16" or kv_dtype == "INT8") and hetc_logits.shape == f32_logits.shape:
        # What rounding to bf16 or int8 costs against plain float32: reported, not checked.
        worst, _, token = measure(f32_tokens, f32_logits, hetc_tokens, hetc_logits, a.tolerance)
        text = f"against PyTorch in plain float32 (information): worst logits error {worst[0]:.3e}"
        if token is not None:
            s, t, err, gap = token
            text += (f"; first differing id at sequence {s}, step {t} (row error {err:.3e}, torch's "
                     f"top-2 gap {gap:.3e} of max |logit|)")
        else:
            text += "; identical ids"
        print(text)

    err = compare(torch_tokens, torch_logits, hetc_tokens, hetc_logits, a.tolerance,
                  a.allow_near_ties)
    print(f"PASS: preset {a.preset}, {a.weights} weights, {kv_dtype} KV cache"
          f"{' without constant folding' if a.no_constant_folding else ''}"
          f"{' with external data' if a.external_data else ''}: {len(PROMPTS)} sequences x {a.max_new} "
          f"tokens {'identical to PyTorch up to any near tie above' if a.allow_near_ties else 'identical to PyTorch'}, "
          f"worst logits error {err:.3e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True, help="path to the hetc binary")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--workdir", required=True)
    p.add_argument("--no-constant-folding", action="store_true")
    p.add_argument("--external-data", action="store_true")
    p.add_argument("--weights", choices=["f32", "bf16"], default="f32",
                   help="hetc compile --weights: f32 (exact, the default here) or bf16")
    p.add_argument("--kv", choices=["f32", "bf16", "int8"],
                   help="hetc compile --kv (default: the compiler's, which follows --weights)")
    p.add_argument("--allow-near-ties", action="store_true",
                   help="a differing id where torch's top-2 gap is within the row's error is "
                        "reported, not failed (activations rounded to bf16 turn float32 noise "
                        "into bf16 rounding steps)")
    p.add_argument("--max-new", type=int, default=32)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--timeout", type=int, default=600, help="seconds allowed for each hetc command")
    a = p.parse_args(argv)
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
