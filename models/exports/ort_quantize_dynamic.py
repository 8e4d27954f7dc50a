#!/usr/bin/python3
"""ONNX Runtime's dynamic quantization of an ONNX file's linears, written after
onnxruntime.quantization.quantize_dynamic (QOperator form, MatMulConstBOnly, EnableSubgraph: what
transformers.js's `*_quantized.onnx` files are made with), for files other tools wrote.

    /usr/bin/python3 models/exports/ort_quantize_dynamic.py --model IN.onnx --out OUT.onnx
        [--weight-type int8|uint8] [--per-channel] [--reduce-range] [--form dynamic|qdq]

Every MatMul whose B is a 2-D float initializer, in the graph and in its If branches, becomes

    (xq, xs, xzp) = DynamicQuantizeLinear(x)              one per activation and scope
    y = Mul(Cast(MatMulInteger(xq, Q, xzp, zp), float), Mul(xs, scale))

with Q, scale and zero point from ONNX Runtime's formulas (quant_utils.compute_scale_zp and
quantize_data): int8 weights symmetric (range -127..127, or -64..64 with --reduce-range), uint8
asymmetric (0..255, or 0..127), the range widened to hold 0, round half to even; one scale for
the whole weight, or with --per-channel one per output column (axis 1). --form qdq writes the same
Q, scale and zero point as MatMul(x, DequantizeLinear(Q, scale, zp, axis 1)) instead: the twin
whose activations stay float, for telling the weights' rounding from the activations'.
"""

import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def qrange(weight_type: str, reduce_range: bool):
    if weight_type == "int8":
        return (-64, 64) if reduce_range else (-127, 127)
    return (0, 127) if reduce_range else (0, 255)


def scale_zero_point(rmin, rmax, qmin, qmax, symmetric: bool):
    """quant_utils.compute_scale_zp: the range widened to hold 0 (and made symmetric)."""
    rmin = np.minimum(rmin, 0).astype(np.float32)
    rmax = np.maximum(rmax, 0).astype(np.float32)
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, absmax
    scale = ((rmax - rmin) / np.float32(qmax - qmin)).astype(np.float32)
    scale = np.where(scale == 0, np.float32(1), scale).astype(np.float32)
    zero_point = np.round(np.float32(qmin) - rmin / scale).astype(np.int64) if not symmetric \
        else np.zeros_like(rmin, dtype=np.int64)
    return scale, zero_point


def quantize_weight(w: np.ndarray, weight_type: str, per_channel: bool, reduce_range: bool):
    """Q [K, N], scale and zero point (scalars, or [N] per output column)."""
    qmin, qmax = qrange(weight_type, reduce_range)
    symmetric = weight_type == "int8"
    if per_channel:
        scale, zp = scale_zero_point(w.min(axis=0), w.max(axis=0), qmin, qmax, symmetric)
        q = np.round(w / scale[None, :]) + zp[None, :]
    else:
        scale, zp = scale_zero_point(np.array(w.min()), np.array(w.max()), qmin, qmax, symmetric)
        q = np.round(w / scale) + zp
    dtype = np.int8 if weight_type == "int8" else np.uint8
    return np.clip(q, qmin, qmax).astype(dtype), scale.astype(np.float32), zp.astype(dtype)


def quantize_graph(graph, top, initializers, a, counter):
    """Rewrites graph's MatMuls (and its If branches', recursively) in place; the quantized
    weights go to the top graph's initializers, which every branch reads."""
    nodes = []
    activations = {}  # x -> (xq, xs, xzp) in this scope
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                quantize_graph(attr.g, top, initializers, a, counter)
        w = initializers.get(node.input[1]) if node.op_type == "MatMul" and \
            len(node.input) == 2 else None
        if w is None or w.ndim != 2 or w.dtype.kind != "f":
            nodes.append(node)
            continue
        counter[0] += 1
        name = node.name or f"MatMul_{counter[0]}"
        x, y = node.input[0], node.output[0]
        q, scale, zp = quantize_weight(w.astype(np.float32), a.weight_type, a.per_channel,
                                       a.reduce_range)
        qname, sname, zname = (f"{node.input[1]}_quantized", f"{node.input[1]}_scale",
                               f"{node.input[1]}_zero_point")
        for t in (numpy_helper.from_array(q, qname), numpy_helper.from_array(scale, sname),
                  numpy_helper.from_array(zp, zname)):
            if t.name not in initializers:
                top.initializer.append(t)
                initializers[t.name] = None  # written once, even when two MatMuls share B
        if a.form == "qdq":
            attrs = {"axis": 1} if a.per_channel else {}
            nodes.append(helper.make_node("DequantizeLinear", [qname, sname, zname],
                                          [f"{y}_dequantized_weight"], f"{name}_DequantizeLinear",
                                          **attrs))
            nodes.append(helper.make_node("MatMul", [x, f"{y}_dequantized_weight"], [y], name))
            continue
        if x not in activations:
            activations[x] = (f"{x}_quantized", f"{x}_scale", f"{x}_zero_point")
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(activations[x]),
                                          f"{x}_QuantizeLinear"))
        xq, xs, xzp = activations[x]
        nodes += [
            helper.make_node("MatMulInteger", [xq, qname, xzp, zname], [f"{y}_output_quantized"],
                             f"{name}_quant"),
            helper.make_node("Cast", [f"{y}_output_quantized"],
                             [f"{y}_output_quantized_cast_output"], f"{name}_quant_output_cast",
                             to=TensorProto.FLOAT),
            helper.make_node("Mul", [xs, sname], [f"{name}_quant_scales_mul:0"],
                             f"{name}_quant_scales_mul"),
            helper.make_node("Mul", [f"{y}_output_quantized_cast_output",
                                     f"{name}_quant_scales_mul:0"], [y],
                             f"{name}_quant_output_scale_mul"),
        ]
    del graph.node[:]
    graph.node.extend(nodes)


def drop_unread_initializers(model):
    """Removes the initializers no node (in any subgraph) and no output reads: the float weights
    a quantizer replaced."""
    read = set()

    def reads(graph):
        read.update(o.name for o in graph.output)
        for node in graph.node:
            read.update(node.input)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    reads(attr.g)
    reads(model.graph)
    kept = [t for t in model.graph.initializer if t.name in read]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--weight-type", choices=("int8", "uint8"), default="int8")
    p.add_argument("--per-channel", action="store_true")
    p.add_argument("--reduce-range", action="store_true")
    p.add_argument("--form", choices=("dynamic", "qdq"), default="dynamic")
    a = p.parse_args(argv)
    model = onnx.load(a.model)
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    counter = [0]
    quantize_graph(model.graph, model.graph, initializers, a, counter)
    # Float weights no MatMul reads any more leave the file, as quantize_dynamic's do.
    drop_unread_initializers(model)
    if not any(o.domain in ("", "ai.onnx") and o.version >= 11 for o in model.opset_import):
        raise SystemExit("DynamicQuantizeLinear needs opset 11 or later")
    onnx.save(model, a.out)
    print(f"wrote {a.out}: {counter[0]} MatMuls quantized ({a.form}, {a.weight_type}, "
          f"{'per channel' if a.per_channel else 'per tensor'}"
          f"{', reduced range' if a.reduce_range else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
