#!/usr/bin/python3
"""Differential test of hetc's small-tensor ONNX interpreter against ONNX Runtime, op by op.

    /usr/bin/python3 tests/e2e/ort/check_interpreter.py [--seed 0] [--random 10] [--ops Add,Slice]
                                                        [--hetc-opt build/bin/hetc-opt]
                                                        [--keep DIR] [--verbose]

The interpreter (compiler/lib/import/OnnxInterpreter.cpp) evaluates ONNX nodes on small concrete
tensors: constant folding (hetc-opt --hetc-fold-constants) and probing attention-mask subgraphs.
For every op it evaluates, this script makes seeded random cases (random shapes, broadcasting,
negative axes, int64/int32/float32/bool where the op allows them) and hand-written edge cases
(a Slice past the end or with negative steps, negative Gather indices, Reshape with 0 and -1,
empty tensors, NaN and infinities, int64 values past 2**53, ...), and for each case

  1. builds a one-node ONNX model at opset 17 (onnx.helper) whose inputs are graph inputs, and
     runs it in ONNX Runtime (CPU, graph optimizations disabled) through run_op.mjs and
     onnxruntime-node (tests/e2e/ort/node_modules), one node process for all cases;
  2. writes the same node as MLIR, its inputs `hetc.constant`s (float elements as exact hex bit
     patterns; an absent optional input a `hetc.onnx.none`) and its result type unranked, and
     runs all cases through one `hetc-opt --hetc-fold-constants -split-input-file`;

then compares the folded `hetc.constant` with ONNX Runtime's output: element type and shape
exactly, integers and bools exactly, floats as follows.

  * Ops that are exact in float32 (Add Sub Mul Div Sqrt Reciprocal Neg Abs Floor Ceil Relu Max
    Min Mod, Cast, and every op that only moves or selects elements): equal values. hetc computes
    in double and rounds once to float32, which for + - * / sqrt is the float32 result; NaN
    matches NaN, -0 matches +0.
  * Transcendental ops (Cos Sin Exp Log Erf Tanh Sigmoid, float Pow): |hetc - ort| <= 4 ulp(ort)
    + 1e-6. hetc rounds a double result (about 0.5 ulp from the true value); ONNX Runtime's float32
    kernels (MLAS, Eigen) are allowed a few ulps more, and the absolute 1e-6 covers its Sigmoid,
    which is about 11 ulps off at moderate inputs and far more on results below 1e-6. Infinities
    and NaN must match. To say which side a difference comes from, the script also measures both
    against the op computed in float64 and prints the largest error of each, in ulps.
  * Sums (float MatMul, CumSum, Range): 4 ulp(ort) + 1e-6 + n * 2**-23 * S, n the number of terms
    and S the sum of their magnitudes (|A| @ |B|, cumsum |x|, |start| + k |delta|): hetc
    accumulates in double, ONNX Runtime in float32, in its own order.

Outcomes: "agree" (equal within the tolerance, or both reject an invalid node: ONNX Runtime fails
and hetc leaves the node unfolded); "not evaluated" (ONNX Runtime computes it, hetc declines to
fold: not a wrong answer, listed by op); "differ" (different type, shape or values, hetc folds a
node ONNX Runtime rejects, or hetc-opt fails on the case), printed with the inputs and both
outputs. A case ONNX Runtime has no kernel for is dropped and listed. The last line is
`N ops, M cases: P agree, Q not evaluated, R differ`; the exit status is 1 when R > 0.

hetc-opt runs with --mlir-print-elementsattrs-with-hex-if-larger=-1 so results print as literals
(the hex-string form is read too). Should the batch crash hetc-opt, each case runs alone, and a
case that crashes it is a "differ". A hetc-opt that cannot be executed (being relinked) is
retried every 30 s. With the defaults (seed 0, 10 random cases per op) it makes about 1,300 cases
and takes a few seconds; --keep DIR leaves cases.mlir and the ONNX Runtime requests and answers
there.
"""

import argparse
import base64
import collections
import concurrent.futures
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min

# numpy dtype -> (ONNX element type, MLIR element type, onnxruntime-node type name)
TYPES = {
    np.dtype(np.float32): (TensorProto.FLOAT, "f32", "float32"),
    np.dtype(np.float16): (TensorProto.FLOAT16, "f16", "float16"),
    np.dtype(np.float64): (TensorProto.DOUBLE, "f64", "float64"),
    np.dtype(np.int32): (TensorProto.INT32, "i32", "int32"),
    np.dtype(np.int64): (TensorProto.INT64, "i64", "int64"),
    np.dtype(np.bool_): (TensorProto.BOOL, "i1", "bool"),
}
MLIR_TO_NP = {v[1]: k for k, v in TYPES.items()}
ORT_TO_NP = {v[2]: k for k, v in TYPES.items()}
ONNX_TO_NP = {v[0]: k for k, v in TYPES.items()}
BITS = {np.dtype(np.float32): np.uint32, np.dtype(np.float16): np.uint16,
        np.dtype(np.float64): np.uint64}

EXACT, ULP, SUM = "exact", "ulp", "sum"


class Case:
    """One node on its inputs. `results` is the node's output count (element types `types`, default
    the compared one's), `result` the output compared; `opset` the default domain's, `domain`
    "com.microsoft" for ONNX Runtime's contrib operators; `mlir_attrs` attributes only hetc's side
    has (what the importer adds)."""

    def __init__(self, op, label, inputs, attrs=None, out=None, tol=EXACT, bound=None, results=1,
                 result=0, types=None, opset=17, domain="", mlir_attrs=None, nodes=None):
        self.op = op
        # A graph instead of one node (loops and sequences): its nodes read in0, in1, ... and
        # write "out"; hetc-opt folds it with hetc-fold-shapes, which unrolls them.
        self.nodes = nodes
        self.results, self.result, self.types = results, result, types
        self.opset, self.domain, self.mlir_attrs = opset, domain, mlir_attrs or {}
        self.label = label
        # numpy arrays (numpy scalars become 0-d arrays), None for an absent optional input
        self.inputs = [np.asarray(x) if isinstance(x, np.generic) else x for x in inputs]
        self.attrs = attrs or {}
        self.out = np.dtype(out) if out is not None else None  # result element type
        self.tol = tol
        self.bound = bound  # SUM: n * 2**-23 * S, broadcast to the output
        self.id = None
        for x in self.inputs:
            assert x is None or (isinstance(x, np.ndarray) and x.dtype in TYPES), (op, label, x)

    def out_dtype(self):
        if self.out is not None:
            return self.out
        first = next(x for x in self.inputs if x is not None)
        return first.dtype


# ----------------------------------------------------------------------------- random inputs


def shape(rng, rank, lo=1, hi=4):
    return tuple(int(d) for d in rng.integers(lo, hi + 1, size=rank))


def f32(rng, shp, scale=3.0):
    return np.asarray(rng.standard_normal(shp) * scale, np.float64).astype(np.float32)


def ints(rng, shp, lo=-20, hi=20, dtype=np.int64):
    return np.asarray(rng.integers(lo, hi + 1, size=shp)).astype(dtype)


def bools(rng, shp):
    return np.asarray(rng.integers(0, 2, size=shp)).astype(np.bool_)


def broadcast_pair(rng, max_rank=4):
    """Two shapes that broadcast: the second drops leading dimensions, both set some to 1."""
    out = shape(rng, int(rng.integers(0, max_rank + 1)))
    a, b = list(out), list(out)
    b = b[int(rng.integers(0, len(b) + 1)):]
    for s in (a, b):
        for d in range(len(s)):
            if rng.random() < 0.3:
                s[d] = 1
    if rng.random() < 0.5:
        a, b = b, a
    return tuple(a), tuple(b)


def random_values(rng, dtype, shp):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return bools(rng, shp)
    if dtype.kind == "i":
        return ints(rng, shp, dtype=dtype)
    return f32(rng, shp).astype(dtype)


# ----------------------------------------------------------------------------- cases per op

UNARY_FLOAT = ["Abs", "Ceil", "Cos", "Erf", "Exp", "Floor", "Log", "Neg", "Reciprocal", "Relu",
               "Sigmoid", "Sin", "Sqrt", "Tanh"]
TRANSCENDENTAL = {"Cos", "Sin", "Exp", "Log", "Erf", "Tanh", "Sigmoid", "Pow"}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.0e38, -3.0e38, 0.5, -0.5,
                    1.5, -2.5, 88.0, -88.0, 100.0, -100.0, 1e-8], dtype=np.float32)


def gen_unary(op, rng, n):
    cases = []
    tol = ULP if op in TRANSCENDENTAL else EXACT
    for k in range(n):
        shp = shape(rng, int(rng.integers(0, 4)))
        if op in ("Log", "Sqrt"):
            x = np.abs(f32(rng, shp, 10.0)) + np.float32(1e-3)
        elif op == "Exp":
            x = rng.uniform(-30, 30, size=shp).astype(np.float32)
        elif op in ("Sin", "Cos"):
            x = rng.uniform(-100, 100, size=shp).astype(np.float32)
        else:
            x = f32(rng, shp)
        cases.append(Case(op, f"random f32 {shp}", [x], tol=tol))
    cases.append(Case(op, "special values", [SPECIAL.copy()], tol=tol))
    if op in ("Sin", "Cos"):
        big = rng.uniform(-1e4, 1e4, size=8).astype(np.float32)
        cases.append(Case(op, "large arguments", [big], tol=tol))
    if op in ("Abs", "Neg"):
        for dt in (np.int64, np.int32):
            info = np.iinfo(dt)
            x = np.concatenate([ints(rng, 6, dtype=dt), np.array([0, info.max, info.min + 1], dt)])
            cases.append(Case(op, f"{np.dtype(dt).name}", [x]))
        cases.append(Case(op, "int64 min (wraps)", [np.array([I64_MIN, -1], np.int64)]))
    if op == "Relu":
        cases.append(Case(op, "int32", [ints(rng, (2, 3), dtype=np.int32)]))
    return cases


def gen_not(rng, n):
    cases = [Case("Not", f"random {s}", [bools(rng, s)])
             for s in (shape(rng, int(rng.integers(0, 4))) for _ in range(n))]
    cases.append(Case("Not", "empty", [np.zeros((2, 0), np.bool_)]))
    return cases


ARITH = ["Add", "Sub", "Mul", "Div"]


def gen_arith(op, rng, n):
    cases = []
    for k in range(n):
        sa, sb = broadcast_pair(rng)
        dt = [np.float32, np.int64, np.int32][k % 3]
        a, b = random_values(rng, dt, sa), random_values(rng, dt, sb)
        if op == "Div" and np.dtype(dt).kind == "i":
            b = np.where(b == 0, 7, b).astype(dt)
        cases.append(Case(op, f"random {np.dtype(dt).name} {sa} {sb}", [a, b]))
    x = SPECIAL.copy()
    cases.append(Case(op, "special values", [x, np.roll(x, 3)]))
    cases.append(Case(op, "with zeros", [np.array([1, -1, 0, -0.0, np.inf, 2.5], np.float32),
                                         np.array([0, 0, 0, 0, 0, -0.0], np.float32)]))
    if op == "Div":
        cases.append(Case(op, "int64 truncation", [np.array([7, -7, 7, -7, 1, -1], np.int64),
                                                   np.array([2, 2, -2, -2, 3, 3], np.int64)]))
    if op == "Mul":
        cases.append(Case(op, "by ones (a no-op)", [f32(rng, (2, 3)), np.ones((1, 1), np.float32)]))
    cases.append(Case(op, "empty broadcast", [np.zeros((0, 3), np.float32), f32(rng, (1, 3))]))
    big = np.array([2**53 + 1, 2**60 + 3, -(2**62) + 5], np.int64)
    cases.append(Case(op, "int64 past 2**53", [big, np.array([1, 2, 3], np.int64)]))
    if op in ("Add", "Sub", "Mul"):
        m = np.iinfo(np.int32)
        cases.append(Case(op, "int32 wrap-around", [np.array([m.max, m.min, 65536], np.int32),
                                                    np.array([2, -3, 65536], np.int32)]))
    return cases


def gen_pow(rng, n):
    cases = []
    for k in range(n):
        sa, sb = broadcast_pair(rng, 3)
        a = (np.abs(f32(rng, sa, 2.0)) + 0.1).astype(np.float32)
        b = f32(rng, sb, 2.0)
        cases.append(Case("Pow", f"random f32 {sa} {sb}", [a, b], tol=ULP))
    cases.append(Case("Pow", "negative base, integer exponents",
                      [f32(rng, (6,)), np.array([0, 1, 2, 3, -1, -2], np.float32)], tol=ULP))
    cases.append(Case("Pow", "special values",
                      [np.array([0, 0, -8, 1, np.inf, np.nan, 2, -0.0], np.float32),
                       np.array([0, -1, 1 / 3, np.nan, 0.5, 0, 130, -1], np.float32)], tol=ULP))
    cases.append(Case("Pow", "int64 ^ int64", [ints(rng, (2, 4), -5, 5),
                                               ints(rng, (4,), 0, 5)]))
    cases.append(Case("Pow", "int64 ^ negative int64", [np.array([2, -2, 1, -1, 3], np.int64),
                                                        np.array([-1, -1, -3, -3, -2], np.int64)]))
    cases.append(Case("Pow", "f32 ^ int64", [f32(rng, (3, 2)), ints(rng, (2,), 0, 4)], tol=ULP))
    cases.append(Case("Pow", "int64 ^ f32", [ints(rng, (4,), 1, 9),
                                             np.array([0.5, 1.5, 2.0, 0.25], np.float32)]))
    cases.append(Case("Pow", "int32 ^ int32", [ints(rng, (5,), -4, 4, np.int32),
                                               ints(rng, (5,), 0, 6, np.int32)]))
    cases.append(Case("Pow", "int64 large", [np.array([3, 2**31 + 1], np.int64),
                                             np.array([39, 2], np.int64)]))
    return cases


def gen_minmax(op, rng, n):
    cases = []
    for k in range(n):
        sa, sb = broadcast_pair(rng)
        dt = [np.float32, np.int64, np.int32][k % 3]
        cases.append(Case(op, f"random {np.dtype(dt).name} {sa} {sb}",
                          [random_values(rng, dt, sa), random_values(rng, dt, sb)]))
    cases.append(Case(op, "NaN in either operand",
                      [np.array([np.nan, 1, np.nan, -0.0, 0], np.float32),
                       np.array([1, np.nan, np.nan, 0, -0.0], np.float32)]))
    cases.append(Case(op, "three inputs", [f32(rng, (2, 3)), f32(rng, (3,)), f32(rng, (2, 1))]))
    cases.append(Case(op, "one input", [f32(rng, (2, 3))]))
    return cases


