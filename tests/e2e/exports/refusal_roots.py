#!/usr/bin/python3
"""Refusals at the root, all of them: a decoder with two unrelated blockers is refused naming
each blocker's own node, never a node downstream of it.

    /usr/bin/python3 tests/e2e/exports/refusal_roots.py --hetc BUILD/bin/hetc --workdir DIR

The model is models/exports/hf_llama.py's default export (two layers), edited with onnx.helper
after the export, as a user's own code would change a layer:

* layer 0: sin() of the attention's o_proj output before the residual add, which no raising
  reads: the residual stream from that node on is one unrecognised region, reported once, at
  its first edge, with the Sin as where recognition stops;
* layer 1: sqrt() of the attention probabilities before they weight the values (weights that no
  longer sum to 1; abs() would change nothing, and the attention read by its values is raised):
  the attention is refused at the product of the weights and the values, naming the Sqrt and
  what reading it by its values found, and not again at the cache outputs and the o_proj input
  that depend on it.

hetc compile must exit 1, write no plan, and print the two blockers (the first on the
`hetc: error:` line, the other listed after it), with no line about the present outputs.
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


def after(nodes, matches, op_type, suffix):
    """Inserts op_type(x) after every node `matches` accepts, reading its output."""
    edited = []
    for node in nodes:
        edited.append(node)
        if matches(node):
            out = node.output[0]
            node.output[0] = out + "_before_" + suffix
            edited.append(helper.make_node(op_type, [node.output[0]], [out],
                                           name=node.name + "_" + suffix))
    return edited


def check(a):
    check_hetc_binary(a.hetc)
    export_dir = os.path.join(a.workdir, "model")
    subprocess.run([sys.executable, os.path.join(REPO, "models/exports/hf_llama.py"), "export",
                    "--out", export_dir], check=True, capture_output=True, timeout=300)
    model = onnx.load(os.path.join(export_dir, "model.onnx"))
    nodes = after(list(model.graph.node),
                  lambda n: n.op_type == "MatMul" and n.name == "/layers.0/self_attn/o_proj/MatMul",
                  "Sin", "sin")
    nodes = after(nodes, lambda n: n.op_type == "Softmax" and n.name.startswith("/layers.1/"),
                  "Sqrt", "sqrt")
    if len(nodes) != len(model.graph.node) + 2:
        raise CheckFailed("the export does not have the nodes this check edits")
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    path = os.path.join(a.workdir, "two_blockers.onnx")
    onnx.save(model, path)
    plan = path + ".hplan"
    if os.path.exists(plan):
        os.remove(plan)
    proc = subprocess.run([a.hetc, "compile", path, "-o", plan], capture_output=True, text=True,
                          timeout=120)
    print(proc.stderr.strip())
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("hetc: error: ")]
    listed = [line for line in lines if line.startswith("  - ")]
    attention = [line for line in lines
                 if "node '/layers.1/self_attn/MatMul_1' (MatMul) closes an attention hetc does "
                    "not run: it weights the values by '/layers.1/self_attn/Softmax_sqrt' (Sqrt), "
                    "not by a softmax of the scores; read by its values, " in line
                 and "by weights that sum to " in line]
    residual = [line for line in lines
                if "recognition stops at node '/layers.0/self_attn/o_proj/MatMul_sin' (Sin)" in line]
    downstream = [line for line in lines if "present." in line]
    if proc.returncode != 1 or os.path.exists(plan):
        raise CheckFailed(f"hetc compile exited {proc.returncode} (expected 1, no plan)")
    if len(errors) != 1 or len(listed) != 1 or len(lines) != 3:
        raise CheckFailed("expected one error line and one more blocker listed after it")
    if len(attention) != 1 or len(residual) != 1:
        raise CheckFailed("the two blockers are not each named at their root (the Sqrt after "
                          "layer 1's softmax, the Sin after layer 0's o_proj)")
    if downstream:
        raise CheckFailed(f"a refusal names a node downstream of its cause: {downstream[0]}")
    print("PASS: two blockers, each refused at its root node, nothing downstream named")


def main():
    return check_main(check, __doc__)


if __name__ == "__main__":
    sys.exit(main())
