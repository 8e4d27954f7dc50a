#!/usr/bin/python3
"""hetc on an export written from another source's semantics (hf_llama.py, or with --exporter
ort_genai_llama ONNX Runtime GenAI's fused form of the same module), against that source's
PyTorch module and ONNX Runtime on the same file.

    /usr/bin/python3 tests/e2e/exports/check_hetc.py --hetc BUILD/bin/hetc --workdir DIR \\
        [--node /usr/bin/node] [--expect-refusal TEXT] -- [hf_llama.py export flags]

1. hf_llama.py export --out DIR FLAGS, and its PyTorch greedy reference (each prompt alone);
2. hetc compile DIR/model.onnx --weights f32 --max-batch 4 --max-seq 128, then hetc run on the
   prompts with --logits-out, written as a result JSON (common.py's layout);
3. compare.py: identical tokens and logits within --tol of PyTorch's, and, with --node, of ONNX
   Runtime's (tests/e2e/ort/greedy.mjs).
With --explain-contains TEXT, hetc compile --explain must print TEXT (which nodes became which LLM
op). With --expect-refusal, hetc compile must instead exit 1 with one error line containing TEXT (an
export hetc does not run yet must say why, never compile to a wrong answer).
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import compare as compare_results  # noqa: E402
from e2e_common import (PROMPTS, CheckFailed, call_main, check_hetc_binary, main_wrapper,  # noqa: E402
                        prompt_arg, run)

# The exporters live with the repository's models, each written from its source's semantics.
EXPORTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "models", "exports")
HF_LLAMA = os.path.join(EXPORTS, "hf_llama.py")
EXPORTERS = {"hf_llama": HF_LLAMA, "ort_genai_llama": os.path.join(EXPORTS, "ort_genai_llama.py"),
             "ort_optimizer_llama": os.path.join(EXPORTS, "ort_optimizer_llama.py"),
             "opt": os.path.join(EXPORTS, "opt.py"), "gpt_neox": os.path.join(EXPORTS, "gpt_neox.py"),
             "phi": os.path.join(EXPORTS, "phi.py"), "falcon": os.path.join(EXPORTS, "falcon.py"),
             "gptj": os.path.join(EXPORTS, "gptj.py"), "gpt2": os.path.join(EXPORTS, "gpt2.py"),
             "bloom": os.path.join(EXPORTS, "bloom.py"),
             "optimum_merged": os.path.join(EXPORTS, "optimum_merged.py")}
# Exporters with their own PyTorch module (and `export` / `reference` commands); the others leave
# a directory that hf_llama.py reference decodes.
OWN_MODULE = ("opt", "gpt_neox", "phi", "falcon", "gptj", "gpt2", "bloom")
COMPARE = os.path.join(HERE, "compare.py")
FLOAT16_CONVERT = os.path.join(EXPORTS, "float16_convert.py")
ORT_GREEDY = os.path.join(os.path.dirname(HERE), "ort", "greedy.mjs")


def prompt_flags():
    flags = []
    for p in PROMPTS:
        flags += ["--prompt-ids", prompt_arg(p)]
    return flags


def compile_command(hetc, onnx_path, plan):
    """hetc compile of a float32 plan for the checks (4 sequences of up to 128 positions)."""
    return [hetc, "compile", onnx_path, "--target", "host", "--weights", "f32",
            "--max-batch", "4", "--max-seq", "128", "-o", plan]


def run_plan(hetc, plan, max_new, workdir, out):
    """hetc run of PROMPTS (one ragged batch) with --logits-out; writes its tokens and logits as a
    result JSON (common.py's layout) to `out`, for compare.py."""
    logits_path = os.path.join(workdir, "hetc_logits.npy")
    proc = run([hetc, "run", plan, *prompt_flags(), "--max-new", str(max_new),
                "--logits-out", logits_path], "hetc run")
    tokens = [[int(t) for t in line.split()] for line in proc.stdout.splitlines() if line.strip()]
    logits = np.load(logits_path)
    if len(tokens) != len(PROMPTS) or logits.shape[:2] != (len(PROMPTS), max_new):
        raise CheckFailed(f"hetc run printed {len(tokens)} sequences, logits {list(logits.shape)}")
    with open(out, "w") as f:
        json.dump({"source": "hetc", "prompts": PROMPTS, "max_new": max_new, "tokens": tokens,
                   "logits": logits.tolist()}, f)


def hetc_result(a, plan, out):
    run_plan(a.hetc, plan, a.max_new, a.workdir, out)


def compare(a, reference, candidate, what, tol=None):
    tol = a.tol if tol is None else tol
    proc = subprocess.run([sys.executable, COMPARE, reference, candidate, "--tol", str(tol),
                           "--near-tie", str(a.near_tie)], capture_output=True, text=True)
    print(proc.stdout.strip())
    if proc.returncode != 0:
        raise CheckFailed(f"hetc differs from {what}:\n{proc.stdout}{proc.stderr}")


def distance(reference, candidate):
    """The largest |logit difference| of two result JSONs over the steps where their tokens agree
    (compare.py's measure)."""
    try:
        return compare_results.compare(compare_results.load(reference),
                                       compare_results.load(candidate),
                                       float("inf"))["max_abs_diff"]
    except (OSError, ValueError) as e:
        raise CheckFailed(f"compare.py {reference} {candidate}: {e}")


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    model_dir = os.path.join(a.workdir, "model")
    exporter = EXPORTERS[a.exporter]
    command = ["export"] if a.exporter in ("hf_llama", *OWN_MODULE) else []
    print(call_main(exporter, command + ["--out", model_dir, *a.flags], f"{a.exporter}.py")[0].strip())
    onnx_path = os.path.join(model_dir, "model.onnx")
    if a.float16:
        # The export converted as onnxconverter-common converts (models/exports/float16_convert.py),
        # in place: the module behind it is still the float32 one.
        print(call_main(FLOAT16_CONVERT, ["--model", onnx_path, "--out", onnx_path] +
                        (["--keep-io-types"] if a.float16 == "keep-io-types" else []),
                        "float16_convert.py")[0].strip())
    plan = os.path.join(a.workdir, "model.hplan")
    compile_cmd = compile_command(a.hetc, onnx_path, plan)
    if os.path.exists(plan):
        os.remove(plan)
    if a.expect_refusal:
        proc = run(compile_cmd, "hetc compile", expect_success=False)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        if proc.returncode != 1 or len(lines) != 1 or a.expect_refusal not in lines[0]:
            raise CheckFailed(f"hetc compile exited {proc.returncode}; expected 1 and one line "
                              f"containing {a.expect_refusal!r}:\n{proc.stderr}")
        if os.path.exists(plan):
            raise CheckFailed("hetc compile refused the export but wrote a plan")
        print(f"PASS: refused with: {lines[0]}")
        return
    if a.explain_contains:
        compile_cmd.append("--explain")
    proc = run(compile_cmd, "hetc compile")
    for text in a.explain_contains:
        if text not in proc.stdout:
            raise CheckFailed(f"hetc compile --explain does not say {text!r}:\n{proc.stdout}")
    if a.explain_contains:
        print(f"PASS: --explain says each of {a.explain_contains}")
    torch_json = os.path.join(a.workdir, "torch.json")
    # The PyTorch module behind the file: OPT's and GPT-NeoX's own, hf_llama.py's for every Llama form.
    reference = exporter if a.exporter in OWN_MODULE else HF_LLAMA
    call_main(reference, ["reference", "--model-dir", model_dir, *prompt_flags(), "--max-new",
                          str(a.max_new), "--out", torch_json], f"{os.path.basename(reference)} reference")
    hetc_json = os.path.join(a.workdir, "hetc.json")
    hetc_result(a, plan, hetc_json)
    ort_json = os.path.join(a.workdir, "ort.json")
    if a.node:
        run([a.node, ORT_GREEDY, "--model", onnx_path, *prompt_flags(), "--max-new",
             str(a.max_new), "--out", ort_json], "ONNX Runtime (greedy.mjs)")
    if a.float16:
        # A float16 file is not the float32 module: its weights and constants are rounded, and
        # ONNX Runtime computes in float16 too. hetc (float32 on the file's numbers) must be no
        # further from PyTorch than ONNX Runtime's run of the same file is, within a quarter,
        # and so within the sum of both distances of ONNX Runtime.
        if not a.node:
            raise CheckFailed("--float16 bounds hetc by ONNX Runtime's own distance: give --node")
        ort_off = distance(torch_json, ort_json)
        print(f"ONNX Runtime's float16 run of the file is {ort_off:.3g} from PyTorch's float32")
        compare(a, torch_json, hetc_json, "PyTorch", max(a.tol, 1.25 * ort_off))
        compare(a, ort_json, hetc_json, "ONNX Runtime", max(a.tol, 2.25 * ort_off))
        referees = "PyTorch and ONNX Runtime"
    else:
        compare(a, torch_json, hetc_json, "PyTorch")
        referees = "PyTorch"
        if a.node:
            compare(a, ort_json, hetc_json, "ONNX Runtime")
            referees = "PyTorch and ONNX Runtime"
    print(f"PASS: export {' '.join(a.flags) or '(defaults)'}: {len(PROMPTS)} sequences x "
          f"{a.max_new} tokens identical to {referees}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--node", help="Node.js that runs tests/e2e/ort/greedy.mjs")
    p.add_argument("--max-new", type=int, default=32)
    p.add_argument("--tol", type=float, default=1e-4, help="max |logit difference|")
    p.add_argument("--near-tie", type=float, default=0.0, metavar="GAP",
                   help="float16 exports: a differing token where the reference's top-2 gap is "
                        "<= GAP is reported as a near tie (compare.py)")
    p.add_argument("--exporter", choices=sorted(EXPORTERS), default="hf_llama",
                   help="which exporter writes the model; opt and gpt_neox decode with their own "
                        "reference command, the others leave a directory that hf_llama.py "
                        "reference decodes in PyTorch")
    p.add_argument("--float16", choices=["all", "keep-io-types"],
                   help="convert the export to float16 as onnxconverter-common does (all: the "
                        "inputs and outputs too; keep-io-types: float32 inputs and outputs)")
    p.add_argument("--expect-refusal", metavar="TEXT")
    p.add_argument("--explain-contains", metavar="TEXT", action="append", default=[],
                   help="compile with --explain, whose output must contain TEXT (repeatable)")
    p.add_argument("flags", nargs=argparse.REMAINDER, help="-- then hf_llama.py export flags")
    a = p.parse_args(argv)
    a.flags = [f for f in a.flags if f != "--"]
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