def gen_mod(rng, n):
    cases = []
    for k in range(n):
        sa, sb = broadcast_pair(rng, 3)
        a = ints(rng, sa, -30, 30)
        b = ints(rng, sb, -9, 9)
        b = np.where(b == 0, 5, b).astype(np.int64)
        cases.append(Case("Mod", f"random int64 fmod=0 {sa} {sb}", [a, b], {"fmod": 0}))
    signs = [np.array([7, -7, 7, -7, 6, -6], np.int64), np.array([3, 3, -3, -3, 3, -3], np.int64)]
    cases.append(Case("Mod", "int64 signs fmod=0", signs, {"fmod": 0}))
    cases.append(Case("Mod", "int64 signs fmod=1", signs, {"fmod": 1}))
    cases.append(Case("Mod", "int32 signs fmod=0", [s.astype(np.int32) for s in signs],
                      {"fmod": 0}))
    cases.append(Case("Mod", "float fmod=1",
                      [np.array([7.5, -7.5, 7.5, -7.5, 1e10, 3, np.inf, 1], np.float32),
                       np.array([2, 2, -2, -2, 3.3, np.inf, 2, 0], np.float32)], {"fmod": 1}))
    cases.append(Case("Mod", "random float fmod=1", [f32(rng, (3, 4), 10), f32(rng, (4,), 3)],
                      {"fmod": 1}))
    return cases


COMPARE = ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"]


def gen_compare(op, rng, n):
    cases = []
    for k in range(n):
        sa, sb = broadcast_pair(rng)
        dt = [np.float32, np.int64, np.int32][k % 3]
        if dt == np.float32:  # few distinct values, so that some are equal
            a = np.asarray(ints(rng, sa, -2, 2) / 2, np.float32)
            b = np.asarray(ints(rng, sb, -2, 2) / 2, np.float32)
        else:
            a, b = ints(rng, sa, -2, 2, dt), ints(rng, sb, -2, 2, dt)
        cases.append(Case(op, f"random {np.dtype(dt).name} {sa} {sb}", [a, b], out=np.bool_))
    cases.append(Case(op, "NaN, infinities, signed zeros",
                      [np.array([np.nan, np.nan, 1, np.inf, -0.0, -np.inf], np.float32),
                       np.array([np.nan, 1, np.nan, np.inf, 0.0, np.inf], np.float32)],
                      out=np.bool_))
    cases.append(Case(op, "int64 past 2**53", [np.array([2**53, 2**53 + 1, -(2**60)], np.int64),
                                                np.array([2**53 + 1, 2**53, -(2**60) - 1],
                                                         np.int64)], out=np.bool_))
    if op == "Equal":
        cases.append(Case(op, "bool", [bools(rng, (3, 4)), bools(rng, (4,))], out=np.bool_))
    return cases


def gen_logic(op, rng, n):
    cases = []
    for k in range(n):
        sa, sb = broadcast_pair(rng)
        cases.append(Case(op, f"random {sa} {sb}", [bools(rng, sa), bools(rng, sb)]))
    return cases


CAST = {"f32": (1, np.float32), "i32": (6, np.int32), "i64": (7, np.int64), "bool": (9, np.bool_),
        "f16": (10, np.float16), "f64": (11, np.float64)}


def gen_cast(rng, n):
    cases = []

    def cast(label, x, to):
        code, dt = CAST[to]
        cases.append(Case("Cast", label, [x], {"to": code}, out=dt))

    frac = np.array([0.0, 0.25, -0.25, 0.5, -0.75, 1.0, -1.5, 2.9, -2.9, 1e-30], np.float32)
    cast("f32 -> i64 (truncation)", frac, "i64")
    cast("f32 -> i32", frac, "i32")
    cast("f32 -> bool (fractions)", frac, "bool")
    cast("f32 -> bool (NaN, inf)", np.array([np.nan, np.inf, -np.inf, -0.0], np.float32), "bool")
    cast("f32 -> f16", np.concatenate([f32(rng, 6), np.array(
        [65504, 65520, 1e5, 6e-8, 1e-9, np.nan, -np.inf, 1 + 2**-11, 1 + 3 * 2**-11],
        np.float32)]), "f16")
    cast("f32 -> f64", np.concatenate([f32(rng, 4), SPECIAL]), "f64")
    cast("f32 -> f32 (a no-op)", f32(rng, (2, 2)), "f32")
    cast("f16 -> f32", f32(rng, 5).astype(np.float16), "f32")
    cast("f64 -> f32", np.array([0.1, 1 + 2.0**-24, 1 + 3 * 2.0**-25, 1e39, -1e-46, np.nan],
                                np.float64), "f32")
    cast("i64 -> f32", ints(rng, (2, 3), -1000, 1000), "f32")
    cast("i64 -> f32 (rounding past 2**24)",
         np.array([2**24 + 1, 2**24 + 3, 2**60 + 2**36 + 1, -(2**60) - 2**36 - 1,
                   2**53 + 1, 2**63 - 1, -(2**63)], np.int64), "f32")
    cast("i64 -> f64 (past 2**53)", np.array([2**53 + 1, 2**63 - 1, -(2**62) - 1], np.int64),
         "f64")
    cast("i64 -> i32 (wraps)", np.array([2**31, -(2**31) - 1, 2**40 + 5, -1, 7], np.int64), "i32")
    cast("i64 -> bool", np.array([0, 1, -1, 2**40, 2], np.int64), "bool")
    cast("i32 -> i64", ints(rng, (3,), -100, 100, np.int32), "i64")
    cast("bool -> f32", bools(rng, (2, 3)), "f32")
    cast("bool -> i64", bools(rng, (4,)), "i64")
    cast("i64 -> f16", np.array([1, 2049, 70000, -3], np.int64), "f16")
    for k in range(n):
        shp = shape(rng, int(rng.integers(0, 4)))
        src, to = [("f32", "i64"), ("i64", "f32"), ("i32", "f32"), ("f32", "i32")][k % 4]
        x = f32(rng, shp, 50) if src == "f32" else ints(rng, shp, -1000, 1000, CAST[src][1])
        cast(f"random {src} -> {to} {shp}", x, to)
    return cases


def gen_concat(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        base = shape(rng, rank)
        axis = int(rng.integers(-rank, rank))
        dt = [np.float32, np.int64][k % 2]
        xs = []
        for _ in range(int(rng.integers(2, 4))):
            s = list(base)
            s[axis] = int(rng.integers(1, 4))
            xs.append(random_values(rng, dt, tuple(s)))
        cases.append(Case("Concat", f"random {np.dtype(dt).name} axis={axis} "
                          f"{[x.shape for x in xs]}", xs, {"axis": axis}))
    cases.append(Case("Concat", "shape vectors", [np.array([1, 4], np.int64),
                                                  np.array([16], np.int64),
                                                  np.array([-1, 0], np.int64)], {"axis": 0}))
    cases.append(Case("Concat", "an empty operand", [f32(rng, (2, 3)), np.zeros((2, 0), np.float32),
                                                     f32(rng, (2, 1))], {"axis": -1}))
    cases.append(Case("Concat", "one operand (a no-op)", [f32(rng, (2, 3))], {"axis": 1}))
    cases.append(Case("Concat", "bool", [bools(rng, (2, 2)), bools(rng, (1, 2))], {"axis": 0}))
    cases.append(Case("Concat", "axis out of range (invalid)", [f32(rng, (2,)), f32(rng, (2,))],
                      {"axis": 1}))
    cases.append(Case("Concat", "rank mismatch (invalid)", [f32(rng, (2, 3)), f32(rng, (3,))],
                      {"axis": 0}))
    return cases


def gen_constant_of_shape(rng, n):
    cases = []

    def cos(label, shp, value=None):
        attrs = {} if value is None else {"value": value}
        out = np.float32 if value is None else value.dtype
        cases.append(Case("ConstantOfShape", label, [np.array(shp, np.int64)], attrs, out=out))

    for k in range(n):
        shp = list(shape(rng, int(rng.integers(1, 4))))
        kind = k % 4
        if kind == 0:
            cos(f"random {shp} default", shp)
        elif kind == 1:
            cos(f"random {shp} int64", shp, np.array([int(rng.integers(-9, 9))], np.int64))
        elif kind == 2:
            cos(f"random {shp} f32", shp, f32(rng, (1,)))
        else:
            cos(f"random {shp} bool", shp, np.array([True]))
    cos("scalar (empty shape)", np.zeros(0, np.int64), np.array([7], np.int64))
    cos("a zero dimension", [2, 0, 3], np.array([1.5], np.float32))
    cos("int32 value", [3], np.array([-4], np.int32))
    cos("NaN value", [2], np.array([np.nan], np.float32))
    cos("negative dimension (invalid)", [2, -1])
    return cases


def gen_cumsum(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 5)
        axis = int(rng.integers(-rank, rank))
        dt = [np.float32, np.int64, np.int32][k % 3]
        x = random_values(rng, dt, shp)
        attrs = {"exclusive": int(rng.integers(0, 2)), "reverse": int(rng.integers(0, 2))}
        adt = np.int64 if rng.random() < 0.7 else np.int32
        cases.append(cumsum_case(f"random {np.dtype(dt).name} {shp} axis={axis} {attrs} "
                                 f"axis as {np.dtype(adt).name}", x, np.array(axis, adt), attrs))
    cases.append(cumsum_case("int64 past 2**53", np.array([2**60, 3, 5, -(2**60), 1], np.int64),
                             np.array(0, np.int64), {}))
    cases.append(cumsum_case("float cancellation", np.array([1e8, 1, -1e8, 1], np.float32),
                             np.array(0, np.int64), {}))
    cases.append(cumsum_case("axis as a 1-element vector", ints(rng, (2, 3)),
                             np.array([1], np.int64), {}))
    cases.append(Case("CumSum", "axis out of range (invalid)", [f32(rng, (2, 3)),
                                                               np.array(2, np.int64)]))
    cases.append(cumsum_case("empty axis", np.zeros((2, 0), np.float32), np.array(1, np.int64), {}))
    return cases


def cumsum_case(label, x, axis, attrs):
    bound = None
    if x.dtype.kind == "f":
        a = int(axis.reshape(-1)[0])
        mag = np.abs(x.astype(np.float64))
        if attrs.get("reverse"):
            mag = np.flip(mag, a)
        s = np.cumsum(mag, axis=a)
        if attrs.get("reverse"):
            s = np.flip(s, a)
        bound = x.shape[a] * 2.0**-23 * s
    return Case("CumSum", label, [x, axis], attrs, tol=SUM if bound is not None else EXACT,
                bound=bound)


def gen_expand(rng, n):
    cases = []
    for k in range(n):
        sa, sb = broadcast_pair(rng, 4)
        dt = [np.float32, np.int64, np.bool_][k % 3]
        cases.append(Case("Expand", f"random {np.dtype(dt).name} {sa} to {sb}",
                          [random_values(rng, dt, sa), np.array(sb, np.int64)]))
    cases.append(Case("Expand", "to a smaller rank, with ones", [f32(rng, (2, 3)),
                                                                 np.array([1, 1], np.int64)]))
    cases.append(Case("Expand", "a zero dimension", [f32(rng, (3, 1)), np.array([3, 0], np.int64)]))
    cases.append(Case("Expand", "scalar", [np.array(5, np.int64), np.array([2, 2], np.int64)]))
    cases.append(Case("Expand", "incompatible (invalid)", [f32(rng, (3,)),
                                                           np.array([2, 4], np.int64)]))
    return cases


def gen_gather(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 5)
        axis = int(rng.integers(-rank, rank))
        dim = shp[axis]
        ishape = shape(rng, int(rng.integers(0, 3)), 1, 3)
        idt = [np.int64, np.int32][k % 2]
        idx = rng.integers(-dim, dim, size=ishape).astype(idt)
        dt = [np.float32, np.int64, np.float32, np.bool_][k % 4]
        cases.append(Case("Gather", f"random {np.dtype(dt).name} {shp} axis={axis} "
                          f"indices {np.dtype(idt).name} {ishape}",
                          [random_values(rng, dt, shp), idx], {"axis": axis}))
    cases.append(Case("Gather", "negative scalar index", [ints(rng, (4,)), np.array(-1, np.int64)],
                      {"axis": 0}))
    cases.append(Case("Gather", "no axis attribute", [f32(rng, (3, 2)),
                                                      np.array([[2, -3]], np.int64)]))
    cases.append(Case("Gather", "empty indices", [f32(rng, (3, 2)), np.zeros((0,), np.int64)],
                      {"axis": 1}))
    cases.append(Case("Gather", "axis out of range (invalid)", [f32(rng, (3, 2)),
                                                                np.array([0], np.int64)],
                      {"axis": 2}))
    cases.append(Case("Gather", "index out of range (invalid)", [f32(rng, (3,)),
                                                                 np.array([3], np.int64)]))
    cases.append(Case("Gather", "index below -n (invalid)", [f32(rng, (3,)),
                                                             np.array([-4], np.int64)]))
    return cases


def gen_identity(rng, n):
    return [Case("Identity", f"random {np.dtype(dt).name}", [random_values(rng, dt, (2, 3))])
            for dt in (np.float32, np.int64, np.bool_)]


def matmul_case(label, a, b):
    if a.dtype.kind != "f":
        return Case("MatMul", label, [a, b])
    k = a.shape[-1]
    try:
        s = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    except ValueError:
        return Case("MatMul", label, [a, b])
    return Case("MatMul", label, [a, b], tol=SUM, bound=max(k, 1) * 2.0**-23 * s)


def gen_matmul(rng, n):
    cases = []
    for j in range(n):
        m, k, nn = shape(rng, 3, 1, 5)
        batch_a, batch_b = broadcast_pair(rng, 2)
        dt = [np.float32, np.float32, np.int64, np.int32][j % 4]
        a = random_values(rng, dt, batch_a + (m, k))
        b = random_values(rng, dt, batch_b + (k, nn))
        cases.append(matmul_case(f"random {np.dtype(dt).name} {a.shape} @ {b.shape}", a, b))
    cases.append(matmul_case("1-D @ 2-D", f32(rng, (3,)), f32(rng, (3, 2))))
    cases.append(matmul_case("2-D @ 1-D", f32(rng, (2, 3)), f32(rng, (3,))))
    cases.append(matmul_case("1-D @ 1-D", f32(rng, (4,)), f32(rng, (4,))))
    cases.append(matmul_case("1-D @ 3-D", f32(rng, (3,)), f32(rng, (2, 3, 2))))
    cases.append(matmul_case("3-D @ 1-D", f32(rng, (2, 2, 3)), f32(rng, (3,))))
    cases.append(matmul_case("k = 0", np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)))
    cases.append(matmul_case("m = 0", np.zeros((0, 2), np.float32), f32(rng, (2, 3))))
    cases.append(matmul_case("int64 past 2**53", np.array([[2**60, 1]], np.int64),
                             np.array([[1], [1]], np.int64)))
    cases.append(matmul_case("inner mismatch (invalid)", f32(rng, (2, 3)), f32(rng, (2, 3))))
    return cases


def range_case(label, start, limit, delta):
    dt = np.dtype(type(start)) if not isinstance(start, np.ndarray) else start.dtype
    s, l, d = (np.array(v, dt) for v in (start, limit, delta))
    bound = None
    if dt.kind == "f" and d != 0:
        count = max(int(math.ceil((float(l) - float(s)) / float(d))), 0)
        k = np.arange(count, dtype=np.float64)
        bound = k * 2.0**-23 * (abs(float(s)) + k * abs(float(d)))
    return Case("Range", label, [s, l, d], tol=SUM if bound is not None else EXACT, bound=bound)


