#!/usr/bin/python3
"""Plans compiled for spr-h100 run every op on the software device with the CPU's answers.

    /usr/bin/python3 tests/e2e/check_device_sim.py --hetc BUILD/bin/hetc --workdir DIR \
        [--preset tiny --preset odd] [--weights f32 --weights bf16 --weights int8 --weights int4]

For each preset (exported with seed 0) and --weights format: hetc compile --target spr-h100, then
hetc run on the suite's ragged batch twice, --device cpu and --device sim, both with
--portable-kernels (the CPU's plain C++ row-wise and attention kernels, which the software device
runs too; the CPU's linear kernels are the host's fastest, the device's the portable integer ones
or the GEMV's bf16 arithmetic). The greedy ids must be equal; the logits:
- f32, int8, int4: bit for bit equal (integer products are exact in any order; f32 linears are the
  same fixed-lane dot products on both). int8 and int4 plans keep a bf16 lm_head (hetc compile's
  default), so they are compared with --lm-head int8 / int4 to stay integer throughout;
- bf16: the CPU rounds each activation row to bf16 before its products, the device multiplies
  float rows, so they differ; by no more than the bf16 format's own error on this model, the
  largest difference between the CPU's bf16 and f32 plans' logits (measured on tiny: 0.030
  against 0.040, and the device is the closer of the two to the f32 plan). The ids are equal but
  where the two pick differently between logits the CPU holds within that error of each other (a
  near tie: the random weights make them common); that sequence is compared up to there.
A sim run also must print no fallback notice and report its device with --verbose. Then hetc serve
--device sim of the tiny f32 plan (with check_chat.py's tokenizer) answers three concurrent greedy
completions (one continuous batch on the device) with the text hetc serve --device cpu gives.
"""

import argparse
import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_against_torch import parse_token_lines  # noqa: E402
from check_chat import write_chat_tokenizer  # noqa: E402
from e2e_common import (PROMPTS, CheckFailed, check_hetc_binary, export, indent,  # noqa: E402
                        main_wrapper, prompt_arg, run)
from serve_common import Server  # noqa: E402

SERVE_PROMPTS = ["Hello, world", "The quick brown fox", "a"]

MAX_NEW = 6
BOUNDS = ["--max-batch", "4", "--max-seq", "96"]
EXACT = {"f32", "int8", "int4"}


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) - 1 and a[n] == b[n]:
        n += 1
    return n


def compile_plan(a, onnx_path, weights, plan):
    extra = ["--weights", weights]
    if weights in ("int8", "int4"):
        extra += ["--lm-head", weights]
    run([a.hetc, "compile", onnx_path, "--target", "spr-h100", *BOUNDS, *extra, "-o", plan],
        f"hetc compile --weights {weights}")


def run_on(a, plan, device, tag):
    logits = os.path.join(a.workdir, f"{tag}_{device}.npy")
    cmd = [a.hetc, "run", plan, "--device", device, "--portable-kernels", "--max-new", str(MAX_NEW),
           "--logits-out", logits, "--verbose"]
    for p in PROMPTS:
        cmd += ["--prompt-ids", prompt_arg(p)]
    proc = run(cmd, f"hetc run --device {device} ({tag})", timeout=a.timeout)
    tokens = parse_token_lines(proc.stdout, f"hetc run --device {device} ({tag})", len(PROMPTS),
                               MAX_NEW)
    return tokens, np.load(logits), proc.stderr


