#!/usr/bin/python3
"""Rewrites a copy of an ONNX file with every float initializer moved by seeded noise, so that
weights a test export holds at trivial values (norm gains of 1, biases of 0, which hide where a
gain or a bias is applied) take distinct ones. The graph is unchanged.

    /usr/bin/python3 perturb_weights.py --model COPY.onnx [--seed 0] [--std 0.05]

Each float32 or float16 initializer becomes value + normal(0, std) in float32, rounded back to
its type (numpy PCG64 from --seed, drawn in the order the initializers appear, so the file is the
same on every run). Initializers stored as external data are refused: the files this is for
hold theirs inline.
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--std", type=float, default=0.05)
    a = p.parse_args()
    model = onnx.load(a.model)
    rng = np.random.default_rng(a.seed)
    moved = 0
    for i, t in enumerate(model.graph.initializer):
        if t.data_type not in (TensorProto.FLOAT, TensorProto.FLOAT16):
            continue
        if t.data_location == TensorProto.EXTERNAL:
            sys.exit(f"perturb_weights.py: initializer {t.name} is external data")
        values = numpy_helper.to_array(t)
        noise = rng.normal(0.0, a.std, values.shape).astype(np.float32)
        out = (values.astype(np.float32) + noise).astype(values.dtype)
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(out, t.name))
        moved += 1
    onnx.save(model, a.model)
    print(f"perturb_weights.py: moved {moved} initializers of {a.model}")


if __name__ == "__main__":
    main()
