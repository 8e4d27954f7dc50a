#!/usr/bin/python3
"""Pre-quantized ONNX imported without widening: ONNX Runtime's MatMulNBits in 4 bits and QDQ
(MatMul of a DequantizeLinear) in int8 and int4, each giving the same numbers as the float model
compiled with --weights int4 or int8, ONNX Runtime's own run of the files as a second referee,
and the refusals.

    /usr/bin/python3 tests/e2e/check_quantized_import.py --hetc BUILD/bin/hetc --workdir DIR [--node NODE]

1. models/exports/ort_genai_llama.py writes the GenAI form of one seeded module twice: with float
   MatMuls, and with --int4-block-size 32 (every layer's linear a MatMulNBits: B uint8 [N, blocks,
   16], float scales, packed uint8 zero points; q, k and v packed in one, as the builder writes
   it). The exporter's quantizer is hetc's (docs/quantization.md), so the float file compiled with
   --weights int4 --group-size 32 and the MatMulNBits file compiled as it is must give the same
   plan numbers: hetc kl-divergence between them must be exactly 0 with every top-1 id the same,
   and hetc inspect must show the imported linears as LinearInt4N16K8 with groups of 32 (not
   widened, whatever --weights says).
2. Other forms, each against the float file compiled with --weights int4 at the matching group
   where the quantizers agree (blocks of 16 and 64), and by KL bound where they cannot (symmetric
   blocks, no zero_points input, and block 256, which the plan holds as two groups of 128 sharing
   a scale):
   the mean KL divergence from the float32 plan of the float file must stay within the bound
   int4 gets (tests/e2e/check_quantized_accuracy.py measures it).
3. With --node: hetc run on the MatMulNBits file against ONNX Runtime's greedy run of the same
   file (float activations there, int8 rows here): the same first ids and the logits close.
4. QDQ (--int8-qdq): every layer's linear a MatMul of DequantizeLinear(Q [K, N], a scale per
   output column, axis 1), int8 with zero point 0 and uint8 with 128: the same numbers as the
   float file compiled with --weights int8 (KL 0), the linears LinearInt8N16K4; with --node,
   ONNX Runtime's greedy ids on the int8 file. The same weights in ONNX Runtime's dynamic
   quantization form (--int8-dynamic: DynamicQuantizeLinear of the activations, MatMulInteger,
   Cast, Mul by the activation's scale times the weight's) give the same numbers again; ONNX
   Runtime's runs of those files round the activations to 8 bits per tensor, hetc's do not.
   With --int4-lm-head the lm_head is a MatMulNBits too (GenAI's default int4 export): kept in 4
   bits, the numbers of the float file compiled with --weights int4 --lm-head int4; with --node,
   ONNX Runtime's first ids.
5. 4-bit QDQ of opset 21 (--int4-qdq): Q int4 or uint4 [K, N] blocked along K (axis 0,
   block_size 32) gives exactly the MatMulNBits file's numbers of the same blocks (asymmetric,
   and symmetric int4 without a zero point), the linears LinearInt4N16K8; with --node, ONNX
   Runtime's greedy ids on the int4 file. A scale per output column (axis 1, no block) stays in
   4 bits within the int4 KL bound.
6. int8 QDQ blocked along K (the per-column file's scales repeated per block of 32): dequantized
   at import, then --weights int8 quantizes it again to the per-column file's plan (KL within
   1e-3; a wrong block index would be far off).
   A zero point shared by two weights' DequantizeLinears (constant sharing) is read for both:
   the same numbers.
7. Refusals, one line each: bits = 8, block_size 8, a g_idx input, a blocked DequantizeLinear
   whose scale does not fit its block_size, a DequantizeLinear to float16, an int4 weight read
   by two DequantizeLinears, a MatMulInteger scaled without its Cast to float.
8. ONNX Runtime's quantize_dynamic formulas (models/exports/ort_quantize_dynamic.py) on a torch
   export merged into Optimum's If form: int8 symmetric per column with the reduced range (kept
   in int8), uint8 asymmetric per tensor (dequantized at import): each gives its QDQ twin's plan
   numbers (KL 0); with --node, ONNX Runtime's first ids on both files, the dynamic file within
   5e-2 plus what its per-tensor rounding moves ONNX Runtime's own logits.
9. ONNX Runtime's 4-bit quantizer's round-to-nearest (models/exports/ort_quantize_4bits.py) on a
   torch export, float32 (q4) and after the float16 conversion (q4f16, float16 activations and
   scales): symmetric blocks of 32 with scales of either sign, asymmetric blocks of 16; kept in 4
   bits, within the int4 KL bound of the float32 plan; with --node, ONNX Runtime's first ids and
   first-step logits within 5e-2. The same of ONNX Runtime GenAI's CUDA int4 form (float16
   activations, scales and cache around MatMulNBits of blocks of 32).
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import (PROMPTS, CheckFailed, check_hetc_binary, check_main,  # noqa: E402
                        prompt_arg, run)

EXPORTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "models", "exports")
EXPORTER = os.path.join(EXPORTS, "ort_genai_llama.py")
ORT_GREEDY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort", "greedy.mjs")
# The module: GenAI's default CPU form (packed q/k/v, the rotation inside GroupQueryAttention).
# hf_llama's default sizes: 2 layers, hidden 128, intermediate 344 (not a multiple of 32 or 64:
# down_proj's last group is partial).
FORM = ["--packed-qkv", "--rotary-in-attention"]
# Mean KL divergence from float32 that int4 may reach on this module (measured in the check's
# output; about 4x the largest measured).
MAX_MEAN_KL = 0.05
# How far ONNX Runtime's rounding of the activations to 8 bits per tensor may move its first-step
# logits, relative to max |logit|, from its run of the same weights with float activations
# (measured up to 7.9e-2 on these files, 2026-11-29).
MAX_ROUNDING_GAP = 0.15


def export(a, name, flags):
    out = os.path.join(a.workdir, name)
    run([sys.executable, EXPORTER, "--out", out] + FORM + flags, f"ort_genai_llama.py {name}")
    return os.path.join(out, "model.onnx")


def compile_plan(a, onnx_path, name, flags):
    plan = os.path.join(a.workdir, name + ".hplan")
    run([a.hetc, "compile", onnx_path, "--max-batch", "4", "--max-seq", "128", "-o", plan] + flags,
        f"hetc compile {name}")
    return plan


def kl(a, base, test):
    proc = run([a.hetc, "kl-divergence", base, test, "--json"], "hetc kl-divergence")
    return json.loads(proc.stdout)


def linear_tensors(a, plan):
    inspected = json.loads(run([a.hetc, "inspect", "--json", plan], "hetc inspect").stdout)
    return [t for t in inspected["tensors"] if t["layout"].startswith("Linear")]


def against_ort(a, onnx_path, plan, name, opt_level=None):
    """ONNX Runtime's greedy run of the file and hetc's of its plan, 8 steps of the prompts: the
    first ids must agree (a near tie may part them later: int8 rows here, float there); returns
    the worst first-step logits difference relative to max |ONNX Runtime's row|. `opt_level`:
    ONNX Runtime's graph optimization level, when its default cannot load the file."""
    ort_json = os.path.join(a.workdir, f"ort_{name}.json")
    cmd = [a.node, ORT_GREEDY, "--model", onnx_path, "--max-new", "8", "--out", ort_json]
    if opt_level:
        cmd += ["--opt-level", opt_level]
    for p in PROMPTS:
        cmd += ["--prompt-ids", prompt_arg(p)]
    run(cmd, "ONNX Runtime (greedy.mjs)")
    with open(ort_json) as f:
        ort = json.load(f)
    logits_path = os.path.join(a.workdir, f"hetc_logits_{name}.npy")
    cmd = [a.hetc, "run", plan, "--max-new", "8", "--logits-out", logits_path]
    for p in PROMPTS:
        cmd += ["--prompt-ids", prompt_arg(p)]
    proc = run(cmd, "hetc run")
    tokens = [[int(t) for t in line.split()] for line in proc.stdout.splitlines() if line.strip()]
    ours = np.load(logits_path)
    theirs = np.array(ort["logits"], dtype=np.float64)
    worst = 0.0
    for s in range(len(PROMPTS)):
        if tokens[s][0] != ort["tokens"][s][0]:
            raise CheckFailed(f"{name}, sequence {s}: hetc's first id {tokens[s][0]}, ONNX "
                              f"Runtime's {ort['tokens'][s][0]}")
        row = theirs[s, 0]
        worst = max(worst, float(np.max(np.abs(ours[s, 0] - row)) / np.max(np.abs(row))))
    return worst


