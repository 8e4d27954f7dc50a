"""A small NumPy interpreter for the ONNX graphs that export.py produces.

There is no onnxruntime here; this evaluates an exported model.onnx directly, so the ONNX file
itself (not only the PyTorch module it came from) is checked against PyTorch, at shapes other
than the ones the exporter traced with. It covers the op set of a Llama export from
torch.onnx (opset 13-17) and refuses anything else by name.
"""

import os
from typing import Dict, List

import numpy as np
import onnx
from onnx import numpy_helper


def _attrs(node) -> Dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _np_dtype(onnx_type: int):
    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_type]


def _slice(x, starts, ends, axes=None, steps=None):
    axes = list(range(len(starts))) if axes is None else [int(a) % x.ndim for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a] = slice(int(s), int(e), int(st))
    return x[tuple(index)]


def _softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def _reshape(x, shape, allowzero=0):
    shape = [int(s) for s in shape]
    if not allowzero:
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _run_node(op: str, ins: List, at: Dict):
    if op == "Constant":
        return [numpy_helper.to_array(at["value"])]
    if op == "Identity":
        return [ins[0]]
    if op in ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "Max", "Min", "And", "Or"):
        a, b = ins[0], ins[1]
        if op == "Add":
            r = a + b
        elif op == "Sub":
            r = a - b
        elif op == "Mul":
            r = a * b
        elif op == "Div":
            r = (a // b) if np.issubdtype(a.dtype, np.integer) else a / b
        elif op == "Pow":
            r = np.power(a, b)
        elif op == "Equal":
            r = a == b
        elif op == "Less":
            r = a < b
        elif op == "Greater":
            r = a > b
        elif op == "Max":
            r = a
            for other in ins[1:]:
                r = np.maximum(r, other)
        elif op == "Min":
            r = a
            for other in ins[1:]:
                r = np.minimum(r, other)
        elif op == "And":
            r = np.logical_and(a, b)
        else:
            r = np.logical_or(a, b)
        if op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"):
            r = np.asarray(r).astype(a.dtype, copy=False)
        return [np.asarray(r)]
    if op == "Neg":
        return [-ins[0]]
    if op == "Sqrt":
        return [np.sqrt(ins[0])]
    if op == "Reciprocal":
        return [(1.0 / ins[0]).astype(ins[0].dtype)]
    if op == "Sigmoid":
        return [(1.0 / (1.0 + np.exp(-ins[0]))).astype(ins[0].dtype)]
    if op == "Cos":
        return [np.cos(ins[0])]
    if op == "Sin":
        return [np.sin(ins[0])]
    if op == "Not":
        return [np.logical_not(ins[0])]
    if op == "Cast":
        return [ins[0].astype(_np_dtype(at["to"]))]
    if op == "Shape":
        return [np.array(ins[0].shape, dtype=np.int64)]
    if op == "Gather":
        return [np.take(ins[0], ins[1].astype(np.int64), axis=at.get("axis", 0))]
    if op == "Unsqueeze":
        axes = sorted(int(a) for a in ins[1].reshape(-1))
        r = ins[0]
        for a in axes:
            r = np.expand_dims(r, a if a >= 0 else a + r.ndim + 1)
        return [r]
    if op == "Squeeze":
        if len(ins) > 1 and ins[1] is not None:
            return [np.squeeze(ins[0], axis=tuple(int(a) for a in ins[1].reshape(-1)))]
        return [np.squeeze(ins[0])]
    if op == "Concat":
        return [np.concatenate(ins, axis=at["axis"])]
    if op == "Reshape":
        return [_reshape(ins[0], ins[1], at.get("allowzero", 0))]
    if op == "Transpose":
        return [np.transpose(ins[0], at.get("perm"))]
    if op == "Expand":
        shape = [int(s) for s in ins[1]]
        out_shape = np.broadcast_shapes(ins[0].shape, tuple(shape))
        return [np.broadcast_to(ins[0], out_shape).copy()]
    if op == "ConstantOfShape":
        value = numpy_helper.to_array(at["value"]) if "value" in at else np.zeros(1, np.float32)
        return [np.full([int(s) for s in ins[0]], value.reshape(-1)[0], dtype=value.dtype)]
    if op == "Range":
        return [np.arange(ins[0], ins[1], ins[2]).astype(ins[0].dtype)]
    if op == "Slice":
        axes = ins[3] if len(ins) > 3 and ins[3] is not None else None
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else None
        return [_slice(ins[0], ins[1], ins[2], axes, steps)]
    if op == "Where":
        return [np.where(ins[0], ins[1], ins[2])]
    if op == "MatMul":
        return [np.matmul(ins[0], ins[1])]
    if op == "Gemm":
        a, b = ins[0], ins[1]
        a = a.T if at.get("transA", 0) else a
        b = b.T if at.get("transB", 0) else b
        r = at.get("alpha", 1.0) * (a @ b)
        if len(ins) > 2 and ins[2] is not None:
            r = r + at.get("beta", 1.0) * ins[2]
        return [r.astype(a.dtype)]
    if op == "ReduceMean":
        axes = at.get("axes")
        if axes is None and len(ins) > 1:
            axes = [int(a) for a in ins[1]]
        return [np.mean(ins[0], axis=tuple(axes) if axes is not None else None,
                        keepdims=bool(at.get("keepdims", 1))).astype(ins[0].dtype)]
    if op == "Softmax":
        return [_softmax(ins[0], at.get("axis", -1))]
    if op == "Trilu":
        k = int(ins[1]) if len(ins) > 1 and ins[1] is not None else 0
        return [np.triu(ins[0], k) if at.get("upper", 1) else np.tril(ins[0], k)]
    raise NotImplementedError(f"onnx_eval: op {op} is not supported")


class OnnxModel:
    def __init__(self, path: str):
        self.model = onnx.load(path, load_external_data=True)
        self.graph = self.model.graph
        self.initializers = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.input_names = [i.name for i in self.graph.input if i.name not in self.initializers]
        self.output_names = [o.name for o in self.graph.output]

    def run(self, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise ValueError(f"missing inputs: {missing}")
        env = dict(self.initializers)
        env.update(feeds)
        env[""] = None
        # Free intermediates after their last use to keep memory flat.
        last_use = {}
        for i, node in enumerate(self.graph.node):
            for name in node.input:
                last_use[name] = i
        keep = set(self.output_names) | set(self.initializers) | set(feeds) | {""}
        for i, node in enumerate(self.graph.node):
            ins = [env[name] for name in node.input]
            outs = _run_node(node.op_type, ins, _attrs(node))
            for name, value in zip(node.output, outs):
                env[name] = value
            for name in node.input:
                if last_use.get(name) == i and name not in keep:
                    env.pop(name, None)
        return {name: env[name] for name in self.output_names}


# (batch, new tokens, past length, left padding of the first sequence): shapes other than the
# exporter's example (2, 3, 4), a first step without past, a decode step, and padding.
VERIFY_CASES = [(1, 5, 0, 0), (3, 1, 7, 0), (2, 4, 6, 2)]


def verify_against_torch(model_dir: str, cases=VERIFY_CASES, seed: int = 7) -> float:
    """Runs DIR/model.onnx with this interpreter and the PyTorch model from DIR/config.json +
    weights.pt on the same random inputs; returns the worst error relative to the largest
    |reference| of each output, and raises AssertionError when it exceeds 1e-4."""
    import torch
    from llama import load_model

    torch_model = load_model(model_dir)
    c = torch_model.config
    onnx_model = OnnxModel(os.path.join(model_dir, "model.onnx"))
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    for batch, seq, past, pad in cases:
        input_ids = torch.randint(0, c.vocab, (batch, seq), generator=gen)
        attention_mask = torch.ones(batch, past + seq, dtype=torch.int64)
        attention_mask[0, :pad] = 0
        position_ids = torch.arange(past, past + seq).unsqueeze(0).repeat(batch, 1)
        shape = (batch, c.kv_heads, past, c.head_dim)
        pkv = tuple((torch.randn(shape, generator=gen), torch.randn(shape, generator=gen))
                    for _ in range(c.layers))
        with torch.no_grad():
            logits, presents = torch_model(input_ids, attention_mask, position_ids, pkv)
        feeds = {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy(),
                 "position_ids": position_ids.numpy()}
        expected = {"logits": logits.numpy()}
        for i in range(c.layers):
            feeds[f"past_key_values.{i}.key"] = pkv[i][0].numpy()
            feeds[f"past_key_values.{i}.value"] = pkv[i][1].numpy()
            expected[f"present.{i}.key"] = presents[i][0].numpy()
            expected[f"present.{i}.value"] = presents[i][1].numpy()
        got = onnx_model.run(feeds)
        for name, ref in expected.items():
            out = got[name]
            if out.shape != ref.shape:
                raise AssertionError(f"case {(batch, seq, past, pad)}: {name} has shape {out.shape}, "
                                     f"PyTorch gives {ref.shape}")
            if not np.all(np.isfinite(out)):
                raise AssertionError(f"case {(batch, seq, past, pad)}: {name} is not finite")
            err = float(np.max(np.abs(out - ref)) / max(np.max(np.abs(ref)), 1e-30))
            worst = max(worst, err)
            if err > 1e-4:
                raise AssertionError(f"case {(batch, seq, past, pad)}: {name} differs from PyTorch "
                                     f"by {err:.3g} (relative to max |PyTorch|)")
    return worst


if __name__ == "__main__":
    import argparse
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description="Check an exported model.onnx against PyTorch.")
    p.add_argument("--model-dir", required=True)
    a = p.parse_args()
    err = verify_against_torch(a.model_dir)
    print(f"{a.model_dir}/model.onnx matches PyTorch on {len(VERIFY_CASES)} shape cases "
          f"(worst relative error {err:.2e})")