def gen_range(rng, n):
    cases = []
    for k in range(n):
        kind = k % 3
        if kind == 0:
            s, l = (int(v) for v in rng.integers(-20, 20, size=2))
            d = int(rng.choice([-3, -2, -1, 1, 2, 3]))
            cases.append(range_case(f"random int64 {s} {l} {d}", np.int64(s), np.int64(l),
                                    np.int64(d)))
        elif kind == 1:
            s, l = (int(v) for v in rng.integers(-20, 20, size=2))
            d = int(rng.choice([-4, -1, 1, 5]))
            cases.append(range_case(f"random int32 {s} {l} {d}", np.int32(s), np.int32(l),
                                    np.int32(d)))
        else:
            s, l = (np.float32(v) for v in rng.uniform(-10, 10, size=2))
            d = np.float32(rng.uniform(0.1, 2.0) * (1 if l >= s else -1))
            cases.append(range_case(f"random f32 {s} {l} {d}", s, l, d))
    cases.append(range_case("empty (limit below start)", np.int64(5), np.int64(2), np.int64(1)))
    cases.append(range_case("f32 0.1 steps", np.float32(0), np.float32(1), np.float32(0.1)))
    cases.append(range_case("f32 count: limit - start rounds in float32", np.float32(-1e-8),
                            np.float32(1), np.float32(0.25)))
    cases.append(range_case("int64 past 2**53", np.int64(2**60 + 1), np.int64(2**60 + 1025),
                            np.int64(256)))
    cases.append(Case("Range", "1-element vectors", [np.array([0], np.int64),
                                                     np.array([3], np.int64),
                                                     np.array([1], np.int64)]))
    cases.append(range_case("delta 0 (invalid)", np.int64(0), np.int64(3), np.int64(0)))
    return cases


def gen_reshape(rng, n):
    cases = []
    for k in range(n):
        shp = shape(rng, int(rng.integers(1, 4)))
        total = int(np.prod(shp))
        # a random factorization of total, then a -1 or a 0 (copy) somewhere
        dims, rest = [], total
        for p in (2, 3, 2, 5):
            if rest % p == 0 and rng.random() < 0.5:
                dims.append(p)
                rest //= p
        dims.append(rest)
        rng.shuffle(dims)
        if rng.random() < 0.5:
            dims[int(rng.integers(0, len(dims)))] = -1
        target = list(dims)
        if rng.random() < 0.4 and len(shp) <= len(target) and target[0] != -1:
            target = list(shp[:1]) + [-1]
            target[0] = 0
        dt = [np.float32, np.int64][k % 2]
        cases.append(Case("Reshape", f"random {np.dtype(dt).name} {shp} -> {target}",
                          [random_values(rng, dt, shp), np.array(target, np.int64)]))
    cases.append(Case("Reshape", "0 copies, -1 infers", [f32(rng, (2, 3, 4)),
                                                         np.array([0, -1, 2], np.int64)]))
    cases.append(Case("Reshape", "to a scalar", [np.array([7], np.int64), np.zeros(0, np.int64)]))
    cases.append(Case("Reshape", "allowzero=1 with a zero", [np.zeros((2, 0), np.float32),
                                                             np.array([0, 5], np.int64)],
                      {"allowzero": 1}))
    cases.append(Case("Reshape", "empty tensor, -1", [np.zeros((2, 0, 3), np.float32),
                                                      np.array([3, -1], np.int64)]))
    cases.append(Case("Reshape", "0 past the input's rank (invalid)",
                      [f32(rng, (6,)), np.array([2, 0], np.int64)]))
    cases.append(Case("Reshape", "size mismatch (invalid)", [f32(rng, (2, 3)),
                                                             np.array([4, 2], np.int64)]))
    cases.append(Case("Reshape", "a dimension below -1 (invalid)",
                      [f32(rng, (2, 3)), np.array([-2, -1], np.int64)]))
    cases.append(Case("Reshape", "two -1 (invalid)", [f32(rng, (2, 3)),
                                                      np.array([-1, -1], np.int64)]))
    return cases


def gen_scatter_nd(rng, n):
    cases = []
    for j in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 2, 4)
        k = int(rng.integers(1, rank + 1))
        batch = shape(rng, int(rng.integers(1, 3)), 1, 2)
        count = int(np.prod(batch))
        # distinct index tuples, some of them written negative
        flat = rng.choice(int(np.prod(shp[:k])), size=min(count, int(np.prod(shp[:k]))),
                          replace=False)
        if len(flat) < count:
            batch, count = (len(flat),), len(flat)
        idx = np.stack(np.unravel_index(flat, shp[:k]), axis=-1).reshape(batch + (k,))
        neg = rng.random(idx.shape) < 0.3
        idx = np.where(neg, idx - np.array(shp[:k]), idx).astype(np.int64)
        dt = [np.float32, np.int64][j % 2]
        data = random_values(rng, dt, shp)
        upd = random_values(rng, dt, batch + shp[k:])
        cases.append(Case("ScatterND", f"random {np.dtype(dt).name} data {shp} indices "
                          f"{idx.shape}", [data, idx, upd]))
    cases.append(Case("ScatterND", "rows of a mask", [np.zeros((3, 4), np.float32),
                                                      np.array([[2], [0]], np.int64),
                                                      np.full((2, 4), -np.inf, np.float32)]))
    cases.append(Case("ScatterND", "reduction add", [f32(rng, (4,)), np.array([[1], [3]], np.int64),
                                                     f32(rng, (2,))], {"reduction": "add"}))
    cases.append(Case("ScatterND", "reduction mul, int64 rows",
                      [ints(rng, (3, 2), -9, 9), np.array([[2], [0]], np.int64),
                       ints(rng, (2, 2), -9, 9)], {"reduction": "mul"}))
    cases.append(Case("ScatterND", "index out of range (invalid)",
                      [f32(rng, (3,)), np.array([[3]], np.int64), f32(rng, (1,))]))
    nan_data = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    nan_updates = np.array([np.nan, 5.0, 1.0, np.nan], np.float32)
    for r in ("max", "min"):
        cases.append(Case("ScatterND", f"reduction {r} with NaN in the data and the updates",
                          [nan_data, np.array([[0], [1], [2], [3]], np.int64), nan_updates],
                          {"reduction": r}, opset=18))
    return cases


def gen_shape(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(0, 5))
        shp = shape(rng, rank)
        attrs = {}
        if k % 2:
            attrs["start"] = int(rng.integers(-rank - 2, rank + 2))
            if rng.random() < 0.6:
                attrs["end"] = int(rng.integers(-rank - 2, rank + 2))
        cases.append(Case("Shape", f"random {shp} {attrs}", [f32(rng, shp)], attrs,
                          out=np.int64))
    cases.append(Case("Shape", "a zero dimension", [np.zeros((2, 0, 3), np.int64)], out=np.int64))
    cases.append(Case("Shape", "scalar", [np.array(1.0, np.float32)], out=np.int64))
    return cases


def gen_size(rng, n):
    cases = [Case("Size", f"random {s}", [f32(rng, s)], out=np.int64)
             for s in (shape(rng, int(rng.integers(0, 4))) for _ in range(n))]
    cases.append(Case("Size", "empty", [np.zeros((3, 0), np.bool_)], out=np.int64))
    cases.append(Case("Size", "scalar", [np.array(3, np.int64)], out=np.int64))
    return cases


def slice_case(label, x, starts, ends, axes=None, steps=None, idt=np.int64):
    inputs = [x, np.array(starts, idt), np.array(ends, idt),
              None if axes is None else np.array(axes, idt),
              None if steps is None else np.array(steps, idt)]
    while inputs[-1] is None:
        inputs.pop()
    return Case("Slice", label, inputs)


def gen_slice(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 6)
        naxes = int(rng.integers(1, rank + 1))
        axes = [int(a) for a in rng.permutation(rank)[:naxes]]
        axes = [a - rank if rng.random() < 0.4 else a for a in axes]
        starts, ends, steps = [], [], []
        for a in axes:
            dim = shp[a]
            step = int(rng.choice([1, 1, 2, 3, -1, -2]))
            s = int(rng.integers(-dim - 2, dim + 3))
            e = int(rng.integers(-dim - 2, dim + 3))
            if rng.random() < 0.2:
                e = I64_MAX if step > 0 else I64_MIN
            starts.append(s)
            ends.append(e)
            steps.append(step)
        dt = [np.float32, np.int64, np.bool_][k % 3]
        x = random_values(rng, dt, shp)
        mode = k % 4
        if mode == 0 and axes == list(range(naxes)) and all(s == 1 for s in steps):
            cases.append(slice_case(f"random {shp} starts={starts} ends={ends}", x, starts, ends))
        elif mode == 1 and all(s == 1 for s in steps):
            cases.append(slice_case(f"random {shp} starts={starts} ends={ends} axes={axes}", x,
                                    starts, ends, axes))
        else:
            idt = np.int32 if mode == 3 and all(abs(v) < 2**31 for v in starts + ends) \
                else np.int64
            cases.append(slice_case(f"random {shp} starts={starts} ends={ends} axes={axes} "
                                    f"steps={steps} {np.dtype(idt).name}", x, starts, ends, axes,
                                    steps, idt))
    v = np.arange(10, dtype=np.int64)
    cases.append(slice_case("past the end", v, [3], [100]))
    cases.append(slice_case("start past the end (empty)", v, [12], [20]))
    cases.append(slice_case("to INT64_MAX", v, [-3], [I64_MAX]))
    cases.append(slice_case("reverse all", v, [-1], [I64_MIN], [0], [-1]))
    cases.append(slice_case("reverse by 3 from past the end", v, [100], [-100], [0], [-3]))
    cases.append(slice_case("negative step, start below -n (empty)", v, [-20], [0], [0], [-1]))
    cases.append(slice_case("negative step, end -1 + n", v, [8], [-1], [0], [-2]))
    cases.append(slice_case("steps without axes", f32(rng, (3, 4)), [0, 3], [3, 0],
                            None, [2, -1]))
    cases.append(slice_case("negative axes", f32(rng, (2, 3, 4)), [1, -2], [3, I64_MAX], [-1, -2]))
    cases.append(slice_case("a zero dimension, step 1", np.zeros((3, 0), np.float32), [0], [5],
                            [1]))
    cases.append(slice_case("a zero dimension, negative step", np.zeros((3, 0), np.float32), [0],
                            [-5], [1], [-1]))
    cases.append(slice_case("a zero dimension, negative step from -1", np.zeros((3, 0), np.float32),
                            [-1], [I64_MIN], [1], [-1]))
    cases.append(slice_case("INT64_MIN start, negative step", v, [I64_MIN], [I64_MIN], [0], [-1]))
    cases.append(slice_case("step 0 (invalid)", v, [0], [5], [0], [0]))
    cases.append(slice_case("axis out of range (invalid)", f32(rng, (2, 3)), [0], [1], [5]))
    cases.append(slice_case("repeated axis (invalid)", f32(rng, (4, 4)), [0, 1], [2, 3], [0, 0]))
    return cases


def gen_squeeze(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 5))
        shp = [int(d) if rng.random() < 0.5 else 1 for d in shape(rng, rank, 2, 3)]
        ones = [d for d in range(rank) if shp[d] == 1]
        dt = [np.float32, np.int64][k % 2]
        x = random_values(rng, dt, tuple(shp))
        if k % 3 == 0 or not ones:
            cases.append(Case("Squeeze", f"random {shp} no axes", [x]))
        else:
            axes = [d - rank if rng.random() < 0.5 else d
                    for d in rng.permutation(ones)[:int(rng.integers(1, len(ones) + 1))]]
            cases.append(Case("Squeeze", f"random {shp} axes={axes}",
                              [x, np.array(axes, np.int64)]))
    cases.append(Case("Squeeze", "empty axes tensor", [f32(rng, (1, 3, 1)),
                                                       np.zeros((0,), np.int64)]))
    cases.append(Case("Squeeze", "to a scalar", [f32(rng, (1, 1)), np.array([0, -1], np.int64)]))
    cases.append(Case("Squeeze", "a dimension that is not 1 (invalid)",
                      [f32(rng, (1, 3)), np.array([1], np.int64)]))
    return cases


def gen_tile(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 3)
        reps = [int(r) for r in rng.integers(0 if k % 4 == 3 else 1, 4, size=rank)]
        dt = [np.float32, np.int64, np.bool_][k % 3]
        cases.append(Case("Tile", f"random {np.dtype(dt).name} {shp} x {reps}",
                          [random_values(rng, dt, shp), np.array(reps, np.int64)]))
    cases.append(Case("Tile", "zero repeats", [f32(rng, (2, 2)), np.array([0, 3], np.int64)]))
    cases.append(Case("Tile", "an empty input", [np.zeros((0, 2), np.int64),
                                                 np.array([2, 2], np.int64)]))
    cases.append(Case("Tile", "wrong number of repeats (invalid)",
                      [f32(rng, (2, 2)), np.array([2], np.int64)]))
    return cases


def gen_pad(rng, n):
    """Pad in each mode: constant (a value or 0, negative pads cropping), edge, reflect (at most
    n - 1 beyond each border), wrap (opset 19; at most n), over every axis or over an axes input
    (opset 18)."""
    cases = []
    modes = ["constant", "edge", "reflect", "wrap"]
    for k in range(n):
        mode = modes[k % 4]
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 2 if mode == "reflect" else 1, 4)
        dt = [np.float32, np.int64][k % 2]
        x = random_values(rng, dt, shp)
        with_axes = mode == "wrap" or k % 3 == 0
        axes = sorted(int(a) for a in rng.choice(rank, size=int(rng.integers(1, rank + 1)),
                                                 replace=False)) if with_axes else list(range(rank))
        pads = []
        for _side in range(2):
            for a in axes:
                # ONNX Runtime's wrap reads past its buffer beyond one wrap of the axis.
                hi = shp[a] - 1 if mode == "reflect" else shp[a] if mode == "wrap" else 3
                lo = -(shp[a] - 1) if mode == "constant" and k % 5 == 0 else 0
                pads.append(int(rng.integers(lo, hi + 1)))
        if with_axes and k % 2 == 0:  # negative axes
            axes = [a - rank for a in axes]
        inputs = [x, np.array(pads, np.int64)]
        value = None
        if mode == "constant" and k % 8 != 0:
            value = random_values(rng, dt, ())
        inputs.append(value)
        if with_axes:
            inputs.append(np.array(axes, np.int64))
        while inputs[-1] is None:
            inputs.pop()
        opset = 19 if mode == "wrap" else 18 if with_axes else [11, 13, 17][k % 3]
        cases.append(Case("Pad", f"{mode} {np.dtype(dt).name} {shp} pads={pads}"
                          + (f" axes={axes}" if with_axes else "")
                          + (" value" if value is not None else ""),
                          inputs, {"mode": mode}, opset=opset))
    # F.pad of an attention mask by zeros on the right, as a static cache's mask code writes it.
    cases.append(Case("Pad", "a mask padded on the right", [np.ones((2, 5), np.int64),
                                                            np.array([0, 0, 0, 3], np.int64)]))
    cases.append(Case("Pad", "pads of the wrong length (invalid)",
                      [f32(rng, (2, 3)), np.array([1, 1], np.int64)]))
    return cases


def gen_transpose(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 5))
        shp = shape(rng, rank)
        dt = [np.float32, np.int64, np.bool_][k % 3]
        x = random_values(rng, dt, shp)
        if k % 4 == 0:
            cases.append(Case("Transpose", f"random {np.dtype(dt).name} {shp} default perm", [x]))
        else:
            perm = [int(p) for p in rng.permutation(rank)]
            cases.append(Case("Transpose", f"random {np.dtype(dt).name} {shp} perm={perm}", [x],
                              {"perm": perm}))
    cases.append(Case("Transpose", "scalar", [np.array(2.5, np.float32)]))
    cases.append(Case("Transpose", "a zero dimension", [np.zeros((2, 0, 3), np.float32)],
                      {"perm": [2, 0, 1]}))
    return cases