def check(a):
    os.makedirs(a.workdir, exist_ok=True)
    summary = []
    for preset in a.preset or ["tiny", "odd"]:
        onnx_path = export(preset, os.path.join(a.workdir, preset), seed=0)
        f32_logits = f32_tokens = None  # the CPU's f32 plan's: the reference of bf16's error
        for weights in a.weights or ["f32", "bf16", "int8", "int4"]:
            tag = f"{preset}_{weights}"
            plan = os.path.join(a.workdir, f"{tag}.hplan")
            compile_plan(a, onnx_path, weights, plan)
            cpu_tokens, cpu_logits, _ = run_on(a, plan, "cpu", tag)
            if weights == "f32":
                f32_tokens, f32_logits = cpu_tokens, cpu_logits
            sim_tokens, sim_logits, sim_err = run_on(a, plan, "sim", tag)
            # Steps compared per sequence: all, but for bf16 a greedy pick the two runs make
            # differently between two logits the CPU holds within bf16's error of each other (a
            # near tie, which random weights make common) ends the sequence's comparison there.
            compared = [len(t) for t in cpu_tokens]
            if sim_tokens != cpu_tokens and weights in EXACT:
                raise CheckFailed(f"{tag}: --device sim generated {sim_tokens}, the CPU {cpu_tokens}")
            if "hetc: devices: every op on sim (software device" not in sim_err or \
                    "hetc: notice:" in sim_err:
                raise CheckFailed(f"{tag}: hetc run --device sim --verbose does not report the "
                                  f"software device alone:\n{indent(sim_err)}")
            if not np.all(np.isfinite(sim_logits)):
                raise CheckFailed(f"{tag}: --device sim's logits are not all finite")
            if weights in EXACT:
                if not np.array_equal(sim_logits.view(np.uint32), cpu_logits.view(np.uint32)):
                    worst = float(np.max(np.abs(sim_logits - cpu_logits)))
                    raise CheckFailed(f"{tag}: --device sim's logits are not the CPU's bits "
                                      f"(largest difference {worst})")
                summary.append(f"{tag}: ids and logits bit for bit")
                continue
            if f32_logits is None:
                raise CheckFailed(f"{tag}: bf16 is checked against the f32 plan's error: list "
                                  "--weights f32 before bf16")
            # bf16's error: the CPU's bf16 plan against its f32 plan over the steps both computed
            # from the same ids (up to and including the first step they pick differently).
            format_error = max(
                float(np.max(np.abs(cpu_logits[i, :same] - f32_logits[i, :same])))
                for i, same in enumerate(common_prefix(b, f) + 1 for b, f in zip(cpu_tokens,
                                                                                   f32_tokens)))
            for i, (sim_ids, cpu_ids) in enumerate(zip(sim_tokens, cpu_tokens)):
                for j, (x, y) in enumerate(zip(sim_ids, cpu_ids)):
                    if x == y:
                        continue
                    margin = float(cpu_logits[i, j, y] - cpu_logits[i, j, x])
                    if margin > format_error:
                        raise CheckFailed(f"{tag}: sequence {i} step {j}: --device sim picked {x}, "
                                          f"the CPU {y}, whose logit is {margin} higher: more than "
                                          f"bf16's error here ({format_error})")
                    compared[i] = j + 1
                    break
            worst = max(float(np.max(np.abs(sim_logits[i, :n] - cpu_logits[i, :n])))
                        for i, n in enumerate(compared))
            if worst > format_error:
                raise CheckFailed(f"{tag}: --device sim's logits differ from the CPU's by {worst}, "
                                  f"more than the CPU's bf16 plan differs from its f32 plan "
                                  f"({format_error})")
            ties = sum(n < len(t) for n, t in zip(compared, cpu_tokens))
            summary.append(f"{tag}: logits within {worst:.3g} of the CPU's (bf16's own error here: "
                           f"{format_error:.3g}); ids equal" +
                           (f" up to a near tie in {ties} sequence(s)" if ties else ""))
    check_serve(a)
    for line in summary:
        print(line)
    print(f"OK: {len(summary)} spr-h100 plans run every op on the software device with the CPU's "
          "greedy ids (bf16: up to near ties) and logits (f32 and integer plans: its bits)")


def completions(a, plan, device):
    """The texts of SERVE_PROMPTS from hetc serve --device DEVICE, asked at once."""
    server = Server(a.hetc, plan, "--device", device, "--threads", "1")
    texts = [None] * len(SERVE_PROMPTS)
    errors = []

    def ask(i):
        try:
            response = server.post_json("/v1/completions", {"prompt": SERVE_PROMPTS[i],
                                                            "max_tokens": 10, "temperature": 0})
            texts[i] = response["choices"][0]["text"]
        except Exception as e:  # noqa: BLE001 - reported below, with the server's log
            errors.append(f"{SERVE_PROMPTS[i]!r}: {e}")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(SERVE_PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    server.stop()
    if errors:
        raise CheckFailed(f"hetc serve --device {device}: " + "; ".join(errors))
    return texts


def check_serve(a):
    model_dir = os.path.join(a.workdir, "serve")
    onnx_path = export("tiny", model_dir, seed=0)
    write_chat_tokenizer(model_dir)
    plan = os.path.join(a.workdir, "serve.hplan")
    run([a.hetc, "compile", onnx_path, "--target", "spr-h100", *BOUNDS, "--weights", "f32", "-o",
         plan], "hetc compile (serve)")
    cpu, sim = completions(a, plan, "cpu"), completions(a, plan, "sim")
    if cpu != sim:
        raise CheckFailed(f"hetc serve --device sim answered {sim}, --device cpu {cpu}")
    if not all(sim):
        raise CheckFailed(f"hetc serve answered an empty completion: {sim}")
    print(f"hetc serve --device sim: the CPU's {len(sim)} greedy completions")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--preset", action="append", help="presets (default: tiny and odd)")
    p.add_argument("--weights", action="append", help="formats (default: f32 bf16 int8 int4)")
    p.add_argument("--timeout", type=float, default=300)
    a = p.parse_args()
    check_hetc_binary(a.hetc)
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
