#!/usr/bin/python3
"""Runs every exporter variant of this folder through ONNX Runtime (tests/e2e/ort/greedy.mjs) and
compares it with the PyTorch reference of the same weights; prints a Markdown table.

    /usr/bin/python3 tests/e2e/exports/run_checks.py [--workdir DIR] [--only NAME ...] [--list]
                                                      [--node /usr/bin/node] [--max-new 16]

For each variant: export (or build) the model, run the PyTorch reference with each prompt alone,
run greedy.mjs with each prompt alone (--mode single) and, where the variant allows it, with the
prompts as one left-padded batch (--mode batch), and compare both with the reference: tokens must
be equal token for token and the logits within the variant's tolerance. Needs
`npm install --ignore-scripts` in tests/e2e/ort first. Exits 1 if any check fails.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_DIR = os.path.join(os.path.dirname(HERE), "ort")
EXPORTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "models", "exports")
GREEDY = os.path.join(ORT_DIR, "greedy.mjs")
sys.path.insert(0, EXPORTS)
import common  # noqa: E402
import compare  # noqa: E402

PY = sys.executable

# name, exporter, flags, tolerance, batch: "pass" (must match), "refused" (greedy.mjs must refuse
# the ragged batch), "report" (run and report, whatever the outcome)
VARIANTS = [
    ("llama", "hf_llama", [], 1e-4, "pass"),
    ("llama-masked_fill", "hf_llama", ["--mask-style", "masked_fill"], 1e-4, "pass"),
    ("llama-triu", "hf_llama", ["--mask-style", "triu"], 1e-4, "pass"),
    ("llama-neg-inf", "hf_llama", ["--mask-value", "neg-inf"], 1e-4, "report"),
    ("llama-triu-neg-inf", "hf_llama", ["--mask-style", "triu", "--mask-value", "neg-inf"], 1e-4, "report"),
    ("llama-mask-10000", "hf_llama", ["--mask-value", "-10000"], 1e-4, "pass"),
    ("llama-rope-linear", "hf_llama", ["--rope-scaling", "linear:4"], 1e-4, "pass"),
    ("llama-rope-llama3", "hf_llama", ["--rope-scaling", "llama3"], 1e-4, "pass"),
    ("llama-partial-rotary", "hf_llama", ["--partial-rotary", "0.5"], 1e-4, "pass"),
    ("llama-qkv-bias", "hf_llama", ["--qkv-bias"], 1e-4, "pass"),
    ("llama-sliding-window", "hf_llama", ["--sliding-window", "4"], 1e-4, "pass"),
    ("llama-tied", "hf_llama", ["--tie-embeddings"], 1e-4, "pass"),
    ("llama-rope-cache", "hf_llama", ["--rope-cache"], 1e-4, "pass"),
    ("llama-interleaved", "hf_llama", ["--interleaved-rope"], 1e-4, "pass"),
    ("llama-mistral-like", "hf_llama", ["--mask-style", "masked_fill", "--sliding-window", "5", "--qkv-bias",
                                        "--tie-embeddings"], 1e-4, "pass"),
    ("llama-old-style", "hf_llama", ["--rope-cache", "--interleaved-rope", "--partial-rotary", "0.5",
                                     "--rope-scaling", "linear:2", "--mask-style", "triu",
                                     "--mask-value", "-10000"], 1e-4, "pass"),
    ("llama-tiny-mqa", "hf_llama", ["--vocab", "256", "--hidden", "64", "--head-dim", "16", "--heads", "4",
                                    "--kv-heads", "1", "--intermediate", "176"], 1e-4, "pass"),
    ("llama-mha", "hf_llama", ["--kv-heads", "4"], 1e-4, "pass"),
    ("llama-fused-qkv-split", "hf_llama", ["--fused-qkv", "split", "--qkv-bias"], 1e-4, "pass"),
    ("llama-fused-qkv-slice", "hf_llama", ["--fused-qkv", "slice"], 1e-4, "pass"),
    ("opt", "opt", [], 1e-4, "pass"),
    ("opt-3layers-8heads", "opt", ["--layers", "3", "--heads", "8", "--ffn", "384"], 1e-4, "pass"),
    ("gpt-neox", "gpt_neox", [], 1e-4, "pass"),
    ("gpt-neox-sequential-matmul-cache", "gpt_neox", ["--no-parallel-residual", "--scores", "matmul",
                                                      "--rope-cache"], 1e-4, "pass"),
    ("gpt-neox-triu-gelu-new", "gpt_neox", ["--mask-style", "triu", "--hidden-act", "gelu_new",
                                            "--rotary-pct", "0.5"], 1e-4, "pass"),
    ("phi", "phi", [], 1e-4, "pass"),
    ("phi-gqa-no-lm-head-bias", "phi", ["--no-lm-head-bias", "--kv-heads", "2"], 1e-4, "pass"),
    ("falcon", "falcon", [], 1e-4, "pass"),
    ("falcon-new-arch-kv2", "falcon", ["--new-decoder-architecture", "--kv-heads", "2"], 1e-4, "pass"),
    ("genai-fp32", "ort_genai", ["--dtype", "float32"], 1e-4, "refused"),
    ("genai-fp32-unshuffled", "ort_genai", ["--no-shuffle"], 1e-4, "refused"),
    ("genai-fp32-gqa-inputs", "ort_genai", ["--gqa-inputs"], 1e-4, "refused"),
    ("genai-fp32-qkv-bias-tied", "ort_genai", ["--qkv-bias", "--tie-embeddings"], 1e-4, "refused"),
    ("genai-fp32-llama3", "ort_genai", ["--rope-scaling", "llama3"], 1e-4, "refused"),
    ("genai-fp32-partial-rotary", "ort_genai", ["--partial-rotary", "0.5"], 1e-4, "refused"),
    ("genai-fp32-interleaved", "ort_genai", ["--interleaved-rope"], 1e-4, "refused"),
    ("genai-fp32-mqa", "ort_genai", ["--kv-heads", "1"], 1e-4, "refused"),
    ("genai-fp32-sliding-window", "ort_genai", ["--sliding-window", "4"], 1e-4, "refused"),
    ("genai-fp32-packed-do-rotary", "ort_genai", ["--packed-qkv", "--rotary-in-attention", "--qkv-bias"],
     1e-4, "refused"),
    ("genai-fp16", "ort_genai", ["--dtype", "float16"], 1e-2, "refused"),
]


class Failed(Exception):
    pass


def run(cmd, what, expect_success=True):
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect_success and proc.returncode != 0:
        raise Failed(f"{what}: exit {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def prompt_args(prompts):
    args = []
    for p in prompts:
        args += ["--prompt-ids", ",".join(map(str, p))]
    return args


def export(exporter, flags, out):
    if exporter == "hf_llama":
        run([PY, os.path.join(EXPORTS, "hf_llama.py"), "export", "--out", out, *flags], "export")
    elif exporter in ("opt", "gpt_neox", "phi", "falcon"):
        run([PY, os.path.join(EXPORTS, f"{exporter}.py"), "export", "--out", out, *flags], "export")
    else:
        run([PY, os.path.join(EXPORTS, "ort_genai_llama.py"), "--out", out, *flags], "build")


def reference(exporter, model_dir, prompts, max_new, out):
    script = f"{exporter}.py" if exporter in ("opt", "gpt_neox", "phi", "falcon") else "hf_llama.py"
    run([PY, os.path.join(EXPORTS, script), "reference", "--model-dir", model_dir, *prompt_args(prompts),
         "--max-new", max_new, "--out", out], "reference")


def greedy(node, model, prompts, max_new, mode, out, expect_success=True):
    return run([node, GREEDY, "--model", model, *prompt_args(prompts), "--max-new", max_new,
                "--mode", mode, "--out", out], f"greedy.mjs --mode {mode}", expect_success)


def cell(result, tol):
    if result is None:
        return "-"
    if isinstance(result, str):
        return result
    if result["max_abs_diff"] != result["max_abs_diff"]:
        return "NaN logits"
    tokens = "equal" if result["tokens_equal"] else "DIFFER"
    return f"tokens {tokens}, {result['max_abs_diff']:.2g}"


def check_variant(node, workdir, variant, prompts, max_new):
    name, exporter, flags, tol, batch = variant
    d = os.path.join(workdir, name)
    shutil.rmtree(d, ignore_errors=True)
    t0 = time.time()
    export(exporter, flags, d)
    model = os.path.join(d, "model.onnx")
    ref = os.path.join(d, "reference.json")
    reference(exporter, d, prompts, max_new, ref)
    ok = True
    greedy(node, model, prompts, max_new, "single", os.path.join(d, "ort_single.json"))
    single = compare.compare(compare.load(ref), compare.load(os.path.join(d, "ort_single.json")))
    ok &= single["tokens_equal"] and single["max_abs_diff"] <= tol
    batch_result = None
    if batch == "refused":
        proc = greedy(node, model, prompts, max_new, "batch", os.path.join(d, "ort_batch.json"), False)
        refused = proc.returncode != 0 and "GroupQueryAttention" in proc.stderr
        ok &= refused
        batch_result = "refused (GQA)" if refused else f"NOT refused: {proc.stderr.strip()}"
    else:
        proc = greedy(node, model, prompts, max_new, "batch", os.path.join(d, "ort_batch.json"), False)
        if proc.returncode != 0:
            batch_result = f"failed: {proc.stderr.strip()}"
            ok &= batch == "report"
        else:
            batch_result = compare.compare(compare.load(ref), compare.load(os.path.join(d, "ort_batch.json")))
            if batch == "pass":
                ok &= batch_result["tokens_equal"] and batch_result["max_abs_diff"] <= tol
    return ok, single, batch_result, time.time() - t0


def check_refusals(node, workdir):
    """greedy.mjs must name an input it cannot fill."""
    d = os.path.join(workdir, "refusal")
    os.makedirs(d, exist_ok=True)
    x = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    extra = helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])
    y = helper.make_tensor_value_info("logits", TensorProto.INT64, ["batch", "sequence"])
    graph = helper.make_graph([helper.make_node("Identity", ["input_ids"], ["logits"])], "g", [x, extra], [y])
    path = os.path.join(d, "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    proc = greedy(node, path, [[1, 2]], 1, "single", os.path.join(d, "out.json"), False)
    message = proc.stderr.strip()
    ok = proc.returncode == 1 and "use_cache_branch" in message
    return ok, message


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", help="keep the models and JSON here (default: a temporary directory)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these variants")
    p.add_argument("--list", action="store_true", help="list the variants and exit")
    p.add_argument("--node", default="/usr/bin/node")
    p.add_argument("--max-new", type=int, default=common.DEFAULT_MAX_NEW)
    a = p.parse_args(argv)
    if a.list:
        for name, exporter, flags, tol, batch in VARIANTS:
            print(f"{name:28} {exporter:9} {' '.join(flags)}")
        return 0
    if not os.path.isdir(os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")):
        print(f"run_checks.py: onnxruntime-node is not installed: cd {ORT_DIR} && npm install --ignore-scripts",
              file=sys.stderr)
        return 2
    variants = VARIANTS
    if a.only:
        unknown = set(a.only) - {v[0] for v in VARIANTS}
        if unknown:
            p.error(f"unknown variants {sorted(unknown)}; see --list")
        variants = [v for v in VARIANTS if v[0] in a.only]
    workdir = a.workdir or tempfile.mkdtemp(prefix="exports-")
    os.makedirs(workdir, exist_ok=True)
    prompts = common.DEFAULT_PROMPTS
    rows, failures = [], 0
    for v in variants:
        name, exporter, flags, tol, _ = v
        try:
            ok, single, batch, seconds = check_variant(a.node, workdir, v, prompts, str(a.max_new))
        except Failed as e:
            ok, single, batch, seconds = False, f"error: {e}", None, 0.0
        failures += not ok
        rows.append((name, exporter, " ".join(flags) or "(defaults)", cell(single, tol), cell(batch, tol),
                     f"{tol:g}", "PASS" if ok else "FAIL", f"{seconds:.1f}"))
        print(f"{'PASS' if ok else 'FAIL'} {name} ({seconds:.1f} s)", flush=True)
    if not a.only:
        ok, message = check_refusals(a.node, workdir)
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} greedy.mjs refuses an input it cannot fill: {message}")

    print()
    print("| variant | exporter | flags | ORT single vs torch (max abs dlogit) | ORT batch vs torch | tol | result | s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    total = len(rows) + (0 if a.only else 1)
    print(f"\n{total - failures} passed, {failures} failed")
    print(f"models and JSON in {workdir}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