def gen_trilu(rng, n):
    cases = []
    for j in range(n):
        rank = int(rng.integers(2, 5))
        shp = shape(rng, rank, 1, 5)
        dt = [np.float32, np.int64][j % 2]
        x = random_values(rng, dt, shp)
        upper = int(rng.integers(0, 2))
        if j % 3 == 0:
            cases.append(Case("Trilu", f"random {np.dtype(dt).name} {shp} upper={upper} no k",
                              [x], {"upper": upper}))
        else:
            k = int(rng.integers(-6, 7))
            cases.append(Case("Trilu", f"random {np.dtype(dt).name} {shp} upper={upper} k={k}",
                              [x, np.array(k, np.int64)], {"upper": upper}))
    mask = np.full((4, 4), np.finfo(np.float32).min, np.float32)
    cases.append(Case("Trilu", "causal mask (triu from 1)", [mask, np.array(1, np.int64)]))
    cases.append(Case("Trilu", "k far past the matrix", [f32(rng, (3, 4)),
                                                         np.array(I64_MAX, np.int64)],
                      {"upper": 0}))
    cases.append(Case("Trilu", "k far below the matrix", [f32(rng, (3, 4)),
                                                          np.array(I64_MIN + 1, np.int64)]))
    cases.append(Case("Trilu", "a zero dimension", [np.zeros((2, 0, 3), np.float32)]))
    cases.append(Case("Trilu", "bool", [bools(rng, (3, 3)), np.array(-1, np.int64)], {"upper": 0}))
    cases.append(Case("Trilu", "NaN and inf outside the triangle",
                      [np.array([[np.nan, np.inf], [np.nan, -np.inf]], np.float32)],
                      {"upper": 1}))
    return cases


def gen_unsqueeze(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(0, 4))
        shp = shape(rng, rank)
        nax = int(rng.integers(1, 3))
        out_rank = rank + nax
        axes = [int(a) for a in rng.permutation(out_rank)[:nax]]
        axes = [a - out_rank if rng.random() < 0.5 else a for a in axes]
        dt = [np.float32, np.int64][k % 2]
        cases.append(Case("Unsqueeze", f"random {shp} axes={axes}",
                          [random_values(rng, dt, shp), np.array(axes, np.int64)]))
    cases.append(Case("Unsqueeze", "scalar to [1]", [np.array(4, np.int64),
                                                     np.array([0], np.int64)]))
    cases.append(Case("Unsqueeze", "repeated axis (invalid)", [f32(rng, (3,)),
                                                               np.array([0, 0], np.int64)]))
    cases.append(Case("Unsqueeze", "axis out of range (invalid)", [f32(rng, (3,)),
                                                                   np.array([3], np.int64)]))
    return cases


def gen_where(rng, n):
    cases = []
    for k in range(n):
        sc, sa = broadcast_pair(rng, 3)
        sb = sa[int(rng.integers(0, len(sa) + 1)):] if sa else sa
        dt = [np.float32, np.int64, np.int32][k % 3]
        cases.append(Case("Where", f"random {np.dtype(dt).name} {sc} {sa} {sb}",
                          [bools(rng, sc), random_values(rng, dt, sa),
                           random_values(rng, dt, sb)], out=dt))
    cases.append(Case("Where", "mask fill", [bools(rng, (2, 1, 4)), np.array(0.0, np.float32),
                                             np.array(-np.inf, np.float32)], out=np.float32))
    cases.append(Case("Where", "mixed types (invalid)", [bools(rng, (3,)), f32(rng, (3,)),
                                                         ints(rng, (3,))], out=np.float32))
    return cases


# ----------------------------------------------------------------------------- reductions, norms,
# activations, selections and ONNX Runtime's contrib ops (compiler/lib/import/OnnxInterpreterNn.cpp)

EPS32 = 2.0 ** -23
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
          "ReduceL1", "ReduceL2"]


def reduce_bound(op, x, axes, keepdims):
    """float32's accumulation error of the reduction: n * 2**-23 * (the sum of the magnitudes)."""
    a = np.abs(x.astype(np.float64))
    ax = tuple(range(x.ndim)) if axes is None else tuple(int(d) % x.ndim for d in axes)
    n = max(int(np.prod([x.shape[d] for d in ax])), 1)
    if op in ("ReduceMax", "ReduceMin"):
        return None
    if op == "ReduceProd":
        mag = np.prod(a, axis=ax, keepdims=bool(keepdims))
    elif op in ("ReduceSumSquare", "ReduceL2"):
        mag = np.sum(a * a, axis=ax, keepdims=bool(keepdims))
        if op == "ReduceL2":
            mag = np.sqrt(mag)
    else:
        mag = np.sum(a, axis=ax, keepdims=bool(keepdims))
        if op == "ReduceMean":
            mag = mag / n
    return (n + 2) * EPS32 * mag


def reduce_case(op, label, x, axes, keepdims, opset, noop=None, invalid=False):
    attrs, inputs = {}, [x]
    if keepdims is not None:
        attrs["keepdims"] = keepdims
    # Axes are an input from opset 13 (ReduceSum) or 18 (the others), an attribute before.
    as_input = opset >= (13 if op == "ReduceSum" else 18)
    if axes is not None:
        if as_input:
            inputs.append(np.array(axes, np.int64))
        else:
            attrs["axes"] = list(axes)
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    keep = 1 if keepdims is None else keepdims
    floating = x.dtype.kind == "f"
    bound = reduce_bound(op, x, axes if axes else None, keep) if floating and not invalid and \
        not noop else None
    return Case(op, label, inputs, attrs, tol=SUM if bound is not None else EXACT, bound=bound,
                opset=opset)


def gen_reduce(op, rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 5))
        shp = shape(rng, rank)
        count = int(rng.integers(1, rank + 1))
        axes = [int(a) - (rank if rng.random() < 0.3 else 0)
                for a in rng.choice(rank, size=count, replace=False)]
        opset = [13, 18][k % 2]
        x = f32(rng, shp, 1.5) if op != "ReduceProd" else rng.uniform(0.5, 1.5, shp).astype(
            np.float32)
        keep = [None, 0, 1][k % 3]
        cases.append(reduce_case(op, f"random f32 {shp} axes={axes} keepdims={keep} opset {opset}",
                                 x, axes, keep, opset))
    cases.append(reduce_case(op, "every axis (none given)", f32(rng, (2, 3, 4)), None, 1, 17))
    cases.append(reduce_case(op, "every axis, keepdims 0", f32(rng, (3, 4)), None, 0, 18))
    cases.append(reduce_case(op, "empty axes with noop_with_empty_axes", f32(rng, (2, 3)), [], 1,
                             18, noop=1))
    if op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
        x = ints(rng, (3, 4), -9, 9)
        cases.append(reduce_case(op, "int64", x, [1], 1, 18))
        cases.append(reduce_case(op, "int32", x.astype(np.int32), [0], 0, 18))
    if op == "ReduceSum":
        cases.append(reduce_case(op, "empty", np.zeros((2, 0), np.float32), [1], 1, 18))
    cases.append(reduce_case(op, "an axis named twice (reduced once)", f32(rng, (2, 3)), [1],
                             1, 18))
    cases[-1].inputs[1] = np.array([1, -1], np.int64)
    cases.append(reduce_case(op, "axis out of range (invalid)", f32(rng, (2, 3)), [2], 1, 18,
                             invalid=True))
    return cases


def softmax_ref(x, axis, flatten):
    x = x.astype(np.float64)
    if flatten:
        shp = x.shape
        x = x.reshape(int(np.prod(shp[:axis])), -1)
        axis = 1
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    n = x.shape[axis]
    return e / s, (x - m) - np.log(s), n


def gen_softmax(op, rng, n):
    log = op == "LogSoftmax"
    cases = []

    def case(label, x, axis, opset=17):
        flatten = opset < 13
        attrs = {} if axis is None else {"axis": axis}
        default = 1 if flatten else -1
        y, ly, count = softmax_ref(x, (default if axis is None else axis) % x.ndim, flatten)
        bound = (count + 8) * EPS32 * (np.abs(ly) + np.abs(x.astype(np.float64).reshape(ly.shape))
                                       if log else y)
        if flatten:
            bound = bound.reshape(x.shape)
        return Case(op, label, [x], attrs, tol=SUM, bound=bound, opset=opset,
                    mlir_attrs={"hetc.flattens_before_13": opset} if flatten else None)
    for k in range(n):
        rank = int(rng.integers(1, 5))
        shp = shape(rng, rank, 1, 6)
        axis = int(rng.integers(-rank, rank)) if k % 2 else None
        cases.append(case(f"random f32 {shp} axis={axis}", f32(rng, shp, 4.0), axis))
    cases.append(case("large logits (shifted by the max)", np.array([[1000, 999, -1000, 0]],
                                                                    np.float32), -1))
    cases.append(case("with -inf (a masked score)", np.array([[1.0, -np.inf, 2.0, 0.5]],
                                                             np.float32), -1))
    cases.append(case("opset 11, flattened from axis 1", f32(rng, (2, 3, 4)), None, opset=11))
    cases.append(case("opset 11, axis 2 (the last)", f32(rng, (2, 3, 4)), 2, opset=11))
    cases.append(case("opset 12, axis -2 (flattens two)", f32(rng, (2, 3, 4)), -2, opset=12))
    return cases


def layer_norm_ref(x, gamma, beta, axis, eps, rms):
    x = x.astype(np.float64)
    ax = tuple(range(axis % x.ndim, x.ndim))
    mean = np.zeros(x.shape[:axis % x.ndim] + (1,) * len(ax)) if rms else np.mean(x, ax,
                                                                                     keepdims=True)
    var = np.mean((x - mean) ** 2, ax, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * inv
    y = xhat * gamma.astype(np.float64)
    if beta is not None:
        y = y + beta.astype(np.float64)
    # ONNX Runtime's variance is E[x^2] - E[x]^2 in float32, which loses what the mean hides.
    n = int(np.prod([x.shape[d] for d in ax]))
    ms = np.mean(x * x, ax, keepdims=True)
    rel = (n + 8) * EPS32 * (1 + ms / np.maximum(var, 1e-30))
    bound = rel * np.abs(xhat * gamma) + 4 * EPS32 * (np.abs(beta) if beta is not None else 0)
    return y, mean, inv, bound + 1e-6, rel


def gen_layer_norm(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(2, 4))
        shp = shape(rng, rank, 1, 5) + (int(rng.integers(2, 12)),)
        axis = -1 if k % 3 else -2
        normalized = shp[axis % len(shp):]
        x = f32(rng, shp, 2.0) + np.float32(rng.uniform(-1, 1))
        gamma = f32(rng, normalized, 1.0)
        beta = f32(rng, normalized, 1.0) if k % 2 else None
        eps = float(rng.choice([1e-5, 1e-6, 0.1]))
        y, mean, inv, bound, rel = layer_norm_ref(x, gamma, beta, axis, eps, False)
        inputs = [x, gamma] + ([beta] if beta is not None else [])
        attrs = {"axis": axis, "epsilon": eps}
        types = [np.float32] * 3
        for r, b in ((0, bound), (1, 4 * EPS32 * np.abs(mean) + 1e-6), (2, rel * np.abs(inv))):
            cases.append(Case("LayerNormalization", f"random {shp} axis={axis} eps={eps} "
                              f"{'bias' if beta is not None else 'no bias'} output {r}",
                              inputs, attrs, tol=SUM, bound=b, results=3, result=r, types=types))
    x = f32(rng, (2, 4))
    cases.append(Case("LayerNormalization", "gamma of the wrong length (invalid)",
                      [x, f32(rng, (3,))], {"axis": -1}))
    return cases


def gen_simplified_layer_norm(rng, n):
    cases = []
    for k in range(n):
        shp = shape(rng, int(rng.integers(1, 3)), 1, 4) + (int(rng.integers(2, 12)),)
        x = f32(rng, shp, 2.0)
        gamma = f32(rng, shp[-1:], 1.0)
        eps = float(rng.choice([1e-5, 1e-6]))
        y, _, inv, bound, rel = layer_norm_ref(x, gamma, None, -1, eps, True)
        for r, b in ((0, bound), (1, rel * np.abs(inv))):
            cases.append(Case("SimplifiedLayerNormalization", f"random {shp} eps={eps} output {r}",
                              [x, gamma], {"axis": -1, "epsilon": eps}, tol=SUM, bound=b,
                              results=2, result=r, types=[np.float32] * 2))
    return cases


def gen_skip_norm(op, rng, n):
    rms = "Simplified" in op
    cases = []
    for k in range(n):
        b, s, h = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(2, 12))
        x, skip = f32(rng, (b, s, h), 2.0), f32(rng, (b, s, h) if k % 3 else (s, h), 2.0)
        gamma, beta, bias = f32(rng, (h,), 1.0), f32(rng, (h,), 1.0), f32(rng, (h,), 1.0)
        with_bias = k % 2 == 0
        inputs = [x, skip, gamma] + ([] if rms else [beta if k % 4 < 2 else None]) + \
            ([bias] if with_bias else [])
        while inputs[-1] is None:
            inputs.pop()
        total = x.astype(np.float64) + skip + (bias if with_bias else 0)
        used_beta = None if rms or len(inputs) < 4 or inputs[3] is None else beta
        eps = float(rng.choice([1e-12, 1e-5]))
        y, _, _, bound, _ = layer_norm_ref(total.astype(np.float32), gamma, used_beta, -1, eps, rms)
        label = f"random [{b}, {s}, {h}] skip {list(skip.shape)} eps={eps} " + \
            f"{'bias ' if with_bias else ''}{'beta' if used_beta is not None else ''}"
        cases.append(Case(op, label + " output 0", inputs, {"epsilon": eps}, tol=SUM,
                          bound=bound, results=4, result=0, domain="com.microsoft"))
        cases.append(Case(op, label + " output 3 (input + skip + bias)", inputs, {"epsilon": eps},
                          tol=SUM, bound=4 * EPS32 * np.abs(total) + 1e-7, results=4, result=3,
                          domain="com.microsoft"))
    return cases


def gelu_bound(x):
    return 16 * np.spacing(np.abs(x).astype(np.float32)).astype(np.float64) + 1e-6


def gen_gelu(rng, n):
    cases = []
    for k in range(n):
        shp = shape(rng, int(rng.integers(1, 4)))
        x = f32(rng, shp, 3.0)
        approx = ["none", "tanh"][k % 2]
        cases.append(Case("Gelu", f"opset 20, approximate={approx} {shp}", [x],
                          {"approximate": approx}, tol=SUM, bound=gelu_bound(x), opset=20))
    x = SPECIAL.copy()
    x = x[np.isfinite(x)]
    cases.append(Case("Gelu", "opset 20 special values", [x], tol=SUM, bound=gelu_bound(x),
                      opset=20))
    x = f32(rng, (3, 5))
    cases.append(Case("Gelu", "com.microsoft (erf)", [x], tol=SUM, bound=gelu_bound(x),
                      domain="com.microsoft"))
    return cases


