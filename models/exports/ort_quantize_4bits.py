#!/usr/bin/python3
"""ONNX Runtime's 4-bit weight quantization of an ONNX file's linears, written after
onnxruntime.quantization.matmul_4bits_quantizer (its default round-to-nearest algorithm: what
transformers.js's `*_q4.onnx` and, after a float16 conversion, `*_q4f16.onnx` files are made
with), for files other tools wrote.

    /usr/bin/python3 models/exports/ort_quantize_4bits.py --model IN.onnx --out OUT.onnx
        [--block-size 32] [--asymmetric] [--accuracy-level N]

Every MatMul whose B is a 2-D float initializer [K, N] (float32 or float16), in the graph and in
its If branches, becomes com.microsoft MatMulNBits(A, B_Q4, B_scales[, B_zero_points]) with
K, N, bits 4 and block_size: B's columns in blocks of block_size along K (K padded with zeros to
whole blocks), each block

  * symmetric (the default, as transformers.js quantizes): the element of largest magnitude m,
    with its sign, gives scale = m / -8 (negative when m is positive) and zero point 8, so
    q = clip(round(w / scale) + 8, 0, 15) puts m at 0 exactly;
  * asymmetric: lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / 15,
    zp = clip(round(-lo / scale), 0, 15), q = clip(round(w / scale) + zp, 0, 15);

a block of zeros has scale 0 (q = zp). Scales keep B's float type. B_Q4 is [N, blocks,
block_size / 2] with element k of a block in byte k / 2, the even one in the low nibble; zero
points are packed the same way, [N * ceil(blocks / 2)], a row's first block in a new byte.
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_quantize_dynamic import drop_unread_initializers  # noqa: E402

MS = "com.microsoft"


def quantize_blocks(w_kn: np.ndarray, block: int, symmetric: bool):
    """(q [N, blocks * block] uint8, scales [N, blocks] float32, zero points [N, blocks] uint8)
    of a [K, N] weight."""
    k, n = w_kn.shape
    blocks = (k + block - 1) // block
    w = np.zeros((n, blocks * block), dtype=np.float32)
    w[:, :k] = w_kn.astype(np.float32).T
    w = w.reshape(n, blocks, block)
    if symmetric:
        at = np.abs(w).argmax(axis=2)
        m = np.take_along_axis(w, at[:, :, None], axis=2)[:, :, 0]
        scale = (m / np.float32(-8)).astype(np.float32)
        zp = np.full((n, blocks), 8, dtype=np.float32)
    else:
        lo = np.minimum(w.min(axis=2), 0)
        hi = np.maximum(w.max(axis=2), 0)
        scale = ((hi - lo) / np.float32(15)).astype(np.float32)
        safe = np.where(scale != 0, scale, 1).astype(np.float32)
        zp = np.where(scale != 0, np.clip(np.round(-lo / safe), 0, 15), 0).astype(np.float32)
    safe = np.where(scale != 0, scale, 1).astype(np.float32)[:, :, None]
    q = np.where(scale[:, :, None] != 0, np.clip(np.round(w / safe) + zp[:, :, None], 0, 15),
                 zp[:, :, None])
    return q.reshape(n, blocks * block).astype(np.uint8), scale, zp.astype(np.uint8)


def pack_nibbles(q: np.ndarray) -> np.ndarray:
    """Pairs of 4-bit values along the last axis, the even one in the low nibble."""
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


def quantize_graph(graph, top, initializers, a, counter):
    """Rewrites graph's MatMuls (and its If branches', recursively) in place; the quantized
    weights go to the top graph's initializers, which every branch reads."""
    nodes = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                quantize_graph(attr.g, top, initializers, a, counter)
        w = initializers.get(node.input[1]) if node.op_type == "MatMul" and \
            node.domain in ("", "ai.onnx") and len(node.input) == 2 else None
        if w is None or w.ndim != 2 or w.dtype.kind != "f":
            nodes.append(node)
            continue
        counter[0] += 1
        k, n = w.shape
        q, scale, zp = quantize_blocks(w, a.block_size, not a.asymmetric)
        blocks = scale.shape[1]
        names = (f"{node.input[1]}_Q4", f"{node.input[1]}_scales", f"{node.input[1]}_zero_points")
        tensors = [numpy_helper.from_array(pack_nibbles(q).reshape(n, blocks, a.block_size // 2),
                                           names[0]),
                   numpy_helper.from_array(scale.reshape(-1).astype(w.dtype), names[1])]
        if a.asymmetric:
            padded = np.zeros((n, blocks + blocks % 2), dtype=np.uint8)
            padded[:, :blocks] = zp
            tensors.append(numpy_helper.from_array(pack_nibbles(padded).reshape(-1), names[2]))
        for t in tensors:
            if t.name not in initializers:
                top.initializer.append(t)
                initializers[t.name] = None  # written once, even when two MatMuls share B
        attrs = {"K": k, "N": n, "bits": 4, "block_size": a.block_size}
        if a.accuracy_level is not None:
            attrs["accuracy_level"] = a.accuracy_level
        nodes.append(helper.make_node("MatMulNBits", [node.input[0]] + [t.name for t in tensors],
                                      list(node.output), f"{node.name or names[0]}_Q4",
                                      domain=MS, **attrs))
    del graph.node[:]
    graph.node.extend(nodes)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--block-size", type=int, default=32, help="a power of 2, 16 or more")
    p.add_argument("--asymmetric", action="store_true")
    p.add_argument("--accuracy-level", type=int, choices=(0, 1, 2, 3, 4))
    a = p.parse_args(argv)
    if a.block_size < 16 or a.block_size & (a.block_size - 1):
        p.error("--block-size must be a power of 2, 16 or more")
    model = onnx.load(a.model)
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    counter = [0]
    quantize_graph(model.graph, model.graph, initializers, a, counter)
    # Float weights no node reads any more leave the file.
    drop_unread_initializers(model)
    if not any(o.domain == MS for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS, 1))
    onnx.save(model, a.out)
    print(f"wrote {a.out}: {counter[0]} MatMuls as MatMulNBits (4 bits, blocks of "
          f"{a.block_size}, {'asymmetric' if a.asymmetric else 'symmetric'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
