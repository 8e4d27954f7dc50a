#!/usr/bin/python3
"""ONNX subgraphs (Loop bodies, If branches) through `hetc compile`: a loop hetc unrolls and Ifs
nested in If branches compile and keep the model's answer; a malformed loop or one hetc cannot
unroll is refused in one line naming the Loop node.

    /usr/bin/python3 tests/e2e/exports/subgraph_import.py --hetc BUILD/bin/hetc --workdir DIR

The model is models/exports/hf_llama.py's default export (two layers), edited with onnx.helper:
the final norm's output x is routed through a Loop before the lm_head. The Loop node is put
first in the file, before the nodes that write what its body reads (nodes out of order are
sorted; a body's reads from around the loop count as the Loop's inputs).

* unrolled: three iterations of `acc = acc + x * (i - 1)` (x again only when exactly iterations
  0, 1 and 2 run, acc carried through them) must compile and give the unedited export's ids and
  logits; so must the same loop also carrying an int64 counter and scanning it, both read after
  the loop (their element types come from the body's outputs);
* nested Ifs: the same x routed through If(x's last dimension == hidden, then: If(batch >= 0,
  Identity, Neg), else: Neg): each condition folds once shapes are evaluated, the inner If is
  lifted with its branch and decided in turn; the same ids and logits;
* refused: a trip count from the batch (symbolic), no trip count, a body reading a value nothing
  defines, a body whose outputs do not match the node's, a body redefining a value of the graph,
  a Loop inside the body.
"""

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from e2e_common import CheckFailed, check_hetc_binary, check_main  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PROMPT = "5,17,42,7,99,3"


def body_graph(extra_nodes=(), outputs=("c2", "acc2"), reads="x", counter=False):
    """acc + x * (i - 1): over iterations 0, 1 and 2 exactly, with acc threaded through them,
    the sum is x again (2 iterations, 4, or acc not carried give -x, 3x or 2x). With `counter`,
    an int64 k carried too (k + i: 3 after the three) and k scanned ([0, 1, 3])."""
    nodes = [helper.make_node("Constant", [], ["one_i"], name="loop/one",
                              value=numpy_helper.from_array(np.array(1, np.int64))),
             helper.make_node("Sub", ["i", "one_i"], ["i_minus_1"], name="loop/sub"),
             helper.make_node("Cast", ["i_minus_1"], ["factor"], to=TensorProto.FLOAT,
                              name="loop/cast"),
             helper.make_node("Mul", [reads, "factor"], ["t"], name="loop/mul"),
             helper.make_node("Add", ["acc", "t"], ["acc2"], name="loop/add"),
             helper.make_node("Identity", ["c"], ["c2"], name="loop/cond")] + list(extra_nodes)
    inputs = [helper.make_tensor_value_info("i", TensorProto.INT64, []),
              helper.make_tensor_value_info("c", TensorProto.BOOL, []),
              helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)]
    outs = [helper.make_tensor_value_info(o, TensorProto.BOOL if o == "c2" else TensorProto.FLOAT,
                                          None) for o in outputs]
    if counter:
        nodes.append(helper.make_node("Add", ["k", "i"], ["k2"], name="loop/count"))
        inputs.append(helper.make_tensor_value_info("k", TensorProto.INT64, []))
        outs.insert(2, helper.make_tensor_value_info("k2", TensorProto.INT64, []))
        outs.append(helper.make_tensor_value_info("k2", TensorProto.INT64, []))
    return helper.make_graph(nodes, "body", inputs, outs)


