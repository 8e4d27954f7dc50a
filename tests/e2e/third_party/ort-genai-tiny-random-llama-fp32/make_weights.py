#!/usr/bin/python3
"""Writes model.onnx.data for model.onnx in this folder: seeded random weights.

ONNX Runtime GenAI's test model test/test_models/hf-internal-testing/
tiny-random-LlamaForCausalLM-fp32 (commit f00eed5bb25257a04b7626ca737bf43b32dd3d96) refers to an
external data file, model.onnx.data, whose blob is absent from the stored snapshot of that
repository. This script writes a replacement with the exact layout model.onnx declares: every
external initializer at its recorded offset and length, with its name's shape and dtype.

Values (numpy PCG64 from --seed, so the file is the same on every run):
  *norm*.weight          ones (RMSNorm gains, as a freshly initialised Llama)
  cos_cache / sin_cache  cos/sin of position * inv_freq, inv_freq = theta^(-2i/rotary_dim),
                         theta 10000 (Llama's default, what the builder writes when the config
                         has no rope_theta), positions 0..rows-1, rotary_dim = 2 * columns
  everything else        normal(0, 0.02) (Hugging Face's initializer_range), drawn in the order
                         the initializers appear in model.onnx

Run with Debian's Python (numpy, onnx):  /usr/bin/python3 make_weights.py [--seed 0] [--check]
--check recomputes the weights and compares them with the existing file instead of writing it.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, mapping

ROPE_THETA = 10000.0
STD = 0.02


def values_for(name, shape, np_dtype, rng):
    if "norm" in name and name.endswith(".weight"):
        return np.ones(shape, dtype=np_dtype)
    if name in ("cos_cache", "sin_cache"):
        rows, half = shape
        inv_freq = 1.0 / (ROPE_THETA ** (np.arange(0, 2 * half, 2, dtype=np.float64) / (2 * half)))
        angles = np.outer(np.arange(rows, dtype=np.float64), inv_freq)
        return (np.cos(angles) if name == "cos_cache" else np.sin(angles)).astype(np_dtype)
    return (rng.standard_normal(shape) * STD).astype(np_dtype)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(here, "model.onnx"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="compare with the existing data file")
    a = ap.parse_args()

    model = onnx.load(a.model, load_external_data=False)
    rng = np.random.default_rng(a.seed)
    location = None
    pieces = []  # (offset, bytes)
    for t in model.graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        if location is None:
            location = info["location"]
        elif info["location"] != location:
            sys.exit(f"{t.name}: a second external file {info['location']} (only one is supported)")
        np_dtype = np.dtype(mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type])
        shape = tuple(t.dims)
        data = np.ascontiguousarray(values_for(t.name, shape, np_dtype, rng)).astype(
            np_dtype.newbyteorder("<"), copy=False).tobytes()
        offset = int(info.get("offset", 0))
        length = int(info.get("length", len(data)))
        if length != len(data):
            sys.exit(f"{t.name}: model.onnx records {length} bytes, {shape} {np_dtype} is {len(data)}")
        pieces.append((offset, data, t.name))
    if location is None:
        sys.exit(f"{a.model} has no external initializers")

    size = max(o + len(d) for o, d, _ in pieces)
    blob = bytearray(size)
    for offset, data, _ in sorted(pieces, key=lambda p: p[0]):
        blob[offset:offset + len(data)] = data
    path = os.path.join(os.path.dirname(os.path.abspath(a.model)), location)
    if a.check:
        with open(path, "rb") as f:
            old = f.read()
        if old != bytes(blob):
            sys.exit(f"{path} differs from what seed {a.seed} gives")
        print(f"{path}: matches seed {a.seed} ({len(pieces)} tensors, {size} bytes)")
        return
    with open(path, "wb") as f:
        f.write(blob)
    print(f"wrote {path}: {len(pieces)} tensors, {size} bytes, seed {a.seed}")


if __name__ == "__main__":
    main()
