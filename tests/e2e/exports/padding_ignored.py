#!/usr/bin/python3
"""An attention whose mask leaves left padding visible is read by its values as its form is read:
hetc never pads a sequence, so such a mask is the causal one for every row hetc computes.

    /usr/bin/python3 tests/e2e/exports/padding_ignored.py --hetc BUILD/bin/hetc --workdir DIR

The model is models/exports/hf_llama.py's default export, edited with onnx.helper so that every
node reading attention_mask reads ones of its shape instead (Mul by 0, Add 1), as an export that
ignores padding computes. It must compile with every attention read by its values alone
(HETC_RAISE_ATTENTION_BY_VALUES=1, compiler/lib/raise/AttentionFit.cpp), say so in --explain,
and generate the tokens the unedited export's plan generates.
"""

import os
import subprocess
import sys

import onnx
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from e2e_common import CheckFailed, check_hetc_binary, check_main  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def compile_and_run(hetc, model, plan, by_values):
    env = dict(os.environ)
    if by_values:
        env["HETC_RAISE_ATTENTION_BY_VALUES"] = "1"
    proc = subprocess.run([hetc, "compile", model, "-o", plan, "--explain"], capture_output=True,
                          text=True, timeout=300, env=env)
    if proc.returncode != 0:
        raise CheckFailed(f"hetc compile {model} exited {proc.returncode}:\n{proc.stderr.strip()}")
    run = subprocess.run([hetc, "run", plan, "--prompt-ids", "5,17,42,7", "--max-new", "8"],
                         capture_output=True, text=True, timeout=300, check=True)
    return proc.stdout + proc.stderr, run.stdout.split()


def check(a):
    check_hetc_binary(a.hetc)
    export_dir = os.path.join(a.workdir, "model")
    subprocess.run([sys.executable, os.path.join(REPO, "models/exports/hf_llama.py"), "export",
                    "--out", export_dir], check=True, capture_output=True, timeout=300)
    source = os.path.join(export_dir, "model.onnx")
    model = onnx.load(source)
    graph = model.graph
    graph.initializer.extend([helper.make_tensor("ignore_padding_zero", onnx.TensorProto.INT64, [], [0]),
                              helper.make_tensor("ignore_padding_one", onnx.TensorProto.INT64, [], [1])])
    readers = 0
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == "attention_mask":
                node.input[i] = "attention_mask_ones"
                readers += 1
    if readers == 0:
        raise CheckFailed("the export has no node reading attention_mask")
    ones = [helper.make_node("Mul", ["attention_mask", "ignore_padding_zero"],
                             ["attention_mask_zeros"], name="ignore_padding_mul"),
            helper.make_node("Add", ["attention_mask_zeros", "ignore_padding_one"],
                             ["attention_mask_ones"], name="ignore_padding_add")]
    nodes = ones + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    edited = os.path.join(a.workdir, "padding_ignored.onnx")
    onnx.save(model, edited)

    _, want = compile_and_run(a.hetc, source, os.path.join(a.workdir, "source.hplan"), False)
    explain, got = compile_and_run(a.hetc, edited, os.path.join(a.workdir, "edited.hplan"), True)
    if explain.count("are an attention of") != 2:
        raise CheckFailed("--explain does not show both layers' attentions read by their values:\n"
                          + explain)
    if got != want:
        raise CheckFailed(f"tokens {got} differ from the unedited export's {want}")
    print(f"PASS: padding left visible, read by its values; tokens {' '.join(got)} as unedited")


def main():
    return check_main(check, __doc__)


if __name__ == "__main__":
    sys.exit(main())