def ort_gap(a, base, test):
    """The worst first-step logits difference between two of ONNX Runtime's runs (against_ort's
    JSONs), relative to max |base's row|."""
    rows = []
    for name in (base, test):
        with open(os.path.join(a.workdir, f"ort_{name}.json")) as f:
            rows.append(np.array(json.load(f)["logits"], dtype=np.float64)[:, 0])
    return max(float(np.max(np.abs(rows[1][s] - rows[0][s])) / np.max(np.abs(rows[0][s])))
               for s in range(len(PROMPTS)))


def within_int4_bound(a, reference, plan, name):
    """The plan's mean KL divergence from the float32 plan: above 0 (rounded) and within the bound
    int4 gets."""
    r = kl(a, reference, plan)
    print(f"{name} against float32: KL mean {r['kl_mean']:.3e}, same top-1 "
          f"{100 * r['top1_agreement']:.1f}%")
    if not 0 < r["kl_mean"] <= MAX_MEAN_KL:
        raise CheckFailed(f"{name}: mean KL divergence {r['kl_mean']:.3e} from float32 is outside "
                          f"(0, {MAX_MEAN_KL}]")


def expect_refusal(a, what, onnx_path, words):
    plan = os.path.join(a.workdir, "refused.hplan")
    proc = run([a.hetc, "compile", onnx_path, "--max-seq", "64", "-o", plan], what,
               expect_success=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode != 1 or len(lines) != 1 or not all(w in lines[0] for w in words):
        raise CheckFailed(f"{what}: expected exit 1 and one line naming {words}, got exit "
                          f"{proc.returncode}:\n{proc.stderr}")
    print(f"refused ({what}): {lines[0]}")


def altered(a, onnx_path, name, change):
    model = onnx.load(onnx_path)
    node = next(n for n in model.graph.node if n.op_type == "MatMulNBits")
    change(model, node)
    out = os.path.join(a.workdir, name + ".onnx")
    onnx.save(model, out)
    return out


def set_attribute(node, key, value):
    for attr in node.attribute:
        if attr.name == key:
            attr.i = value


def check(a):
    check_hetc_binary(a.hetc)
    float_onnx = export(a, "float", [])
    nbits = export(a, "nbits32", ["--int4-block-size", "32"])
    reference = compile_plan(a, float_onnx, "float_f32", ["--weights", "f32", "--kv", "f32"])

    # 1. The same plan numbers as --weights int4 on the float file.
    compiled = compile_plan(a, float_onnx, "float_int4_g32",
                            ["--weights", "int4", "--group-size", "32", "--kv", "f32"])
    imported = compile_plan(a, nbits, "nbits32", ["--kv", "f32"])
    linears = linear_tensors(a, imported)
    int4 = [t for t in linears if t["layout"] == "LinearInt4N16K8"]
    if len(int4) != 2 * 7 or any("32 k" not in t["scheme"] for t in int4):
        raise CheckFailed(f"the imported plan's linear weights are {linears}; expected 14 "
                          "LinearInt4N16K8 (q, k and v as three slices of qkv_proj) in groups of 32")
    print(f"imported: {len(int4)} linear weights kept in 4 bits ({int4[0]['scheme']})")
    same = kl(a, compiled, imported)
    if same["kl_max"] != 0.0 or same["top1_agreement"] != 1.0:
        raise CheckFailed(f"MatMulNBits imported differs from --weights int4 on the float file: {same}")
    print(f"MatMulNBits (block 32) gives --weights int4's numbers: KL 0 over {same['positions']} "
          "positions, every top-1 id the same")

    # 2. Other block sizes and forms.
    nbits_plans = {}
    for flags, group, exact in ((["--int4-block-size", "16"], 16, True),
                                (["--int4-block-size", "64"], 64, True),
                                (["--int4-block-size", "32", "--int4-symmetric"], 32, False),
                                (["--int4-block-size", "256"], 128, False)):
        name = "nbits" + "_".join(f.strip("-") for f in flags[1:])
        plan = nbits_plans[name] = compile_plan(a, export(a, name, flags), name, ["--kv", "f32"])
        if any(t["layout"] != "LinearInt4N16K8" or f"{group} k" not in t["scheme"]
               for t in linear_tensors(a, plan) if "lm_head" not in t["name"]):
            raise CheckFailed(f"{name}: the linears are not LinearInt4N16K8 in groups of {group}")
        if exact:
            twin = compile_plan(a, float_onnx, f"float_int4_g{group}",
                                ["--weights", "int4", "--group-size", str(group), "--kv", "f32"])
            r = kl(a, twin, plan)
            if r["kl_max"] != 0.0:
                raise CheckFailed(f"{name} differs from --weights int4 --group-size {group}: {r}")
            print(f"{name}: --weights int4 --group-size {group}'s numbers (KL 0)")
        within_int4_bound(a, reference, plan, name)

    # 2b. The lm_head in MatMulNBits too (GenAI's int4 export unless told to exclude it): kept in
    # 4 bits, --weights int4 --lm-head int4's numbers.
    head_onnx = export(a, "nbits32_lm_head", ["--int4-block-size", "32", "--int4-lm-head"])
    head_plan = compile_plan(a, head_onnx, "nbits32_lm_head", ["--kv", "f32"])
    heads = [t for t in linear_tensors(a, head_plan) if "lm_head" in t["name"]]
    if len(heads) != 1 or heads[0]["layout"] != "LinearInt4N16K8":
        raise CheckFailed(f"the MatMulNBits lm_head is stored as {heads}, not LinearInt4N16K8")
    head_twin = compile_plan(a, float_onnx, "float_int4_g32_lm_head",
                             ["--weights", "int4", "--group-size", "32", "--lm-head", "int4",
                              "--kv", "f32"])
    r = kl(a, head_twin, head_plan)
    if r["kl_max"] != 0.0 or r["top1_agreement"] != 1.0:
        raise CheckFailed(f"the MatMulNBits lm_head differs from --lm-head int4: {r}")
    print("MatMulNBits lm_head: kept in 4 bits, --weights int4 --lm-head int4's numbers (KL 0)")
    if a.node:
        worst = against_ort(a, head_onnx, head_plan, "nbits32_lm_head")
        if worst > 5e-2:
            raise CheckFailed(f"MatMulNBits lm_head: first-step logits differ from ONNX Runtime's "
                              f"by {worst:.2e} of max |logit| (bound 5e-2)")
        print(f"MatMulNBits lm_head: ONNX Runtime's first ids, first-step logits within {worst:.2e}")

    # 3. ONNX Runtime on the MatMulNBits file.
    if a.node:
        worst = against_ort(a, nbits, imported, "nbits32")
        print(f"ONNX Runtime on the MatMulNBits file: the same first ids, first-step logits within "
              f"{worst:.2e} of max |logit| (int8 rows here, float there)")
        if worst > 5e-2:
            raise CheckFailed(f"first-step logits differ from ONNX Runtime's by {worst:.2e} of max "
                              "|logit| (bound 5e-2)")

    # 4. QDQ int8, and the same weights in ONNX Runtime's dynamic quantization form
    # (DynamicQuantizeLinear, MatMulInteger, Cast, Mul by the scales).
    int8_twin = compile_plan(a, float_onnx, "float_int8", ["--weights", "int8", "--kv", "f32"])
    for form, kind in (("qdq", "int8"), ("qdq", "uint8"), ("dynamic", "int8"),
                       ("dynamic", "uint8")):
        label = f"{'QDQ' if form == 'qdq' else 'dynamic'} {kind}"
        path = export(a, f"{form}_{kind}", [f"--int8-{form}", kind])
        plan = compile_plan(a, path, f"{form}_{kind}", ["--kv", "f32"])
        layouts = {t["layout"] for t in linear_tensors(a, plan) if "lm_head" not in t["name"]}
        if layouts != {"LinearInt8N16K4"}:
            raise CheckFailed(f"{label}: the linears are {sorted(layouts)}, not LinearInt8N16K4")
        r = kl(a, int8_twin, plan)
        if r["kl_max"] != 0.0 or r["top1_agreement"] != 1.0:
            raise CheckFailed(f"{label} differs from --weights int8 on the float file: {r}")
        print(f"{label}: kept in int8, --weights int8's numbers (KL 0 over {r['positions']} "
              "positions)")
        if a.node:
            worst = against_ort(a, path, plan, f"{form}_{kind}")
            bound = 5e-2
            if form == "dynamic":
                # ONNX Runtime rounds the dynamic form's activations to 8 bits per tensor, hetc
                # does not (docs/quantization.md): the bound grows by what that rounding moves
                # ONNX Runtime's own logits from its run of the QDQ file of the same weights,
                # which must itself stay within MAX_ROUNDING_GAP (a misread scale or zero point
                # in the file would move them far more).
                gap = ort_gap(a, f"qdq_{kind}", f"dynamic_{kind}")
                print(f"{label}: ONNX Runtime's dynamic run differs from its QDQ run by {gap:.2e} "
                      "of max |logit| (its activations rounded to 8 bits per tensor)")
                if gap > MAX_ROUNDING_GAP:
                    raise CheckFailed(f"{label}: ONNX Runtime's dynamic and QDQ runs differ by "
                                      f"{gap:.2e} (bound {MAX_ROUNDING_GAP})")
                bound += gap
            if worst > bound:
                raise CheckFailed(f"{label}: first-step logits differ from ONNX Runtime's by "
                                  f"{worst:.2e} of max |logit| (bound {bound:.2e})")
            print(f"{label}: ONNX Runtime's first ids, first-step logits within {worst:.2e} "
                  f"(bound {bound:.2e})")

    # 5. QDQ in 4 bits (opset 21): blocked along K, int4 and uint4, the same numbers as the
    # MatMulNBits file of the same blocks; a scale per output column within the int4 bound.
    qdq4_plans = {}
    for kind, flags, twin in (("int4", ["--int4-block-size", "32"], compiled),
                              ("uint4", ["--int4-block-size", "32"], compiled),
                              ("int4", ["--int4-block-size", "32", "--int4-symmetric"],
                               nbits_plans["nbits32_int4-symmetric"])):
        name = f"qdq_{kind}_" + "_".join(f.strip("-") for f in flags[1:])
        path = export(a, name, ["--int4-qdq", kind] + flags)
        plan = qdq4_plans[name] = compile_plan(a, path, name, ["--kv", "f32"])
        if any(t["layout"] != "LinearInt4N16K8" or "32 k" not in t["scheme"]
               for t in linear_tensors(a, plan) if "lm_head" not in t["name"]):
            raise CheckFailed(f"{name}: the linears are not LinearInt4N16K8 in groups of 32")
        r = kl(a, twin, plan)
        if r["kl_max"] != 0.0 or r["top1_agreement"] != 1.0:
            raise CheckFailed(f"{name} differs from the MatMulNBits plan of the same blocks: {r}")
        print(f"{name}: kept in 4 bits, the MatMulNBits plan's numbers (KL 0)")
        if a.node and kind == "int4" and len(flags) == 2:
            worst = against_ort(a, path, plan, name)
            if worst > 5e-2:
                raise CheckFailed(f"{name}: first-step logits differ from ONNX Runtime's by "
                                  f"{worst:.2e} of max |logit| (bound 5e-2)")
            print(f"{name}: ONNX Runtime's first ids, first-step logits within {worst:.2e}")
    per_column = compile_plan(a, export(a, "qdq_int4_per_column",
                                        ["--int4-qdq", "int4", "--int4-block-size", "0"]),
                              "qdq_int4_per_column", ["--kv", "f32"])
    if any(t["layout"] != "LinearInt4N16K8" for t in linear_tensors(a, per_column)
           if "lm_head" not in t["name"]):
        raise CheckFailed("QDQ int4 with a scale per output column: the linears are not "
                          "LinearInt4N16K8")
    within_int4_bound(a, reference, per_column, "QDQ int4, a scale per output column,")

    # 6. int8 blocked along K (opset 21), the same values as the per-column file: dequantized
    # (the int8 layout has a scale per column), then quantized by --weights int8 again.
    qdq = os.path.join(a.workdir, "qdq_int8", "model.onnx")
    model = onnx.load(qdq)
    init = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        k = init[node.input[0]].dims[0]
        for i in (1, 2):
            per_col = numpy_helper.to_array(init[node.input[i]])
            init[node.input[i]].CopyFrom(numpy_helper.from_array(
                np.tile(per_col, ((k + 31) // 32, 1)), node.input[i]))
        for attr in node.attribute:
            if attr.name == "axis":
                attr.i = 0
        node.attribute.append(helper.make_attribute("block_size", 32))
    model.opset_import[0].version = 21
    blocked_path = os.path.join(a.workdir, "qdq_int8_blocked.onnx")
    onnx.save(model, blocked_path)
    blocked = compile_plan(a, blocked_path, "qdq_int8_blocked", ["--weights", "int8", "--kv", "f32"])
    r = kl(a, int8_twin, blocked)
    print(f"QDQ int8 blocked along K, dequantized and quantized again: KL mean {r['kl_mean']:.3e} "
          "from the per-column file's plan")
    if r["kl_mean"] > 1e-3:
        raise CheckFailed(f"QDQ int8 blocked along K: mean KL divergence {r['kl_mean']:.3e} from "
                          "the per-column file's plan (bound 1e-3)")

    # 6b. One zero point shared by the DequantizeLinears of equal shape (as constant-sharing
    # optimizers leave them): uint8's 128 per column of gate_proj serves up_proj too, the same
    # numbers.
    shared = onnx.load(os.path.join(a.workdir, "qdq_uint8", "model.onnx"))
    dq = {n.input[0]: n for n in shared.graph.node if n.op_type == "DequantizeLinear"}
    for gate in [x for x in dq if "gate_proj" in x]:
        up = dq[gate.replace("gate_proj", "up_proj")]
        dropped = up.input[2]
        up.input[2] = dq[gate].input[2]
        kept = [t for t in shared.graph.initializer if t.name != dropped]
        del shared.graph.initializer[:]
        shared.graph.initializer.extend(kept)
    shared_path = os.path.join(a.workdir, "qdq_uint8_shared_zero_point.onnx")
    onnx.save(shared, shared_path)
    plan = compile_plan(a, shared_path, "qdq_uint8_shared_zero_point", ["--kv", "f32"])
    r = kl(a, int8_twin, plan)
    if r["kl_max"] != 0.0 or {t["layout"] for t in linear_tensors(a, plan)
                              if "lm_head" not in t["name"]} != {"LinearInt8N16K4"}:
        raise CheckFailed(f"QDQ uint8 with shared zero points: not --weights int8's plan ({r})")
    print("QDQ uint8 with a zero point shared by two weights: kept in int8, the same numbers")

    # 7. Refusals.
    expect_refusal(a, "8-bit MatMulNBits",
                   altered(a, nbits, "bits8", lambda m, n: set_attribute(n, "bits", 8)),
                   ["MatMulNBits", "bits = 8"])
    expect_refusal(a, "block_size 8",
                   altered(a, nbits, "block8", lambda m, n: set_attribute(n, "block_size", 8)),
                   ["block_size 8", "groups of 16, 32, 64 or 128"])

    def add_g_idx(model, node):
        k = next(attr.i for attr in node.attribute if attr.name == "K")
        model.graph.initializer.append(numpy_helper.from_array(
            np.arange(k, dtype=np.int32) // 32, "g_idx"))
        while len(node.input) < 4:
            node.input.append("")
        node.input.append("g_idx")
    expect_refusal(a, "g_idx", altered(a, nbits, "g_idx", add_g_idx), ["g_idx"])

    # A block_size whose scale keeps the per-column shape, and a 4-bit weight dequantized to
    # float16.
    wrong = onnx.load(qdq)
    next(n for n in wrong.graph.node if n.op_type == "DequantizeLinear").attribute.append(
        helper.make_attribute("block_size", 32))
    wrong_path = os.path.join(a.workdir, "qdq_blocked_wrong_scale.onnx")
    onnx.save(wrong, wrong_path)
    expect_refusal(a, "blocked DequantizeLinear with a per-column scale", wrong_path,
                   ["block_size 32", "scale must be"])
    half = onnx.load(os.path.join(a.workdir, "qdq_int4_32", "model.onnx"))
    next(n for n in half.graph.node if n.op_type == "DequantizeLinear").attribute.append(
        helper.make_attribute("output_dtype", onnx.TensorProto.FLOAT16))
    half_path = os.path.join(a.workdir, "qdq_int4_float16.onnx")
    onnx.save(half, half_path)
    expect_refusal(a, "DequantizeLinear to float16", half_path, ["FLOAT16", "float32 weights"])
    # One int4 weight read by two DequantizeLinears is not a weight of one linear.
    twice = onnx.load(os.path.join(a.workdir, "qdq_int4_32", "model.onnx"))
    gate = next(n for n in twice.graph.node
                if n.op_type == "DequantizeLinear" and "gate_proj" in n.input[0])
    up = next(n for n in twice.graph.node
              if n.op_type == "DequantizeLinear" and n.input[0] ==
              gate.input[0].replace("gate_proj", "up_proj"))
    up.input[0] = gate.input[0]
    twice_path = os.path.join(a.workdir, "qdq_int4_read_twice.onnx")
    onnx.save(twice, twice_path)
    expect_refusal(a, "int4 weight read by two DequantizeLinears", twice_path,
                   ["INT4", "dequantized by one DequantizeLinear"])
    # 8. ONNX Runtime's quantize_dynamic formulas on a torch export in Optimum's merged form
    # (models/exports/ort_quantize_dynamic.py: every MatMul inside the If's branches, int8
    # symmetric per column with the reduced range, uint8 asymmetric per tensor): the same plan
    # numbers as its QDQ twin (the same weights, activations float), and ONNX Runtime's first ids.
    merged_dir = os.path.join(a.workdir, "optimum_merged")
    run([sys.executable, os.path.join(EXPORTS, "optimum_merged.py"), "--out", merged_dir],
        "optimum_merged.py")
    # int8 symmetric is kept in int8; uint8's own zero point is 128 (kept in int8) only where the
    # weight's range happens to be symmetric, and otherwise dequantized, then stored in bf16.
    for tag, flags, layout in (
            ("int8_channel_reduced", ["--weight-type", "int8", "--per-channel", "--reduce-range"],
             {"LinearInt8N16K4"}),
            ("uint8_tensor", ["--weight-type", "uint8"], {"LinearBf16N16K2", "LinearInt8N16K4"})):
        paths, plans = {}, {}
        for form in ("dynamic", "qdq"):
            name = f"ort_{form}_{tag}"
            paths[form] = os.path.join(a.workdir, name + ".onnx")
            run([sys.executable, os.path.join(EXPORTS, "ort_quantize_dynamic.py"), "--model",
                 os.path.join(merged_dir, "model.onnx"), "--out", paths[form], "--form", form]
                + flags, f"ort_quantize_dynamic.py {name}")
            plans[form] = compile_plan(a, paths[form], name, ["--kv", "f32"])
        layouts = {t["layout"] for t in linear_tensors(a, plans["dynamic"])
                   if "lm_head" not in t["name"]}
        if not layouts <= layout or "LinearBf16N16K2" in layout and \
                "LinearBf16N16K2" not in layouts:
            raise CheckFailed(f"quantize_dynamic {tag}: the linears are {sorted(layouts)}, not "
                              f"{sorted(layout)}")
        r = kl(a, plans["qdq"], plans["dynamic"])
        if r["kl_max"] != 0.0 or r["top1_agreement"] != 1.0:
            raise CheckFailed(f"quantize_dynamic {tag} differs from its QDQ twin: {r}")
        print(f"quantize_dynamic {tag} (Optimum's merged decoder): {sorted(layouts)}, its QDQ "
              "twin's numbers (KL 0)")
        if a.node:
            # ONNX Runtime 1.30's default optimizations fail on DequantizeLinear weights inside
            # an If's branch (TransposeDQWeightsForMatMulNBits): the twin runs without them.
            twin = against_ort(a, paths["qdq"], plans["qdq"], f"qdq_{tag}", opt_level="disabled")
            worst = against_ort(a, paths["dynamic"], plans["dynamic"], f"dynamic_{tag}")
            gap = ort_gap(a, f"qdq_{tag}", f"dynamic_{tag}")
            bound = 5e-2 + gap
            if twin > 5e-2 or worst > bound or gap > MAX_ROUNDING_GAP:
                raise CheckFailed(f"quantize_dynamic {tag}: first-step logits differ from ONNX "
                                  f"Runtime's by {worst:.2e} (bound {bound:.2e}; QDQ twin "
                                  f"{twin:.2e}, bound 5e-2; its own runs {gap:.2e} apart, "
                                  f"bound {MAX_ROUNDING_GAP})")
            print(f"quantize_dynamic {tag}: ONNX Runtime's first ids, first-step logits within "
                  f"{worst:.2e} (bound {bound:.2e}: its own dynamic and QDQ runs differ by "
                  f"{gap:.2e}); the QDQ twin within {twin:.2e}")

    # MatMulInteger allows one zero point for all columns beside a scale per column (and the
    # reverse), which DequantizeLinear does not: the importer repeats the single one per column.
    scalar_zp = onnx.load(os.path.join(a.workdir, "dynamic_int8", "model.onnx"))
    zero_points = {n.input[3] for n in scalar_zp.graph.node if n.op_type == "MatMulInteger"}
    for t in scalar_zp.graph.initializer:
        if t.name in zero_points:
            t.CopyFrom(numpy_helper.from_array(np.array(0, np.int8), t.name))
    scalar_zp_path = os.path.join(a.workdir, "dynamic_int8_scalar_zero_point.onnx")
    onnx.save(scalar_zp, scalar_zp_path)
    r = kl(a, compile_plan(a, os.path.join(a.workdir, "dynamic_int8", "model.onnx"),
                           "dynamic_int8_again", ["--kv", "f32"]),
           compile_plan(a, scalar_zp_path, "dynamic_int8_scalar_zero_point", ["--kv", "f32"]))
    if r["kl_max"] != 0.0:
        raise CheckFailed(f"dynamic int8 with one zero point for all columns differs: {r}")
    print(f"dynamic int8 with one zero point for all columns ({len(zero_points)} weights): the "
          "same numbers (KL 0)")

    # A MatMulInteger whose result is scaled without its Cast to float is not the dynamic form.
    uncast = onnx.load(os.path.join(a.workdir, "dynamic_int8", "model.onnx"))
    cast = next(n for n in uncast.graph.node
                if n.op_type == "Cast" and n.input[0].endswith("_quantized"))
    for n in uncast.graph.node:
        for i, name in enumerate(n.input):
            if name == cast.output[0]:
                n.input[i] = cast.input[0]
    uncast_path = os.path.join(a.workdir, "dynamic_int8_uncast.onnx")
    onnx.save(uncast, uncast_path)
    expect_refusal(a, "MatMulInteger without its Cast", uncast_path,
                   ["(MatMulInteger) is not ONNX Runtime's dynamic quantization of a linear",
                    "not read by one Cast to float"])
    # 9. ONNX Runtime's 4-bit quantizer (models/exports/ort_quantize_4bits.py, after
    # matmul_4bits_quantizer's round-to-nearest) on a torch export, float32 and converted to
    # float16 first (transformers.js's q4 and q4f16 files): symmetric blocks of 32 (scales of
    # either sign), asymmetric blocks of 16; every linear kept in 4 bits, within the int4 bound of
    # the float32 plan, and with --node ONNX Runtime's first ids and first-step logits.
    torch_dir = os.path.join(a.workdir, "hf_llama")
    run([sys.executable, os.path.join(EXPORTS, "hf_llama.py"), "export", "--out", torch_dir],
        "hf_llama.py export")
    torch_onnx = os.path.join(torch_dir, "model.onnx")
    torch_f32 = compile_plan(a, torch_onnx, "hf_llama_f32", ["--weights", "f32", "--kv", "f32"])
    fp16_onnx = os.path.join(a.workdir, "hf_llama_fp16.onnx")
    run([sys.executable, os.path.join(EXPORTS, "float16_convert.py"), "--model", torch_onnx,
         "--out", fp16_onnx], "float16_convert.py")
    for name, source, flags in (("q4", torch_onnx, []),
                                ("q4_asymmetric_16", torch_onnx,
                                 ["--asymmetric", "--block-size", "16"]),
                                ("q4f16", fp16_onnx, [])):
        path = os.path.join(a.workdir, f"hf_llama_{name}.onnx")
        run([sys.executable, os.path.join(EXPORTS, "ort_quantize_4bits.py"), "--model", source,
             "--out", path] + flags, f"ort_quantize_4bits.py {name}")
        plan = compile_plan(a, path, f"hf_llama_{name}", ["--kv", "f32"])
        layouts = {t["layout"] for t in linear_tensors(a, plan) if "lm_head" not in t["name"]}
        if layouts != {"LinearInt4N16K8"}:
            raise CheckFailed(f"matmul_4bits_quantizer {name}: the linears are {sorted(layouts)}, "
                              "not LinearInt4N16K8")
        within_int4_bound(a, torch_f32, plan, f"matmul_4bits_quantizer {name}")
        if a.node:
            worst = against_ort(a, path, plan, f"hf_llama_{name}")
            if worst > 5e-2:
                raise CheckFailed(f"matmul_4bits_quantizer {name}: first-step logits differ from "
                                  f"ONNX Runtime's by {worst:.2e} of max |logit| (bound 5e-2)")
            print(f"matmul_4bits_quantizer {name}: ONNX Runtime's first ids, first-step logits "
                  f"within {worst:.2e}")

    # ONNX Runtime GenAI's CUDA int4 form: float16 activations, scales and cache around the
    # MatMulNBits of blocks of 32.
    genai_fp16 = export(a, "nbits32_fp16", ["--int4-block-size", "32", "--dtype", "float16"])
    plan = compile_plan(a, genai_fp16, "nbits32_fp16", ["--kv", "f32"])
    if {t["layout"] for t in linear_tensors(a, plan) if "lm_head" not in t["name"]} != \
            {"LinearInt4N16K8"}:
        raise CheckFailed("GenAI's float16 int4 form: the linears are not LinearInt4N16K8")
    within_int4_bound(a, reference, plan, "GenAI's float16 int4 form")
    if a.node:
        worst = against_ort(a, genai_fp16, plan, "nbits32_fp16")
        if worst > 5e-2:
            raise CheckFailed(f"GenAI's float16 int4 form: first-step logits differ from ONNX "
                              f"Runtime's by {worst:.2e} of max |logit| (bound 5e-2)")
        print(f"GenAI's float16 int4 form: ONNX Runtime's first ids, first-step logits within "
              f"{worst:.2e}")

    print("PASS: MatMulNBits and 4-bit QDQ imported in 4 bits, int8 QDQ and dynamic int8 in int8, "
          "with --weights int4's and int8's numbers, within the int4 bound in every form, "
          "refusals in one line")


if __name__ == "__main__":
    sys.exit(check_main(check, __doc__, node=True))
