#!/usr/bin/python3
"""An ONNX file's float32 converted to float16, written after onnxconverter-common's
`float16.convert_float_to_float16` (the converter behind many published `*_fp16.onnx` files,
transformers.js's among them), for files other tools wrote.

    /usr/bin/python3 models/exports/float16_convert.py --model IN.onnx --out OUT.onnx
        [--keep-io-types] [--external-data]

What it does, as the converter does it (its defaults: min_positive_val 1e-7, max_finite_val 1e4):

  * float32 tensors stored in the file (initializers, Constant and ConstantOfShape values, any
    tensor attribute, in subgraphs too) become float16, after clamping: a positive value below
    1e-7 becomes 1e-7, a finite value beyond 1e4 becomes 1e4 (signs kept; 0, inf and NaN kept),
    so a mask's finfo(float32).min is -1e4;
  * Cast(to = float) becomes Cast(to = float16);
  * every float32 value the shape inference knows of (inputs, outputs, value_info; sequences of
    them too) is declared float16, the graph's inputs and outputs too, unless --keep-io-types, which instead puts a
    Cast to float16 after each float input and a Cast to float before each float output;
  * the converter's blocked ops (among those in decoders: Range, CumSum, Min, Max, TopK, Resize)
    keep float32: a Cast to float before each float16 input they read, and one to float16 after
    each output.
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MIN_POSITIVE = 1e-7
MAX_FINITE = 1e4
BLOCKED = {"ArrayFeatureExtractor", "Binarizer", "CastMap", "CategoryMapper", "DictVectorizer",
           "FeatureVectorizer", "Imputer", "LabelEncoder", "LinearClassifier", "LinearRegressor",
           "Normalizer", "OneHotEncoder", "SVMClassifier", "SVMRegressor", "Scaler",
           "TreeEnsembleClassifier", "TreeEnsembleRegressor", "ZipMap", "NonMaxSuppression",
           "TopK", "RoiAlign", "Resize", "Range", "CumSum", "Min", "Max", "Upsample"}


def clamped_float16(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.float64)
    v = np.where((v > 0) & (v < MIN_POSITIVE), MIN_POSITIVE, v)
    v = np.where((v < 0) & (v > -MIN_POSITIVE), -MIN_POSITIVE, v)
    v = np.where(np.isfinite(v) & (v > MAX_FINITE), MAX_FINITE, v)
    v = np.where(np.isfinite(v) & (v < -MAX_FINITE), -MAX_FINITE, v)
    return v.astype(np.float16)


def convert_tensor(t: TensorProto) -> None:
    if t.data_type != TensorProto.FLOAT:
        return
    converted = numpy_helper.from_array(clamped_float16(numpy_helper.to_array(t)), t.name)
    t.CopyFrom(converted)


def is_float(vi) -> bool:
    return vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == TensorProto.FLOAT


def is_float_sequence(vi) -> bool:
    return (vi.type.HasField("sequence_type") and
            vi.type.sequence_type.elem_type.tensor_type.elem_type == TensorProto.FLOAT)


def convert_graph(graph, float16_names: set, skip_io: set, blocked: list) -> None:
    """Converts one graph and, through node attributes, its subgraphs."""
    for t in graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            convert_tensor(t)
            float16_names.add(t.name)
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if is_float(vi) and vi.name not in skip_io:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
            float16_names.add(vi.name)
        if is_float_sequence(vi) and vi.name not in skip_io:
            vi.type.sequence_type.elem_type.tensor_type.elem_type = TensorProto.FLOAT16
    for node in graph.node:
        if node.op_type in BLOCKED:
            blocked.append((graph, node))
            continue
        if node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to" and attr.i == TensorProto.FLOAT:
                    attr.i = TensorProto.FLOAT16
        for attr in node.attribute:
            if attr.HasField("t"):
                convert_tensor(attr.t)
            for t in attr.tensors:
                convert_tensor(t)
            if attr.HasField("g"):
                convert_graph(attr.g, float16_names, skip_io, blocked)
            for g in attr.graphs:
                convert_graph(g, float16_names, skip_io, blocked)


def convert(model: onnx.ModelProto, keep_io_types: bool) -> onnx.ModelProto:
    model = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    skip_io, renamed, io_casts = set(), {}, []
    if keep_io_types:
        for i, vi in enumerate(graph.input):
            if is_float(vi):
                renamed[vi.name] = f"graph_input_cast_{i}"
                skip_io.add(vi.name)
                io_casts.append(helper.make_node("Cast", [vi.name], [renamed[vi.name]],
                                                 to=TensorProto.FLOAT16, name=f"graph_input_cast{i}"))
        for i, vi in enumerate(graph.output):
            if is_float(vi):
                renamed[vi.name] = f"graph_output_cast_{i}"
                skip_io.add(vi.name)
                io_casts.append(helper.make_node("Cast", [renamed[vi.name]], [vi.name],
                                                 to=TensorProto.FLOAT, name=f"graph_output_cast{i}"))
        for node in graph.node:
            node.input[:] = [renamed.get(x, x) for x in node.input]
            node.output[:] = [renamed.get(x, x) for x in node.output]
    float16_names, blocked = set(renamed.values()), []
    convert_graph(graph, float16_names, skip_io, blocked)
    # Blocked ops keep float32, behind Casts; the converter appends its Casts after every other
    # node, and so does this (ONNX Runtime and hetc sort a graph themselves).
    for g, node in blocked:
        before = cast_where_float16(node.name, "input", node.input, float16_names, TensorProto.FLOAT)
        after = cast_where_float16(node.name, "output", node.output, float16_names,
                                   TensorProto.FLOAT16)
        g.node.extend(before + after)
    graph.node.extend(io_casts)
    return model


def cast_where_float16(name, side, values, float16_names, to):
    """Casts that put a blocked node's float16 inputs (or outputs) on the other side of a float32
    Cast, renaming them in place in `values`; returns the Cast nodes."""
    casts = []
    for i, x in enumerate(values):
        if x not in float16_names:
            continue
        renamed = f"{name}_{side}_cast_{i}"
        io = ([x], [renamed]) if side == "input" else ([renamed], [x])
        casts.append(helper.make_node("Cast", *io, to=to, name=f"{name}_{side}_cast{i}"))
        values[i] = renamed
    return casts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--keep-io-types", action="store_true",
                   help="float32 inputs and outputs, Cast to and from float16 inside")
    p.add_argument("--external-data", action="store_true",
                   help="write the weights to OUT.data beside the file")
    a = p.parse_args(argv)
    model = convert(onnx.load(a.model), a.keep_io_types)
    if a.external_data:
        onnx.save_model(model, a.out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(a.out) + ".data", size_threshold=1024)
    else:
        onnx.save(model, a.out)
    counts = sum(1 for t in model.graph.initializer if t.data_type == TensorProto.FLOAT16)
    print(f"wrote {a.out}: {counts} float16 initializers"
          f"{', float32 inputs and outputs' if a.keep_io_types else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
