#!/usr/bin/python3
"""Writes the onnx_import fuzz target's seed corpus (tests/fuzz/corpus/onnx_import/): tiny exports
of the model forms hetc compiles (a Llama export, ONNX Runtime GenAI's fused form, also with ONNX
Runtime's dynamic quantization, OPT, GPT-J with torch 1.13's Loop), each one layer of 16 hidden
units, and hand-written graphs of one or two nodes of the ops the importer and the interpreter
evaluate, so that mutations start close to every path.

    /usr/bin/python3 tests/fuzz/make_onnx_seeds.py [--out DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ["--vocab", "32", "--hidden", "16", "--layers", "1", "--heads", "2"]


def export(out, name, cmd):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable] + cmd + ["--out", d], check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "model.onnx"), "rb") as f:
            data = f.read()
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def graph_model(name, nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def hand_written():
    f = TensorProto.FLOAT
    i64 = TensorProto.INT64
    x = helper.make_tensor_value_info("x", f, ["batch", "seq", 16])
    w = numpy_helper.from_array(np.arange(16 * 8, dtype=np.float32).reshape(16, 8) / 100, "w")
    yield "matmul", graph_model("matmul", [helper.make_node("MatMul", ["x", "w"], ["y"])], [x],
                                [helper.make_tensor_value_info("y", f, ["batch", "seq", 8])], [w])
    ids = helper.make_tensor_value_info("ids", i64, ["batch", "seq"])
    table = numpy_helper.from_array(np.ones((32, 16), dtype=np.float16), "table")
    yield "gather_f16", graph_model(
        "gather", [helper.make_node("Gather", ["table", "ids"], ["e"]),
                   helper.make_node("Cast", ["e"], ["y"], to=f)],
        [ids], [helper.make_tensor_value_info("y", f, ["batch", "seq", 16])], [table])
    shape = numpy_helper.from_array(np.array([0, 0, 2, 8], dtype=np.int64), "shape")
    perm = helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3])
    yield "reshape_transpose_softmax", graph_model(
        "heads", [helper.make_node("Reshape", ["x", "shape"], ["r"]), perm,
                  helper.make_node("Softmax", ["t"], ["y"], axis=-1)],
        [x], [helper.make_tensor_value_info("y", f, None)], [shape])
    yield "shape_slice_concat", graph_model(
        "shapes", [helper.make_node("Shape", ["x"], ["s"]),
                   helper.make_node("Slice", ["s", "zero", "two"], ["bs"]),
                   helper.make_node("Concat", ["bs", "minus1"], ["c"], axis=0),
                   helper.make_node("Reshape", ["x", "c"], ["y"])],
        [x], [helper.make_tensor_value_info("y", f, None)],
        [numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
         numpy_helper.from_array(np.array([2], dtype=np.int64), "two"),
         numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1")])
    mask = helper.make_tensor_value_info("mask", TensorProto.BOOL, ["seq", "seq"])
    yield "where_expand", graph_model(
        "mask", [helper.make_node("Where", ["mask", "zero", "minf"], ["m"]),
                 helper.make_node("Expand", ["m", "shape"], ["y"])],
        [mask], [helper.make_tensor_value_info("y", f, None)],
        [numpy_helper.from_array(np.array(0, dtype=np.float32), "zero"),
         numpy_helper.from_array(np.array(-np.inf, dtype=np.float32), "minf"),
         numpy_helper.from_array(np.array([1, 1, 4, 4], dtype=np.int64), "shape")])
    # A weight whose bytes are in an external file that is not there, and one that reaches out.
    for name, location in (("external_missing", "weights.bin"), ("external_outside", "../x")):
        t = TensorProto(name="w", data_type=f, dims=[16, 8])
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", "0"), ("length", "512")):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        yield name, graph_model(name, [helper.make_node("MatMul", ["x", "w"], ["y"])], [x],
                                [helper.make_tensor_value_info("y", f, None)], [t])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(REPO, "tests/fuzz/corpus/onnx_import"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    export(a.out, "llama", ["models/export.py", "--preset", "tiny", "--set", "vocab=32",
                            "--set", "hidden=16", "--set", "layers=1", "--set", "heads=2",
                            "--set", "kv_heads=1", "--set", "head_dim=8",
                            "--set", "intermediate=24"])
    export(a.out, "genai_packed_qkv", ["models/exports/ort_genai_llama.py", *SMALL, "--kv-heads",
                                       "1", "--head-dim", "8", "--intermediate", "24",
                                       "--packed-qkv", "--rotary-in-attention"])
    export(a.out, "opt", ["models/exports/opt.py", "export", *SMALL, "--ffn", "24"])
    # ONNX Runtime's dynamic quantization (DynamicQuantizeLinear, MatMulInteger, Cast, Mul).
    export(a.out, "genai_dynamic_int8", ["models/exports/ort_genai_llama.py", *SMALL, "--kv-heads",
                                         "1", "--head-dim", "8", "--intermediate", "24",
                                         "--int8-dynamic", "int8"])
    # GPT-J as torch 1.13 exports it: a Loop over sequences (SplitToSequence, SequenceAt,
    # SequenceInsert, ConcatFromSequence) for the repeat_interleave of its rotary tables.
    export(a.out, "gptj_loop", ["models/exports/gptj.py", "export", *SMALL, "--rotary-dim", "4",
                                "--intermediate", "24", "--max-position", "64"])
    for name, model in hand_written():
        with open(os.path.join(a.out, name), "wb") as f:
            f.write(model.SerializeToString())


if __name__ == "__main__":
    main()