def gen_fast_gelu(rng, n):
    cases = []
    for k in range(n):
        shp = shape(rng, int(rng.integers(1, 4)), 1, 5)
        x = f32(rng, shp, 3.0)
        bias = f32(rng, shp[-1:], 1.0) if k % 2 else None
        y = x + (bias if bias is not None else 0)
        cases.append(Case("FastGelu", f"{shp} {'with bias' if bias is not None else ''}",
                          [x] + ([bias] if bias is not None else []), tol=SUM,
                          bound=gelu_bound(y) + 4 * EPS32 * np.abs(y), domain="com.microsoft"))
    return cases


def rotary_ref(x4, pos, cos, sin, interleaved, rotary):
    """x4 [B, N, S, H] rotated at positions pos [B, S]."""
    x = x4.astype(np.float64)
    out = x.copy()
    half = rotary // 2
    c = cos.astype(np.float64)[pos][:, None, :, :]  # [B, 1, S, half]
    s = sin.astype(np.float64)[pos][:, None, :, :]
    if interleaved:
        a, b = x[..., 0:rotary:2], x[..., 1:rotary:2]
        out[..., 0:rotary:2] = a * c - b * s
        out[..., 1:rotary:2] = b * c + a * s
    else:
        a, b = x[..., :half], x[..., half:rotary]
        out[..., :half] = a * c - b * s
        out[..., half:rotary] = b * c + a * s
    mag = np.abs(x).copy()
    mag[..., :rotary] = np.abs(x[..., :rotary]) + np.roll(np.abs(x[..., :rotary]), half, -1)
    return out, 4 * EPS32 * mag + 1e-7


def gen_rotary(rng, n):
    cases = []
    for k in range(n):
        b, s, heads, h = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 4)), \
            2 * int(rng.integers(2, 5))
        rotary = h if k % 3 else 2 * int(rng.integers(1, h // 2 + 1))
        positions = 8
        angles = np.arange(positions)[:, None] * rng.uniform(0.01, 1.0, rotary // 2)[None, :]
        cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
        interleaved = k % 2
        x4 = f32(rng, (b, heads, s, h))
        if k % 4 == 3:
            start = int(rng.integers(0, positions - s + 1))
            pos_in = np.array([start], np.int64)
            pos = np.tile(np.arange(start, start + s), (b, 1))
        else:
            pos = rng.integers(0, positions, (b, s))
            pos_in = pos.astype(np.int64)
        y4, bound4 = rotary_ref(x4, pos, cos, sin, interleaved, rotary)
        attrs = {"interleaved": interleaved}
        if rotary != h:
            attrs["rotary_embedding_dim"] = rotary
        four_d = k % 5 == 4
        if four_d:
            x, bound = x4, bound4
        else:
            x = np.ascontiguousarray(x4.transpose(0, 2, 1, 3).reshape(b, s, heads * h))
            bound = bound4.transpose(0, 2, 1, 3).reshape(b, s, heads * h)
            if rotary != h or rng.random() < 0.5:
                attrs["num_heads"] = heads
            elif heads > 1:
                # Without num_heads a head is what the caches rotate: all of it.
                attrs["num_heads"] = heads
        label = f"{'[B, N, S, H]' if four_d else '[B, S, N * H]'} b={b} s={s} heads={heads} " \
            f"h={h} rotary={rotary} interleaved={interleaved} positions {list(pos_in.shape)}"
        cases.append(Case("RotaryEmbedding", label, [x, pos_in, cos, sin], attrs, tol=SUM,
                          bound=bound, domain="com.microsoft"))
    return cases


def attention_bound(q, k, v, scale, head_dim, keys):
    """A float32 bound for an attention output: the scores' sums (head_dim terms) and the
    weighted sum of `keys` values, relative to the largest scores and values involved."""
    def largest(x):
        arrays = x if isinstance(x, list) else [x]
        return max(float(np.max(np.abs(a), initial=0)) for a in arrays if a is not None)
    score = scale * head_dim * largest(q) * largest(k)
    return 4 * EPS32 * largest(v) * (head_dim * score + keys + 1) + 1e-6


def gen_multi_head_attention(rng, n):
    """com.microsoft MultiHeadAttention as ONNX Runtime's optimizer and GenAI's builder write
    it: q, k, v [B, S, N * H], a key padding mask, an additive attention bias, a past of P
    positions (present_key and present_value compared too), causal or not, scale or not."""
    cases = []
    for k in range(n):
        b, s, p = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(0, 4))
        heads, h = int(rng.integers(1, 4)), [2, 4, 8][k % 3]
        q, key, value = (f32(rng, (b, s, heads * h), 1.0) for _ in range(3))
        total = p + s
        mask = None
        if k % 3 == 1:
            # Key 0 stays: a row whose every key is masked is ONNX Runtime's scores less 10000
            # in float32, where 10000's ulp is 1e-3 (hetc's are exact).
            mask = np.ones((b, total), np.int32)
            mask[0, 1: int(rng.integers(1, total + 1))] = 0
        bias = None
        if k % 4 >= 2:
            bias = f32(rng, (b if k % 2 else 1, heads if k % 5 else 1, s, total), 1.0)
        past_k = past_v = None
        if p > 0:
            past_k, past_v = f32(rng, (b, heads, p, h), 1.0), f32(rng, (b, heads, p, h), 1.0)
        attrs = {"num_heads": heads}
        scale = 1.0 / math.sqrt(h)
        if k % 4 == 3:
            scale = float(rng.uniform(0.05, 0.5))
            attrs["scale"] = scale
        if k % 5 == 2:
            attrs["unidirectional"] = 1
        inputs = [q, key, value, None, mask, bias, past_k, past_v]
        while inputs[-1] is None:
            inputs.pop()
        keys = key if past_k is None else np.concatenate(
            [past_k.transpose(0, 2, 1, 3).reshape(b, p, heads * h), key], axis=1)
        label = (f"b={b} s={s} past={p} heads={heads} h={h}{' padding' if mask is not None else ''}"
                 f"{' bias' if bias is not None else ''}{' causal' if 'unidirectional' in attrs else ''}")
        results = 3 if past_k is not None else 1
        bound = attention_bound(q, keys, [value, past_v if past_v is not None else value], scale, h,
                                total)
        for r in range(results):
            cases.append(Case("MultiHeadAttention", f"{label} output {r}", inputs, attrs, tol=SUM,
                              bound=bound if r == 0 else 0.0, results=results, result=r,
                              domain="com.microsoft"))
    return cases


def gen_group_query_attention(rng, n):
    """com.microsoft GroupQueryAttention as GenAI's builder writes it: separate or packed q, k,
    v, a past of P positions in its own buffer, seqlens_k = P + S - 1 for every sequence,
    rotation inside (halves or interleaved), soft-capping, a local window; output, present_key
    and present_value each compared."""
    cases = []
    for k in range(n):
        b, s, p = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(0, 4))
        # ONNX Runtime rotates heads of a multiple of 16 only, and takes a chunk of several
        # tokens after a past for one sequence only.
        kv, group, h = int(rng.integers(1, 3)), int(rng.integers(1, 3)), [16, 8][k % 2]
        if s > 1 and p > 0:
            b = 1
        heads = kv * group
        packed = k % 3 == 2
        q = f32(rng, (b, s, heads * h), 1.0)
        key, value = f32(rng, (b, s, kv * h), 1.0), f32(rng, (b, s, kv * h), 1.0)
        if packed:
            q, key, value = np.concatenate([q, key, value], axis=2), None, None
        past_k, past_v = f32(rng, (b, kv, p, h), 1.0), f32(rng, (b, kv, p, h), 1.0)
        total = p + s
        seqlens = np.full((b,), total - 1, np.int32)
        attrs = {"num_heads": heads, "kv_num_heads": kv}
        scale = 1.0 / math.sqrt(h)
        if k % 4 == 3:
            scale = float(rng.uniform(0.05, 0.5))
            attrs["scale"] = scale
        if k % 4 == 1:
            attrs["softcap"] = float(rng.uniform(1.0, 3.0))
        if k % 5 == 2:
            attrs["local_window_size"] = int(rng.integers(1, total + 1))
        cos = sin = None
        if k % 2 == 0:
            attrs["do_rotary"] = 1
            attrs["rotary_interleaved"] = int(k % 4 == 2)
            angles = np.arange(16)[:, None] * rng.uniform(0.01, 1.0, h // 2)[None, :]
            cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
        inputs = [q, key, value, past_k, past_v, seqlens, np.array(total, np.int32), cos, sin]
        while inputs[-1] is None:
            inputs.pop()
        label = (f"b={b} s={s} past={p} heads={heads} kv={kv} h={h}{' packed' if packed else ''}"
                 f"{' rotary' if cos is not None else ''}{' softcap' if 'softcap' in attrs else ''}"
                 f"{' window' if 'local_window_size' in attrs else ''}")
        bound = attention_bound(q, [past_k, q], [past_v, q], scale, h, total)
        kv_bound = 4 * EPS32 * float(np.max(np.abs(q))) + 1e-6 if cos is not None else 0.0
        for r in range(3):
            cases.append(Case("GroupQueryAttention", f"{label} output {r}", inputs, attrs,
                              tol=SUM, bound=bound if r == 0 else kv_bound, results=3, result=r,
                              domain="com.microsoft"))
    # What ONNX Runtime refuses, left unevaluated by hetc too.
    q, kv = f32(rng, (2, 2, 8), 1.0), f32(rng, (2, 2, 8), 1.0)
    past = f32(rng, (2, 1, 1, 8), 1.0)
    cases.append(Case("GroupQueryAttention", "two sequences, a chunk after a past (invalid)",
                      [q, kv, kv, past, past, np.full((2,), 2, np.int32), np.array(3, np.int32)],
                      {"num_heads": 1, "kv_num_heads": 1}, results=3, domain="com.microsoft"))
    return cases


def gen_attention(rng, n):
    """com.microsoft Attention as ONNX Runtime's GPT-2 export writes it: the packed projection
    and its bias inside the op, a raw [B, P + S] mask, a stacked past [2, B, N, P, H], causal."""
    cases = []
    for k in range(n):
        b, s, p = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(0, 4))
        heads, h = int(rng.integers(1, 3)), [2, 4][k % 2]
        d = heads * h
        x = f32(rng, (b, s, d), 1.0)
        w, bias = f32(rng, (d, 3 * d), 0.5), f32(rng, (3 * d,), 0.5)
        total = p + s
        mask = None
        if k % 3 != 0:
            mask = np.ones((b, total), np.int32)  # key 0 stays, as for MultiHeadAttention
            mask[-1, 1: int(rng.integers(1, total + 1))] = 0
        past = f32(rng, (2, b, heads, p, h), 1.0) if p > 0 else None
        attrs = {"num_heads": heads, "unidirectional": int(k % 4 != 3)}
        inputs = [x, w, bias, mask, past]
        while inputs[-1] is None:
            inputs.pop()
        qkv = x.astype(np.float64) @ w + bias
        label = (f"b={b} s={s} past={p} heads={heads} h={h}{' mask' if mask is not None else ''}"
                 f"{' causal' if attrs['unidirectional'] else ''}")
        results = 2 if past is not None else 1
        bound = attention_bound(qkv, qkv, qkv, 1.0 / math.sqrt(h), h, total) + \
            8 * EPS32 * d * float(np.max(np.abs(qkv)))
        for r in range(results):
            cases.append(Case("Attention", f"{label} output {r}", inputs, attrs, tol=SUM,
                              bound=bound, results=results, result=r, domain="com.microsoft"))
    return cases


def gen_embed_layer_norm(rng, n):
    """com.microsoft EmbedLayerNormalization as ONNX Runtime's GPT-2 and BERT exports write it:
    word and position rows (position ids given, [B, S] or [1, S], or 0..S-1), segment rows or
    not, beta or not; output, mask_index (with a mask) and embedding_sum each compared."""
    cases = []
    for k in range(n):
        b, s, hidden = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(2, 9))
        vocab, positions = int(rng.integers(3, 9)), s + int(rng.integers(0, 3))
        ids = rng.integers(0, vocab, (b, s)).astype(np.int32)
        word, pos = f32(rng, (vocab, hidden), 1.0), f32(rng, (positions, hidden), 1.0)
        gamma, beta = f32(rng, (hidden,), 1.0), f32(rng, (hidden,), 1.0)
        segments = k % 3 == 1
        seg_ids = rng.integers(0, 2, (b, s)).astype(np.int32) if segments else None
        seg = f32(rng, (2, hidden), 1.0) if segments else None
        mask = np.ones((b, s), np.int32)
        mask[0, s - int(rng.integers(0, s)):] = 0
        position_ids = None
        if k % 4 == 1:
            position_ids = rng.integers(0, positions, (b, s)).astype(np.int32)
        elif k % 4 == 2:
            position_ids = rng.permutation(positions)[:s].astype(np.int32)[None, :]
        inputs = [ids, seg_ids, word, pos, seg, gamma, beta, mask, position_ids]
        while inputs[-1] is None:
            inputs.pop()
        terms = word[ids].astype(np.float64) + pos[np.arange(s) if position_ids is None else
                                                    position_ids].astype(np.float64)
        if segments:
            terms = terms + seg[seg_ids]
        y, _, _, bound, _ = layer_norm_ref(terms, gamma, beta, -1, 1e-5, False)
        label = (f"b={b} s={s} hidden={hidden}{' segments' if segments else ''}"
                 f"{' positions ' + str(list(position_ids.shape)) if position_ids is not None else ''}")
        attrs = {"epsilon": 1e-5}
        for r, kind in ((0, SUM), (1, EXACT), (2, SUM)):
            cases.append(Case("EmbedLayerNormalization", f"{label} output {r}", inputs, attrs,
                              tol=kind, bound=bound if r == 0 else 8 * EPS32 * np.abs(terms) + 1e-6,
                              results=3, result=r, types=[np.float32, np.int32, np.float32],
                              out=[np.float32, np.int32, np.float32][r], domain="com.microsoft"))
    ids, table = np.array([[0, 1]], np.int32), f32(rng, (2, 3), 1.0)
    cases.append(Case("EmbedLayerNormalization", "without beta (invalid)",
                      [ids, None, table, table, None, table[0]], {"epsilon": 1e-5},
                      domain="com.microsoft"))
    return cases


def gen_clip(rng, n):
    cases = []
    for k in range(n):
        x = f32(rng, shape(rng, int(rng.integers(0, 3))))
        lo = np.float32(rng.uniform(-3, 0)) if k % 3 != 1 else None
        hi = np.float32(rng.uniform(0, 3)) if k % 3 != 2 else None
        cases.append(Case("Clip", f"f32 min={lo} max={hi}", [x, lo, hi]))
    cases.append(Case("Clip", "no bounds", [f32(rng, (3,))]))
    cases.append(Case("Clip", "NaN passes", [np.array([np.nan, 1, -5], np.float32),
                                             np.float32(-1), np.float32(1)]))
    cases.append(Case("Clip", "min above max", [f32(rng, (5,)), np.float32(2), np.float32(-1)]))
    cases.append(Case("Clip", "int64", [ints(rng, (6,)), np.int64(-3), np.int64(4)]))
    return cases