def edited(model, trip_nodes, trip, body, loop_name="norm_loop", counter=False):
    """The model with the final norm's output routed through Loop(trip, true, x), the Loop
    first among the nodes. With `counter`, the loop also carries an int64 k from 0 and scans
    it; x is then moved by Cast(k - 3) and Cast(ReduceSum(scan) - 4), zeros when the loop ran
    as it should."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    nodes = list(m.graph.node)
    head = [n for n in nodes if n.op_type == "MatMul" and "lm_head" in n.name]
    if len(head) != 1:
        raise CheckFailed("the export has no single lm_head MatMul to edit before")
    x = head[0].input[0]
    head[0].input[0] = "looped"
    if counter:
        loop = helper.make_node("Loop", [trip, "loop_true", x, "k0"],
                                ["looped_acc", "k_final", "k_scan"], name=loop_name, body=body)
        ints = lambda name, v: helper.make_node(  # noqa: E731
            "Constant", [], [name], name=name, value=numpy_helper.from_array(np.array(v, np.int64)))
        trip_nodes = list(trip_nodes) + [
            ints("k0", 0), ints("three", 3), ints("four", 4),
            helper.make_node("Sub", ["k_final", "three"], ["k_off"], name="k_off"),
            helper.make_node("ReduceSum", ["k_scan"], ["k_sum"], name="k_sum", keepdims=0),
            helper.make_node("Sub", ["k_sum", "four"], ["s_off"], name="s_off"),
            helper.make_node("Add", ["k_off", "s_off"], ["off"], name="off"),
            helper.make_node("Cast", ["off"], ["off_f"], name="off_f", to=TensorProto.FLOAT),
            helper.make_node("Add", ["looped_acc", "off_f"], ["looped"], name="moved")]
    else:
        loop = helper.make_node("Loop", [trip, "loop_true", x], ["looped"], name=loop_name,
                                body=body)
    true = helper.make_node("Constant", [], ["loop_true"], name="loop_true",
                            value=numpy_helper.from_array(np.array(True)))
    # The body reads x from around the loop under the name "x".
    alias = helper.make_node("Identity", [x], ["x"], name="loop_x")
    del m.graph.node[:]
    m.graph.node.extend([loop, true, alias] + list(trip_nodes) + nodes)
    return m


def nested_ifs(model):
    """The final norm's output x routed through If(last dim of x == its hidden size, then:
    If(batch >= 0, Identity(x), Neg(x)), else: Neg(x)): both true once shapes are evaluated."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    nodes = list(m.graph.node)
    head = [n for n in nodes if n.op_type == "MatMul" and "lm_head" in n.name][0]
    x = head.input[0]
    head.input[0] = "if_out"
    hidden = [i for i in m.graph.initializer if i.name == head.input[1]]
    width = hidden[0].dims[0] if hidden else None
    if width is None:
        raise CheckFailed("the lm_head's weight is not an initializer")

    def branch(name, nodes, out):
        return helper.make_graph(nodes, name, [],
                                 [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)])
    inner = helper.make_node(
        "If", ["batch_ok"], ["inner_out"], name="inner_if",
        then_branch=branch("inner_then", [helper.make_node("Identity", [x], ["inner_same"],
                                                           name="inner_same")], "inner_same"),
        else_branch=branch("inner_else", [helper.make_node("Neg", [x], ["inner_neg"],
                                                           name="inner_neg")], "inner_neg"))
    outer = helper.make_node(
        "If", ["width_ok"], ["if_out"], name="outer_if",
        then_branch=branch("outer_then", [
            helper.make_node("Shape", [x], ["x_shape0"], name="x_shape0"),
            helper.make_node("Gather", ["x_shape0", "axis0"], ["x_batch"], name="x_batch", axis=0),
            helper.make_node("GreaterOrEqual", ["x_batch", "axis0"], ["batch_ok"],
                             name="batch_ok"),
            inner], "inner_out"),
        else_branch=branch("outer_else", [helper.make_node("Neg", [x], ["outer_neg"],
                                                           name="outer_neg")], "outer_neg"))
    added = [
        helper.make_node("Constant", [], ["axis0"], name="axis0",
                         value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Constant", [], ["axis_last"], name="axis_last",
                         value=numpy_helper.from_array(np.array(-1, np.int64))),
        helper.make_node("Constant", [], ["width"], name="width",
                         value=numpy_helper.from_array(np.array(width, np.int64))),
        helper.make_node("Shape", [x], ["x_shape"], name="x_shape"),
        helper.make_node("Gather", ["x_shape", "axis_last"], ["x_width"], name="x_width", axis=0),
        helper.make_node("Equal", ["x_width", "width"], ["width_ok"], name="width_ok"),
        outer]
    del m.graph.node[:]
    m.graph.node.extend(nodes + added)
    return m


def compile_plan(a, model, name):
    path = os.path.join(a.workdir, name + ".onnx")
    onnx.save(model, path)
    plan = path + ".hplan"
    if os.path.exists(plan):
        os.remove(plan)
    proc = subprocess.run([a.hetc, "compile", path, "-o", plan, "--weights", "f32"],
                          capture_output=True, text=True, timeout=300)
    return proc, plan