def gen_sign_isnan_isinf(op, rng, n):
    cases = [Case(op, "special values", [SPECIAL.copy()], out=None if op == "Sign" else np.bool_)]
    for k in range(n // 2):
        x = f32(rng, shape(rng, int(rng.integers(0, 3))))
        x.flat[:1] = np.inf if k % 2 else -np.inf
        cases.append(Case(op, f"random {x.shape}", [x], out=None if op == "Sign" else np.bool_))
    if op == "Sign":
        cases.append(Case(op, "int64", [np.array([-5, 0, 7, I64_MIN, I64_MAX], np.int64)]))
    if op == "IsInf":
        for pos, neg in ((0, 1), (1, 0), (0, 0)):
            cases.append(Case(op, f"detect_positive={pos} detect_negative={neg}",
                              [SPECIAL.copy()], {"detect_positive": pos, "detect_negative": neg},
                              out=np.bool_))
    return cases


def gen_xor(rng, n):
    cases = []
    for k in range(n):
        sa, sb = broadcast_pair(rng, 3)
        cases.append(Case("Xor", f"random {sa} {sb}", [bools(rng, sa), bools(rng, sb)]))
    return cases


def gen_gather_elements(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 5)
        axis = int(rng.integers(-rank, rank))
        ishp = tuple(int(rng.integers(1, d + 1)) if i != axis % rank else int(rng.integers(1, 6))
                     for i, d in enumerate(shp))
        idx = rng.integers(-shp[axis], shp[axis], ishp).astype(np.int64)
        dt = [np.float32, np.int64][k % 2]
        cases.append(Case("GatherElements", f"random {shp} axis={axis} indices {ishp}",
                          [random_values(rng, dt, shp), idx], {"axis": axis}))
    cases.append(Case("GatherElements", "index out of range (invalid)",
                      [f32(rng, (2, 3)), np.array([[0, 3]], np.int64)], {"axis": 1}))
    return cases


def gen_scatter_elements(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 5)
        axis = int(rng.integers(-rank, rank))
        ishp = tuple(int(rng.integers(1, d + 1)) for d in shp)
        reduction = ["none", "add", "mul", "max", "min"][k % 5]
        if reduction == "none":  # distinct targets along the axis, so the order cannot matter
            cols = ishp[axis % rank]
            perm = np.stack([rng.permutation(shp[axis % rank])[:cols]
                             for _ in range(int(np.prod(ishp)) // cols)])
            idx = np.moveaxis(perm.reshape(ishp[:axis % rank] + ishp[axis % rank + 1:] + (cols,)),
                              -1, axis % rank).astype(np.int64)
        else:
            idx = rng.integers(0, shp[axis], ishp).astype(np.int64)
        dt = [np.float32, np.int64][k % 2]
        data, upd = random_values(rng, dt, shp), random_values(rng, dt, ishp)
        attrs = {"axis": axis}
        if reduction != "none":
            attrs["reduction"] = reduction
        cases.append(Case("ScatterElements", f"random {np.dtype(dt).name} {shp} axis={axis} "
                          f"reduction={reduction}", [data, idx, upd], attrs,
                          opset=18 if reduction in ("max", "min") else 17))
    for r in ("max", "min"):
        cases.append(Case("ScatterElements", f"reduction {r} with NaN in the data and the updates",
                          [np.array([1.0, np.nan, 3.0, np.nan], np.float32),
                           np.array([0, 1, 2, 3], np.int64),
                           np.array([np.nan, 5.0, 1.0, np.nan], np.float32)],
                          {"axis": 0, "reduction": r}, opset=18))
    return cases


def gen_gather_nd(rng, n):
    cases = []
    for k in range(n):
        batch = k % 2
        rank = int(rng.integers(batch + 1, 4))
        shp = shape(rng, rank, 1, 4)
        kk = int(rng.integers(1, rank - batch + 1))
        lead = shp[:batch] + shape(rng, int(rng.integers(0, 2)), 1, 3)
        idx = np.stack([rng.integers(-shp[batch + d], shp[batch + d], lead)
                        for d in range(kk)], -1).astype(np.int64)
        cases.append(Case("GatherND", f"random {shp} indices {list(idx.shape)} batch_dims={batch}",
                          [f32(rng, shp), idx], {"batch_dims": batch} if batch else {}))
    return cases


def gen_arg(op, rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 5)
        axis = int(rng.integers(-rank, rank))
        x = ints(rng, shp, -3, 3) if k % 2 else f32(rng, shp)  # ints make ties
        attrs = {"axis": axis, "keepdims": k % 3 != 0, "select_last_index": int(k % 4 == 1)}
        cases.append(Case(op, f"random {x.dtype} {shp} {attrs}", [x], attrs, out=np.int64))
    return cases


def gen_topk(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 6)
        axis = int(rng.integers(-rank, rank))
        kk = int(rng.integers(0, shp[axis] + 1))
        x = ints(rng, shp, -3, 3).astype(np.float32) if k % 2 else f32(rng, shp)
        attrs = {"axis": axis, "largest": int(k % 3 != 0)}
        for r in (0, 1):
            cases.append(Case("TopK", f"random {shp} k={kk} {attrs} output {r}",
                              [x, np.array([kk], np.int64)], attrs, results=2, result=r,
                              types=[np.float32, np.int64], out=[np.float32, np.int64][r]))
    return cases


def gen_cast_like(rng, n):
    cases = []
    pairs = [(np.float32, np.int64), (np.int64, np.float32), (np.float32, np.bool_),
             (np.int32, np.int64), (np.bool_, np.float32)]
    for src, dst in pairs:
        x = random_values(rng, src, (2, 3)) * (np.float32(1.7) if src == np.float32 else 1)
        cases.append(Case("CastLike", f"{np.dtype(src).name} like {np.dtype(dst).name}",
                          [np.asarray(x, src), random_values(rng, dst, (1,))], out=dst))
    return cases


def gen_flatten(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(0, 4))
        shp = shape(rng, rank)
        axis = int(rng.integers(-rank, rank + 1)) if rank else 0
        cases.append(Case("Flatten", f"random {shp} axis={axis}", [f32(rng, shp)], {"axis": axis}))
    return cases


def gen_dropout(rng, n):
    x = f32(rng, (2, 3))
    return [Case("Dropout", "inference, output 0", [x], results=2, result=0,
                 types=[np.float32, np.bool_]),
            Case("Dropout", "inference, mask", [x], results=2, result=1,
                 types=[np.float32, np.bool_], out=np.bool_),
            Case("Dropout", "ratio given, not training", [x, np.float32(0.3)])]


def gen_split(rng, n):
    cases = []
    for k in range(n):
        rank = int(rng.integers(1, 4))
        shp = shape(rng, rank, 1, 6)
        axis = int(rng.integers(-rank, rank))
        dim = shp[axis]
        pieces = int(rng.integers(1, dim + 1))
        cuts = sorted(rng.choice(np.arange(1, dim), size=pieces - 1, replace=False)) \
            if pieces > 1 else []
        sizes = np.diff([0] + [int(c) for c in cuts] + [dim]).astype(np.int64)
        x = f32(rng, shp)
        for r in sorted({0, pieces - 1}):
            if k % 2:
                cases.append(Case("Split", f"opset 13 sizes {sizes.tolist()} {shp} axis={axis} "
                                  f"piece {r}", [x, sizes], {"axis": axis}, results=pieces,
                                  result=r))
            else:
                cases.append(Case("Split", f"opset 11 split attribute {sizes.tolist()} {shp} "
                                  f"axis={axis} piece {r}", [x], {"axis": axis,
                                                                  "split": sizes.tolist()},
                                  results=pieces, result=r, opset=11))
    x = f32(rng, (2, 7))
    for r in (0, 2):
        cases.append(Case("Split", f"opset 18 num_outputs=3 of 7, piece {r}", [x],
                          {"axis": 1, "num_outputs": 3}, results=3, result=r, opset=18))
        cases.append(Case("Split", f"equal pieces (none given), piece {r}", [f32(rng, (6, 2))],
                          {}, results=3, result=r))
    cases.append(Case("Split", "sizes that do not add up (invalid)", [x, np.array([3, 3],
                                                                                   np.int64)],
                      {"axis": 1}, results=2))
    return cases


def gen_gemm(rng, n):
    cases = []
    for k in range(n):
        m, kk, nn = (int(d) for d in rng.integers(1, 6, 3))
        ta, tb = k % 2, (k // 2) % 2
        a = f32(rng, (kk, m) if ta else (m, kk))
        b = f32(rng, (nn, kk) if tb else (kk, nn))
        c_shape = [(m, nn), (nn,), (1, nn), (m, 1), ()][k % 5]
        c = f32(rng, c_shape) if k % 6 != 5 else None
        alpha, beta = float(rng.choice([1.0, 0.5, -2.0])), float(rng.choice([1.0, 0.25]))
        a64 = (a.T if ta else a).astype(np.float64)
        b64 = (b.T if tb else b).astype(np.float64)
        mag = np.abs(alpha) * (np.abs(a64) @ np.abs(b64)) + \
            (np.abs(beta) * np.abs(c.astype(np.float64)) if c is not None else 0)
        attrs = {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}
        cases.append(Case("Gemm", f"random {m}x{kk}x{nn} C {c_shape if c is not None else None} "
                          f"{attrs}", [a, b] + ([c] if c is not None else []), attrs, tol=SUM,
                          bound=(kk + 3) * EPS32 * mag))
    return cases


def const_node(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value)))


def gen_loop(rng, n):
    """Loop: carried values, scan outputs, the trip count and the condition, torch's
    repeat_interleave over sequences."""
    cases = []
    for k in range(n):
        x = f32(rng, shape(rng, 2, 1, 4))
        trips = [int(rng.integers(0, 6)), 0, 3, 1][k % 4] if k < 4 else int(rng.integers(1, 6))
        start = k % 4 != 2  # one case starts false: no iterations
        body = helper.make_graph(
            [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["in0", "fi"], ["t"]),
             helper.make_node("Add", ["acc", "t"], ["acc2"]),
             helper.make_node("Identity", ["c"], ["c2"]),
             helper.make_node("Neg", ["acc2"], ["scan"])],
            "body",
            [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c", TensorProto.BOOL, []),
             helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
             helper.make_tensor_value_info("acc2", TensorProto.FLOAT, None),
             helper.make_tensor_value_info("scan", TensorProto.FLOAT, None)])
        for result in (0, 1):
            if result == 1 and (trips == 0 or not start):
                continue  # an empty scan output: hetc refuses it (tested in lit)
            outs = ["out", "unused"] if result == 0 else ["unused", "out"]
            cases.append(Case("Loop", f"{trips} iterations{'' if start else ' (starting false)'} "
                              f"of acc += x * i, {'final acc' if result == 0 else 'scan of -acc'}",
                              [x, np.array(trips, np.int64), np.array(start)],
                              nodes=[helper.make_node("Loop", ["in1", "in2", "in0"], outs,
                                                      body=body)]))
        # The trip count read from a shape, as exporters write it.
        m_body = helper.make_graph(
            [helper.make_node("Add", ["acc", "in0"], ["acc2"]),
             helper.make_node("Identity", ["c"], ["c2"])], "body",
            [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c", TensorProto.BOOL, []),
             helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
             helper.make_tensor_value_info("acc2", TensorProto.FLOAT, None)])
        cases.append(Case("Loop", f"trip count Gather(Shape(x), 1) of x {list(x.shape)}",
                          [x, np.array(True), np.array(1, np.int64)], nodes=[
                              helper.make_node("Shape", ["in0"], ["s"]),
                              helper.make_node("Gather", ["s", "in2"], ["m"], axis=0),
                              helper.make_node("Loop", ["m", "in1", "in0"], ["out"], body=m_body)]))
        # torch 1.13's repeat_interleave(x, repeats, dim=2) over a dimension it could not see.
        r = int(rng.integers(1, 5))
        x3 = f32(rng, (int(rng.integers(1, 3)), int(rng.integers(1, 4)), r))
        repeats = rng.integers(1, 4, r).astype(np.int64)
        r_body = helper.make_graph(
            [helper.make_node("SequenceAt", ["rep_seq", "i"], ["ri"]),
             helper.make_node("SequenceAt", ["x_seq", "i"], ["xi"]),
             helper.make_node("Shape", ["xi"], ["xs"]),
             const_node("zero", np.array([0], np.int64)),
             const_node("two", np.array([2], np.int64)),
             helper.make_node("Slice", ["xs", "zero", "two"], ["lead"]),
             helper.make_node("Concat", ["lead", "ri"], ["target"], axis=0),
             helper.make_node("Expand", ["xi", "target"], ["e"]),
             helper.make_node("SequenceInsert", ["seq", "e"], ["seq2"]),
             helper.make_node("Cast", ["c"], ["c2"], to=TensorProto.BOOL)], "body",
            [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c", TensorProto.BOOL, []),
             helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
             helper.make_tensor_sequence_value_info("seq2", TensorProto.FLOAT, None)])
        cases.append(Case("Loop", f"torch's repeat_interleave of x {list(x3.shape)} by "
                          f"{repeats.tolist()} on axis 2", [x3, repeats, np.array(True)], nodes=[
                              helper.make_node("Shape", ["in1"], ["rs"]),
                              helper.make_node("ConstantOfShape", ["rs"], ["ones"],
                                               value=numpy_helper.from_array(
                                                   np.array([1], np.int64))),
                              helper.make_node("SplitToSequence", ["in1", "ones"], ["rep_seq"],
                                               axis=0),
                              helper.make_node("SplitToSequence", ["in0", "ones"], ["x_seq"],
                                               axis=2),
                              helper.make_node("SequenceEmpty", [], ["empty"],
                                               dtype=TensorProto.FLOAT),
                              helper.make_node("Shape", ["in0"], ["x3s"]),
                              const_node("two_s", np.array([2], np.int64)),
                              helper.make_node("Gather", ["x3s", "two_s"], ["trips"], axis=0),
                              helper.make_node("Loop", ["trips", "in2", "empty"], ["loop_out"],
                                               body=r_body),
                              helper.make_node("ConcatFromSequence", ["loop_out"], ["out"],
                                               axis=2)]))
    return cases


def gen_sequence(rng, n):
    """SequenceConstruct, SequenceInsert, SequenceErase, SequenceAt, SequenceLength,
    SplitToSequence and ConcatFromSequence, with positions from the end."""
    cases = []
    for k in range(n):
        rows = int(rng.integers(1, 4))
        parts = [f32(rng, (rows, int(rng.integers(1, 4)))) for _ in range(3)]
        pos = [None, -1, 0, 1][k % 4]
        at = [-1, 0, 1, 2][(k // 2) % 4]
        extra = f32(rng, (rows, 2))
        inputs = parts + [extra] + ([np.array(pos, np.int64)] if pos is not None else []) + \
            [np.array(at, np.int64)]
        pos_name = "in4" if pos is not None else ""
        at_name = "in5" if pos is not None else "in4"
        nodes = [helper.make_node("SequenceConstruct", ["in0", "in1", "in2"], ["seq"]),
                 helper.make_node("SequenceInsert", ["seq", "in3"] + ([pos_name] if pos_name
                                                                      else []), ["seq2"]),
                 helper.make_node("SequenceErase", ["seq2"] + (["in4"] if k % 3 == 0 and pos
                                                               is not None else []), ["seq3"])]
        cases.append(Case("SequenceAt", f"Construct 3, Insert at {pos}, Erase "
                          f"{'in4' if k % 3 == 0 and pos is not None else 'last'}, At {at}",
                          inputs, nodes=nodes + [helper.make_node("SequenceAt", ["seq3", at_name],
                                                                  ["out"])]))
        cases.append(Case("SequenceLength", "Construct 3, Insert, Erase: length", inputs,
                          out=np.int64, nodes=nodes + [helper.make_node(
                              "SequenceLength", ["seq3"], ["out"])]))
        same = [f32(rng, (rows, 3)) for _ in range(int(rng.integers(1, 4)))]
        axis = int(rng.integers(-3, 3))
        cases.append(Case("ConcatFromSequence", f"{len(same)} of [{rows}, 3], axis {axis}, "
                          "new_axis", same, nodes=[
                              helper.make_node("SequenceConstruct", [f"in{i}" for i in
                                                                     range(len(same))], ["seq"]),
                              helper.make_node("ConcatFromSequence", ["seq"], ["out"], axis=axis,
                                               new_axis=1)]))
        x = f32(rng, (int(rng.integers(1, 4)), int(rng.integers(2, 7))))
        width = x.shape[1]
        piece = int(rng.integers(1, width + 1))
        last = int(rng.integers(-1, 1))
        cases.append(Case("SplitToSequence", f"x {list(x.shape)} into pieces of {piece} on axis "
                          f"1, element {last}", [x, np.array(piece, np.int64),
                                                np.array(last, np.int64)], nodes=[
                              helper.make_node("SplitToSequence", ["in0", "in1"], ["seq"], axis=1),
                              helper.make_node("SequenceAt", ["seq", "in2"], ["out"])]))
        sizes = np.array([1, width - 2, 1] if width > 2 else [width], np.int64)
        cases.append(Case("SplitToSequence", f"x {list(x.shape)} into {sizes.tolist()} on axis "
                          "-1, concatenated back in reverse", [x, sizes], nodes=[
                              helper.make_node("SplitToSequence", ["in0", "in1"], ["seq"],
                                               axis=-1),
                              helper.make_node("SequenceLength", ["seq"], ["len"]),
                              const_node("one", np.array(1, np.int64)),
                              helper.make_node("Sub", ["len", "one"], ["len_m1"]),
                              helper.make_node("SequenceAt", ["seq", "len_m1"], ["lastp"]),
                              const_node("zero", np.array(0, np.int64)),
                              helper.make_node("SequenceAt", ["seq", "zero"], ["firstp"]),
                              helper.make_node("Concat", ["lastp", "firstp"], ["out"], axis=1)]))
        keep_at = int(rng.integers(-x.shape[0], x.shape[0]))
        cases.append(Case("SplitToSequence", f"x {list(x.shape)} into rows, keepdims 0, element "
                          f"{keep_at}", [x, np.array(keep_at, np.int64)], nodes=[
                              helper.make_node("SplitToSequence", ["in0"], ["seq"], axis=0,
                                               keepdims=0),
                              helper.make_node("SequenceAt", ["seq", "in1"], ["out"])]))
    return cases


GENERATORS = {op: (lambda op: lambda rng, n: gen_unary(op, rng, n))(op) for op in UNARY_FLOAT}
GENERATORS.update({op: (lambda op: lambda rng, n: gen_arith(op, rng, n))(op) for op in ARITH})
GENERATORS.update({op: (lambda op: lambda rng, n: gen_compare(op, rng, n))(op) for op in COMPARE})
GENERATORS.update({op: (lambda op: lambda rng, n: gen_minmax(op, rng, n))(op)
                   for op in ("Max", "Min")})
GENERATORS.update({op: (lambda op: lambda rng, n: gen_logic(op, rng, n))(op)
                   for op in ("And", "Or")})
GENERATORS.update({
    "Not": gen_not, "Pow": gen_pow, "Mod": gen_mod, "Cast": gen_cast, "Concat": gen_concat,
    "ConstantOfShape": gen_constant_of_shape, "CumSum": gen_cumsum, "Expand": gen_expand,
    "Gather": gen_gather, "Identity": gen_identity, "MatMul": gen_matmul, "Range": gen_range,
    "Reshape": gen_reshape, "ScatterND": gen_scatter_nd, "Shape": gen_shape, "Size": gen_size,
    "Slice": gen_slice, "Squeeze": gen_squeeze, "Tile": gen_tile, "Transpose": gen_transpose,
    "Pad": gen_pad,
    "Trilu": gen_trilu, "Unsqueeze": gen_unsqueeze, "Where": gen_where,
})
GENERATORS.update({op: (lambda op: lambda rng, n: gen_reduce(op, rng, n))(op) for op in REDUCE})
GENERATORS.update({op: (lambda op: lambda rng, n: gen_softmax(op, rng, n))(op)
                   for op in ("Softmax", "LogSoftmax")})
GENERATORS.update({op: (lambda op: lambda rng, n: gen_skip_norm(op, rng, n))(op)
                   for op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")})
GENERATORS.update({op: (lambda op: lambda rng, n: gen_sign_isnan_isinf(op, rng, n))(op)
                   for op in ("Sign", "IsNaN", "IsInf")})
GENERATORS.update({op: (lambda op: lambda rng, n: gen_arg(op, rng, n))(op)
                   for op in ("ArgMax", "ArgMin")})
GENERATORS.update({
    "LayerNormalization": gen_layer_norm, "SimplifiedLayerNormalization": gen_simplified_layer_norm,
    "Gelu": gen_gelu, "FastGelu": gen_fast_gelu, "RotaryEmbedding": gen_rotary, "Clip": gen_clip,
    "Xor": gen_xor, "GatherElements": gen_gather_elements, "GatherND": gen_gather_nd,
    "ScatterElements": gen_scatter_elements, "TopK": gen_topk, "CastLike": gen_cast_like,
    "Flatten": gen_flatten, "Dropout": gen_dropout, "Split": gen_split, "Gemm": gen_gemm,
    "Loop": gen_loop, "Sequence": gen_sequence, "MultiHeadAttention": gen_multi_head_attention,
    "GroupQueryAttention": gen_group_query_attention, "Attention": gen_attention,
    "EmbedLayerNormalization": gen_embed_layer_norm,
})

# ----------------------------------------------------------------------------- ONNX side


def onnx_model(case):
    names, infos, feeds = [], [], []
    for i, x in enumerate(case.inputs):
        if x is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        infos.append(helper.make_tensor_value_info(name, TYPES[x.dtype][0], list(x.shape)))
        feeds.append({"name": name, "dtype": TYPES[x.dtype][2], "dims": list(x.shape),
                      "data": base64.b64encode(np.ascontiguousarray(x).tobytes()).decode()})
    attrs = {}
    for k, v in case.attrs.items():
        attrs[k] = numpy_helper.from_array(v, k) if isinstance(v, np.ndarray) else v
    outputs = ["out" if r == case.result else f"unused{r}" for r in range(case.results)]
    nodes = case.nodes or [helper.make_node(case.op, names, outputs, name=case.op,
                                            domain=case.domain or None, **attrs)]
    out = helper.make_tensor_value_info("out", TYPES[case.out_dtype()][0], None)
    graph = helper.make_graph(nodes, case.id, infos, [out])
    opsets = [helper.make_opsetid("", case.opset)]
    if case.domain:
        opsets.append(helper.make_opsetid(case.domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model, feeds


def run_ort(cases, work):
    request = {"cases": []}
    for c in cases:
        model, feeds = onnx_model(c)
        data = model.SerializeToString()
        request["cases"].append({"id": c.id, "model": base64.b64encode(data).decode(),
                                 "inputs": feeds})
    req_path, res_path = os.path.join(work, "ort_in.json"), os.path.join(work, "ort_out.json")
    with open(req_path, "w") as f:
        json.dump(request, f)
    node = shutil.which("node") or "node"
    proc = subprocess.run([node, os.path.join(HERE, "run_op.mjs"), req_path, res_path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"run_op.mjs failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    with open(res_path) as f:
        raw = json.load(f)
    results = {}
    for cid, r in raw.items():
        if not r["ok"]:
            results[cid] = ("error", r["error"])
            continue
        o = r["outputs"][0]
        dt = ORT_TO_NP[o["dtype"]]
        arr = np.frombuffer(base64.b64decode(o["data"]), dtype=dt).reshape(o["dims"])
        results[cid] = ("ok", arr)
    return results


# ----------------------------------------------------------------------------- MLIR side


def mlir_type(shp, dtype):
    return "tensor<" + "".join(f"{d}x" for d in shp) + TYPES[np.dtype(dtype)][1] + ">"


def mlir_elem(v, dtype):
    if dtype == np.bool_:
        return "true" if v else "false"
    if dtype.kind == "i":
        return str(int(v))
    bits = np.array(v, dtype).view(BITS[dtype]).item()
    return f"0x{bits:0{dtype.itemsize * 2}X}"


def mlir_dense(x):
    if x.size == 0:
        return "dense<>"

    def rec(a):
        if a.ndim == 0:
            return mlir_elem(a[()], x.dtype)
        return "[" + ", ".join(rec(s) for s in a) + "]"
    return f"dense<{rec(x)}>"


def mlir_attr(v):
    if isinstance(v, np.ndarray):
        return f"{mlir_dense(v)} : {mlir_type(v.shape, v.dtype)}"
    if isinstance(v, bool):
        return f"{int(v)} : i64"
    if isinstance(v, int):
        return f"{v} : i64"
    if isinstance(v, float):
        return f"{mlir_elem(np.float32(v), np.dtype(np.float32))} : f32"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(int(i)) for i in v) + "]"
    raise TypeError(v)


ONNX_TO_MLIR = {v[0]: v[1] for v in TYPES.values()}


def mlir_value_type(t):
    """The importer's type for an ONNX TypeProto: unranked tensors, sequences as such."""
    if t.HasField("sequence_type"):
        return "!hetc.onnx_sequence"
    return f"tensor<*x{ONNX_TO_MLIR[t.tensor_type.elem_type]}>"


def mlir_graph(nodes, env, types, lines, indent, fresh):
    """Writes ONNX nodes as the importer does: hetc.onnx.node, hetc.constant for Constant,
    hetc.onnx.loop with its body as a region. `env` maps ONNX names to (SSA name, type)."""
    for node in nodes:
        pad = " " * indent
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute
                 if a.type != a.GRAPH}
        if node.op_type == "Constant":
            v = numpy_helper.to_array(attrs["value"])
            name = fresh()
            lines.append(f"{pad}{name} = hetc.constant {mlir_dense(v)} : "
                         f"{mlir_type(v.shape, v.dtype)}")
            env[node.output[0]] = (name, mlir_type(v.shape, v.dtype))
            continue
        operands = []
        for i in node.input:
            if not i:
                name = fresh()
                lines.append(f"{pad}{name} = hetc.onnx.none")
                operands.append((name, "none"))
            else:
                operands.append(env[i])
        ops = ", ".join(o[0] for o in operands)
        in_types = ", ".join(o[1] for o in operands)
        result = fresh()
        if node.op_type == "Loop":
            body = next(a.g for a in node.attribute if a.name == "body")
            carried = len(node.input) - 2
            # Carried values keep their element type, not their shape (as the importer writes).
            arg_types = ["tensor<i64>", "tensor<i1>"] + [
                t if t.startswith("!") else "tensor<*x" + t.rstrip(">").split("x")[-1] + ">"
                for _, t in operands[2:]]
            inner = dict(env)
            args = []
            for vi, t in zip(body.input, arg_types):
                arg = fresh()
                inner[vi.name] = (arg, t)
                args.append(f"{arg}: {t}")
            body_lines = []
            mlir_graph(body.node, inner, types, body_lines, indent + 2, fresh)
            yielded = [inner[o.name] for o in body.output]
            out_types = arg_types[2:] + [
                "tensor<*x" + t.rstrip(">").split("x")[-1] + ">" for _, t in yielded[1 + carried:]]
            lines.append(f"{pad}{result}:{len(out_types)} = hetc.onnx.loop({ops}) "
                         f"{{node_name = \"{node.name or 'loop'}\"}} : ({in_types}) -> "
                         f"({', '.join(out_types)}) {{")
            lines.append(f"{pad}^bb0({', '.join(args)}):")
            lines.extend(body_lines)
            lines.append(f"{pad}  hetc.onnx.yield {', '.join(y[0] for y in yielded)} : "
                         f"{', '.join(y[1] for y in yielded)}")
            lines.append(f"{pad}}}")
        else:
            out_types = [mlir_value_type(types[o]) for o in node.output]
            dict_text = ""
            if attrs:
                def conv(v):
                    if isinstance(v, TensorProto):
                        return mlir_attr(numpy_helper.to_array(v))
                    if isinstance(v, bytes):
                        return mlir_attr(v.decode())
                    return mlir_attr(v)
                dict_text = ", onnx_attrs = {" + ", ".join(
                    f"{k} = {conv(v)}" for k, v in attrs.items()) + "}"
            lines.append(f"{pad}{result}:{len(out_types)} = hetc.onnx.node \"{node.op_type}\"({ops}) "
                         f"{{node_name = \"{node.name or node.op_type}\"{dict_text}}} : "
                         f"({in_types}) -> ({', '.join(out_types)})")
        for j, o in enumerate(node.output):
            env[o] = (f"{result}#{j}", out_types[j])


def mlir_graph_case(case):
    model, _ = onnx_model(case)
    model = shape_inference.infer_shapes(model)
    types = {}

    def collect(g):
        for vi in list(g.value_info) + list(g.output) + list(g.input):
            types[vi.name] = vi.type
        for node in g.node:
            for a in node.attribute:
                if a.type == a.GRAPH:
                    collect(a.g)
    collect(model.graph)
    counter = iter(range(1 << 30))
    out_type = f"tensor<*x{TYPES[case.out_dtype()][1]}>"
    lines = [f"func.func @{case.id}() -> {out_type} {{"]
    env = {}
    for i, x in enumerate(case.inputs):
        t = mlir_type(x.shape, x.dtype)
        lines.append(f"  %in{i} = hetc.constant {mlir_dense(x)} : {t}")
        env[f"in{i}"] = (f"%in{i}", t)
    mlir_graph(case.nodes, env, types, lines, 2, lambda: f"%v{next(counter)}")
    out, t = env["out"]
    lines.append(f"  %r = hetc.onnx.node \"Identity\"({out}) {{node_name = \"out\"}} : ({t}) -> "
                 f"{out_type}")
    lines.append(f"  return %r : {out_type}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def mlir_case(case):
    if case.nodes:
        return mlir_graph_case(case)
    lines = [f"func.func @{case.id}() -> tensor<*x{TYPES[case.out_dtype()][1]}> {{"]
    operands, types = [], []
    inputs = list(case.inputs)
    for i, x in enumerate(inputs):
        if x is None:
            lines.append(f"  %in{i} = hetc.onnx.none")
            types.append("none")
        else:
            types.append(mlir_type(x.shape, x.dtype))
            lines.append(f"  %in{i} = hetc.constant {mlir_dense(x)} : {types[-1]}")
        operands.append(f"%in{i}")
    attrs = f'node_name = "{case.op}"'
    all_attrs = dict(case.attrs, **case.mlir_attrs)
    if all_attrs:
        attrs += ", onnx_attrs = {" + ", ".join(
            f"{json.dumps(k) if '.' in k else k} = {mlir_attr(v)}" for k, v in all_attrs.items()) + "}"
    out_type = f"tensor<*x{TYPES[case.out_dtype()][1]}>"
    result_types = [f"tensor<*x{TYPES[np.dtype(t)][1]}>" for t in case.types] if case.types \
        else [out_type] * case.results
    result_types[case.result] = out_type
    results = f"%r:{case.results}" if case.results > 1 else "%r"
    lines.append(f'  {results} = hetc.onnx.node "{case.op}"({", ".join(operands)}) {{{attrs}}} : '
                 f'({", ".join(types)}) -> ({", ".join(result_types)})')
    lines.append(f"  return %r{f'#{case.result}' if case.results > 1 else ''} : {out_type}")
    lines.append("}")
    return "\n".join(lines) + "\n"


TOKEN = re.compile(r"\s*(\[|\]|,|0x[0-9A-Fa-f]+|true|false|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|"
                   r"inf|nan))")


def parse_type(text):
    parts = text.split("x")
    elem = parts[-1]
    return [int(d) for d in parts[:-1]], MLIR_TO_NP[elem]


def parse_dense(body, type_text):
    shp, dtype = parse_type(type_text)
    dtype = np.dtype(dtype)
    if body.startswith('"0x'):  # raw little-endian bytes
        raw = bytes.fromhex(body[3:-1])
        if dtype == np.bool_:
            arr = np.frombuffer(raw, np.uint8).astype(np.bool_)
        else:
            arr = np.frombuffer(raw, dtype)
        return (np.broadcast_to(arr, shp) if arr.size == 1 else arr.reshape(shp)).copy()
    if body == "":
        return np.zeros(shp, dtype)
    pos, stack, top = 0, [[]], None

    def scalar(tok):
        if tok in ("true", "false"):
            return tok == "true"
        if tok.startswith("0x"):
            bits = int(tok, 16)
            if dtype.kind == "f":
                return np.array(bits, BITS[dtype]).view(dtype)[()]
            return bits
        if dtype.kind == "f":
            return dtype.type(float(tok))
        return int(tok)

    while pos < len(body):
        m = TOKEN.match(body, pos)
        if not m:
            raise ValueError(f"cannot parse dense literal at {body[pos:pos + 20]!r}")
        tok, pos = m.group(1), m.end()
        if tok == "[":
            stack.append([])
        elif tok == "]":
            top = stack.pop()
            stack[-1].append(top)
        elif tok != ",":
            stack[-1].append(scalar(tok))
    value = stack[0][0]
    if not isinstance(value, list):  # splat
        return np.full(shp, value, dtype)
    return np.array(value, dtype).reshape(shp)


FUNC = re.compile(r"func\.func @(\w+)\(")
RETURN = re.compile(r"^\s*return (%[\w.#]+) :")
DEF = re.compile(r"^\s*(%[\w.#]+) = (.*)$")
CONSTANT = re.compile(r"^hetc\.constant dense<(.*)> : tensor<([^>]*)>$")


def parse_output(text):
    """{function: ("folded", array) or ("unfolded", op line)} of a hetc-opt output."""
    results, name, defs = {}, None, {}
    for line in text.splitlines():
        m = FUNC.search(line)
        if m:
            name, defs = m.group(1), {}
            continue
        m = DEF.match(line)
        if m and name:
            defs[m.group(1)] = m.group(2).strip()
            continue
        m = RETURN.match(line)
        if m and name:
            d = defs.get(m.group(1), "")
            c = CONSTANT.match(d)
            if c:
                try:
                    results[name] = ("folded", parse_dense(c.group(1), c.group(2)))
                except (ValueError, KeyError) as e:
                    results[name] = ("failed", f"hetc folds it to a constant that does not "
                                               f"read back ({e}): {d[:300]}")
            else:
                results[name] = ("unfolded", d)
            name = None
    return results


def hetc_opt_run(binary, path, retries=10, passes=("--hetc-fold-constants",)):
    cmd = [binary, path, *passes, "-split-input-file",
           "--mlir-print-elementsattrs-with-hex-if-larger=-1"]
    for attempt in range(retries):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (PermissionError, OSError) as e:  # the binary being relinked
            if attempt + 1 == retries:
                raise
            print(f"hetc-opt not runnable ({e}); retrying in 30 s", file=sys.stderr)
            time.sleep(30)
            continue
        if proc.returncode in (126, 127) or "Text file busy" in proc.stderr:
            time.sleep(30)
            continue
        return proc
    return proc


def run_hetc(cases, binary, work):
    """{case id: outcome}: single nodes folded by hetc-fold-constants, graphs (loops and
    sequences) by hetc-fold-shapes between two of them."""
    results = run_hetc_batch([c for c in cases if not c.nodes], binary, work, "cases",
                             ("--hetc-fold-constants",))
    results.update(run_hetc_batch([c for c in cases if c.nodes], binary, work, "graphs",
                                  ("--hetc-fold-constants", "--hetc-fold-shapes",
                                   "--hetc-fold-constants")))
    return results


def run_hetc_batch(cases, binary, work, stem, passes):
    if not cases:
        return {}
    path = os.path.join(work, stem + ".mlir")
    starts = []  # (first line of the case, case id)
    with open(path, "w") as f:
        line = 1
        for i, c in enumerate(cases):
            text = mlir_case(c) + ("// -----\n" if i + 1 < len(cases) else "")
            starts.append((line, c.id))
            f.write(text)
            line += text.count("\n")
    proc = hetc_opt_run(binary, path, passes=passes)
    results = parse_output(proc.stdout)
    crashed = proc.returncode < 0 or proc.returncode > 1
    if crashed:
        # Something killed the batch: run each case alone, so that one crash names its case.
        print(f"hetc-opt ended with status {proc.returncode} on the batch; running cases one by "
              "one", file=sys.stderr)
        single = os.path.join(work, "single-" + stem)
        os.makedirs(single, exist_ok=True)

        def one(c):
            p = os.path.join(single, f"{c.id}.mlir")
            with open(p, "w") as f:
                f.write(mlir_case(c))
            r = hetc_opt_run(binary, p, passes=passes)
            got = parse_output(r.stdout).get(c.id)
            if got is None:
                got = ("failed", f"hetc-opt fails on it (status {r.returncode}): "
                                 f"{r.stderr.strip()[-800:]}")
            return c.id, got
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = dict(pool.map(one, cases))
        return results
    # Cases the batch printed nothing for: their diagnostics.
    errors = collections.defaultdict(list)
    for m in re.finditer(r"within split at [^:]*:(\d+) offset :(\d+):\d+: (error: .*)",
                         proc.stderr):
        first = int(m.group(1))
        cid = next((cid for line, cid in reversed(starts) if line <= first + 1), None)
        errors[cid].append(m.group(3))
    for c in cases:
        if c.id not in results:
            msg = "; ".join(errors.get(c.id, [])) or f"no output (status {proc.returncode})"
            results[c.id] = ("failed", f"hetc-opt fails on it: {msg}")
    return results


# ----------------------------------------------------------------------------- comparison


ULPS = collections.defaultdict(float)  # op: the largest float difference seen, in ulps of ort
SIGNED_ZEROS = []  # (case, count): equal zeros of different sign
# Transcendental ops in float64, to say which side a difference comes from.
_erf = np.vectorize(math.erf, otypes=[np.float64])
REF64 = {
    "Cos": np.cos, "Sin": np.sin, "Exp": np.exp, "Log": np.log, "Tanh": np.tanh, "Erf": _erf,
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "Pow": np.power,
}
REF_ULPS = collections.defaultdict(lambda: [0.0, 0.0])  # op: [hetc, ort] max ulps from REF64


def reference_ulps(case, got, ref):
    """Records how far hetc and ONNX Runtime are from the float64 value (normal results)."""
    if case.op not in REF64 or ref.dtype != np.float32:
        return
    args = [np.broadcast_to(x.astype(np.float64), ref.shape) if x.ndim else x.astype(np.float64)
            for x in case.inputs]
    with np.errstate(all="ignore"):
        exact = REF64[case.op](*args)
    normal = np.isfinite(exact) & (np.abs(exact) >= np.finfo(np.float32).tiny) & \
        (np.abs(exact) <= np.finfo(np.float32).max)
    if not normal.any():
        return
    ulp = np.spacing(np.abs(exact[normal]).astype(np.float32)).astype(np.float64)
    for side, x in enumerate((got, ref)):
        err = np.abs(x.astype(np.float64)[normal] - exact[normal]) / ulp
        err = err[np.isfinite(err)]
        if err.size:
            REF_ULPS[case.op][side] = max(REF_ULPS[case.op][side], float(err.max()))


def compare(case, ref, got):
    """None when equal, else a description of the difference."""
    if got.dtype != ref.dtype:
        return f"element type: hetc {got.dtype}, ort {ref.dtype}"
    if tuple(got.shape) != tuple(ref.shape):
        return f"shape: hetc {list(got.shape)}, ort {list(ref.shape)}"
    if ref.dtype.kind != "f":
        bad = got != ref
    else:
        g, r = got.astype(np.float64), ref.astype(np.float64)
        nan_g, nan_r = np.isnan(g), np.isnan(r)
        with np.errstate(invalid="ignore"):
            if case.tol == EXACT:
                close = g == r
            else:
                ulp = np.spacing(np.abs(ref).astype(ref.dtype)).astype(np.float64)
                tol = 4 * ulp + 1e-6
                if case.tol == SUM and case.bound is not None:
                    tol = tol + np.broadcast_to(case.bound, r.shape)
                close = (g == r) | (np.abs(g - r) <= tol)
        bad = ~((nan_g & nan_r) | (~nan_g & ~nan_r & close))
        finite = np.isfinite(g) & np.isfinite(r) & ~bad
        if case.tol == ULP and got.dtype == ref.dtype and got.shape == ref.shape:
            reference_ulps(case, got, ref)
        elif case.tol == SUM and finite.any():
            with np.errstate(all="ignore"):
                ulp = np.spacing(np.maximum(np.abs(ref), np.abs(got)).astype(ref.dtype)).astype(
                    np.float64)
                ULPS[case.op] = max(ULPS[case.op], float(np.max(np.abs(g - r)[finite] /
                                                                   ulp[finite])))
        zeros = (g == 0) & (r == 0) & (np.signbit(g) != np.signbit(r))
        if zeros.any():
            SIGNED_ZEROS.append((case, int(zeros.sum())))
    if not bad.any():
        return None
    where = [tuple(int(i) for i in ix) for ix in zip(*np.nonzero(bad))][:8]
    detail = ", ".join(f"{list(w)}: hetc {got[w]!r} ort {ref[w]!r}" for w in where)
    return f"{int(bad.sum())} of {bad.size} elements differ ({detail})"


def show(x):
    if x is None:
        return "(absent)"
    with np.printoptions(threshold=200, linewidth=110, precision=9):
        return f"{x.dtype} {list(x.shape)} " + np.array2string(x, separator=", ").replace(
            "\n", "\n      ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random", type=int, default=10, help="random cases per op (plus edge cases)")
    ap.add_argument("--ops", help="comma-separated ops to check (default: all)")
    ap.add_argument("--hetc-opt", default=os.environ.get(
        "HETC_OPT", os.path.join(REPO, "build", "bin", "hetc-opt")))
    ap.add_argument("--keep", help="write the cases (MLIR, ONNX Runtime JSON) to this folder")
    ap.add_argument("--verbose", action="store_true", help="list every case")
    args = ap.parse_args()

    ops = sorted(GENERATORS) if not args.ops else args.ops.split(",")
    unknown = [op for op in ops if op not in GENERATORS]
    if unknown:
        sys.exit(f"no generator for {unknown}")
    cases = []
    for op in ops:
        rng = np.random.default_rng([args.seed, sum(op.encode())])
        for i, c in enumerate(GENERATORS[op](rng, args.random)):
            c.id = f"{op}_{i}"
            cases.append(c)

    work = args.keep or tempfile.mkdtemp(prefix="hetc-interp-")
    os.makedirs(work, exist_ok=True)
    try:
        ort = run_ort(cases, work)
        hetc = run_hetc(cases, args.hetc_opt, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    agree, not_evaluated, differ, dropped = [], [], [], []
    for c in cases:
        status, ref = ort[c.id]
        kind, got = hetc[c.id]
        if status == "error" and ("NOT_IMPLEMENTED" in ref or "Could not find an implementation"
                                  in ref):
            dropped.append((c, ref))
            continue
        if kind == "failed":
            differ.append((c, got, None, None))
        elif status == "error" and kind == "unfolded":
            agree.append((c, "both reject"))
        elif status == "error":
            differ.append((c, f"ONNX Runtime rejects the node ({ref.strip()[:300]}), "
                              "hetc folds it", got, None))
        elif kind == "unfolded" and c.nodes:
            # A graph of constants that is not folded: a loop or sequence hetc-fold-shapes left.
            differ.append((c, f"hetc-fold-shapes leaves it unfolded: {got[:300]}", None, ref))
        elif kind == "unfolded":
            not_evaluated.append(c)
        else:
            diff = compare(c, ref, got)
            if diff:
                differ.append((c, diff, got, ref))
            else:
                agree.append((c, ""))
        if args.verbose:
            print(f"{c.id:22} {c.label}")

    for c, why, got, ref in differ:
        print(f"DIFFER {c.op} [{c.id}] {c.label}: {why}")
        for i, x in enumerate(c.inputs):
            print(f"    in{i}: {show(x)}")
        if c.attrs:
            attrs = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                     for k, v in c.attrs.items()}
            print(f"    attrs: {attrs}")
        if got is not None:
            print(f"    hetc: {show(got)}")
        if ref is not None:
            print(f"    ort:  {show(ref)}")
    if not_evaluated:
        print("Not evaluated by hetc (ONNX Runtime computes them):")
        by_op = collections.defaultdict(list)
        for c in not_evaluated:
            by_op[c.op].append(f"{c.label} [{c.id}]")
        for op in sorted(by_op):
            print(f"  {op}: " + "; ".join(by_op[op]))
    both = [c for c, note in agree if note == "both reject"]
    if both:
        print("Rejected by both (invalid nodes): " + "; ".join(f"{c.op} {c.label}" for c in both))
    for c, why in dropped:
        print(f"Dropped (ONNX Runtime has no kernel): {c.op} {c.label}: {why.strip()[:200]}")
    if SIGNED_ZEROS:
        print("Agree up to the sign of zero (-0 == +0 here): " + "; ".join(
            f"{c.op} {c.label} ({n})" for c, n in SIGNED_ZEROS))
    if REF_ULPS:
        print("Transcendental ops, largest error from the float64 value (normal float32 results) "
              "in ulps, hetc / ONNX Runtime: " + ", ".join(
                  f"{op} {h:.2g} / {o:.2g}" for op, (h, o) in sorted(REF_ULPS.items())))
    inexact = {op: u for op, u in ULPS.items() if u > 0}
    if inexact:
        print("Sums, largest difference from ONNX Runtime (within the tolerance), in its ulps: " +
              ", ".join(f"{op} {u:.3g}" for op, u in sorted(inexact.items())))
    total = len(agree) + len(not_evaluated) + len(differ)
    print(f"{len(ops)} ops, {total} cases: {len(agree)} agree, {len(not_evaluated)} not evaluated, "
          f"{len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