def run_plan(a, plan):
    """The ids hetc prints and the logits it writes, for one prompt."""
    logits = plan + ".logits.npy"
    proc = subprocess.run([a.hetc, "run", plan, "--prompt-ids", PROMPT, "--max-new", "8",
                           "--logits-out", logits], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise CheckFailed(f"hetc run failed: {proc.stderr.strip()[-400:]}")
    return proc.stdout, np.load(logits)


def check(a):
    check_hetc_binary(a.hetc)
    export_dir = os.path.join(a.workdir, "model")
    subprocess.run([sys.executable, os.path.join(REPO, "models/exports/hf_llama.py"), "export",
                    "--out", export_dir], check=True, capture_output=True, timeout=300)
    model = onnx.load(os.path.join(export_dir, "model.onnx"))

    base, base_plan = compile_plan(a, model, "plain")
    if base.returncode != 0:
        raise CheckFailed(f"the unedited export does not compile: {base.stderr.strip()}")
    want = run_plan(a, base_plan)

    three = helper.make_node("Constant", [], ["trip"], name="trip",
                             value=numpy_helper.from_array(np.array(3, np.int64)))
    proc, plan = compile_plan(a, edited(model, [three], "trip", body_graph()), "unrolled")
    if proc.returncode != 0:
        raise CheckFailed(f"a loop of 3 iterations is refused: {proc.stderr.strip()}")
    got = run_plan(a, plan)
    if got[0] != want[0] or not np.array_equal(got[1], want[1]):
        raise CheckFailed(f"the unrolled loop changes the answer: ids {got[0]!r} vs {want[0]!r}, "
                          f"logits differ by {np.abs(got[1] - want[1]).max()}")
    print(f"PASS: a Loop of 3 iterations, first in the file, unrolled: the same ids "
          f"({got[0].strip()}) and logits")

    proc, plan = compile_plan(a, edited(model, [three], "trip", body_graph(counter=True),
                                        counter=True), "counter")
    if proc.returncode != 0:
        raise CheckFailed(f"a loop carrying and scanning an int64 is refused: "
                          f"{proc.stderr.strip()}")
    got = run_plan(a, plan)
    if got[0] != want[0] or not np.array_equal(got[1], want[1]):
        raise CheckFailed(f"the int64 counter changes the answer: ids {got[0]!r} vs {want[0]!r}")
    print("PASS: the same loop carrying and scanning an int64 counter: the same ids and logits")

    proc, plan = compile_plan(a, nested_ifs(model), "nested_ifs")
    if proc.returncode != 0:
        raise CheckFailed(f"Ifs nested in an If's branch are refused: {proc.stderr.strip()}")
    got = run_plan(a, plan)
    if got[0] != want[0] or not np.array_equal(got[1], want[1]):
        raise CheckFailed(f"the nested Ifs change the answer: ids {got[0]!r} vs {want[0]!r}")
    print("PASS: an If nested in an If's branch, both decided by shapes: the same ids and logits")

    zero = helper.make_node("Constant", [], ["zero_axis"], name="zero_axis",
                            value=numpy_helper.from_array(np.array(0, np.int64)))
    batch = [zero, helper.make_node("Shape", ["x"], ["x_shape"], name="x_shape"),
             helper.make_node("Gather", ["x_shape", "zero_axis"], ["batch"], name="batch",
                              axis=0)]
    inner = helper.make_node("Loop", ["trip", "c", "acc"], ["nested"], name="inner_loop",
                             body=body_graph())
    refusals = [
        ("batch_trips", edited(model, batch, "batch", body_graph()),
         "node 'norm_loop' (Loop) runs a number of iterations that does not evaluate to a "
         "constant"),
        ("no_trips", edited(model, [], "", body_graph()),
         "node 'norm_loop' (Loop) has no trip count"),
        ("undefined_read", edited(model, [three], "trip", body_graph(reads="nope")),
         "node 'norm_loop' (Loop) reads 'nope' in its body, which no graph input, initializer "
         "or node defines"),
        ("outputs", edited(model, [three], "trip", body_graph(outputs=("c2",))),
         "node 'norm_loop' (Loop) is malformed: its body takes 3 inputs and gives 1 outputs for "
         "the node's 3 inputs and 1 outputs"),
        ("body_redefines", edited(model, [three], "trip", body_graph(extra_nodes=[
            helper.make_node("Identity", ["acc"], ["input_ids"], name="loop/shadow")])),
         "node 'norm_loop' (Loop) defines 'input_ids' in its body, which is already defined "
         "around it or in it"),
        ("nested", edited(model, [three], "trip", body_graph(extra_nodes=[inner])),
         "node 'norm_loop' (Loop) holds node 'inner_loop' (Loop) with a subgraph of its own in "
         "its body, which is not supported"),
    ]
    for name, m, text in refusals:
        proc, plan = compile_plan(a, m, name)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        if proc.returncode != 1 or os.path.exists(plan):
            raise CheckFailed(f"{name}: hetc compile exited {proc.returncode} (expected 1, no "
                              f"plan): {proc.stderr.strip()[-400:]}")
        if not any(text in line for line in lines):
            raise CheckFailed(f"{name}: the refusal does not say '{text}':\n{proc.stderr}")
        print(f"PASS: {name}: {lines[0]}")


def main():
    return check_main(check, __doc__)


if __name__ == "__main__":
    sys.exit(main())
