#!/usr/bin/python3
"""A large Llama-shaped export with random weights in external data, written without torch and
without ever holding more than one chunk of one tensor, for checking what compiling a big model
costs in memory.

    /usr/bin/python3 models/exports/large_random.py --out DIR [--layers 10 --hidden 4096
        --intermediate 14336 --heads 32 --kv-heads 8 --vocab 128256 --seed 0]

Writes DIR/model.onnx (the graph, a few hundred KB) and DIR/model.onnx.data (float32 weights,
each tensor at a 4096-byte aligned offset). The defaults are Llama 3 8B's shape cut to 10 layers:
12.9 GB of weights, the largest tensor (the embedding table and the lm_head, each 2.1 GB) among
them. The graph is ONNX Runtime GenAI's builder form (SimplifiedLayerNormalization, MatMul on
[in, out] weights, GroupQueryAttention with the rotation inside, the attn_mask_reformat
subgraph), the same form as ort_genai_llama.py's. The weights are N(0, 0.02) and the norms 1 +
N(0, 0.02): the model is noise, which is all a memory measurement needs.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
ALIGN = 4096
CHUNK = 1 << 24  # elements generated at a time


class ExternalWriter:
    """Appends float32 tensors to one external data file and returns their TensorProtos."""

    def __init__(self, path: str, seed: int):
        self.path = path
        self.file = open(path, "wb")
        self.offset = 0
        self.rng = np.random.default_rng(seed)
        self.inits = []

    def random(self, name: str, shape, mean: float = 0.0) -> str:
        count = int(np.prod(shape))
        pad = -self.offset % ALIGN
        self.file.write(b"\0" * pad)
        self.offset += pad
        start = self.offset
        left = count
        while left:
            n = min(left, CHUNK)
            chunk = self.rng.standard_normal(n, dtype=np.float32)
            chunk *= np.float32(0.02)
            if mean:
                chunk += np.float32(mean)
            chunk.tofile(self.file)
            left -= n
        self.offset += count * 4
        t = onnx.TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", os.path.basename(self.path)), ("offset", str(start)),
                           ("length", str(count * 4))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.inits.append(t)
        return name

    def inline(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def close(self):
        self.file.close()


def build(args) -> onnx.ModelProto:
    L, H, I = args.layers, args.hidden, args.intermediate
    N, KV, V = args.heads, args.kv_heads, args.vocab
    D = H // N
    w = ExternalWriter(os.path.join(args.out, "model.onnx.data"), args.seed)
    nodes = []

    def node(op, inputs, outputs, name, domain="", **attrs):
        nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def linear(x, name, weight, k, n):
        return node("MatMul", [x, w.random(weight, [k, n])], [f"{name}/MatMul/output_0"],
                    f"{name}/MatMul")

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                            ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch_size", "sequence_length", V])]
    for i in range(L):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{kind}", TensorProto.FLOAT,
                ["batch_size", KV, "past_sequence_length", D]))
            outputs.append(helper.make_tensor_value_info(
                f"present.{i}.{kind}", TensorProto.FLOAT,
                ["batch_size", KV, "total_sequence_length", D]))

    p = "/model/attn_mask_reformat/attn_mask_subgraph"
    s = node("ReduceSum", ["attention_mask", w.inline(f"{p}/axes", np.array([1], np.int64))],
             [f"{p}/ReduceSum/output_0"], f"{p}/ReduceSum", keepdims=0)
    s = node("Sub", [s, w.inline(f"{p}/one", np.array(1, np.int64))], [f"{p}/Sub/output_0"],
             f"{p}/Sub")
    seqlens_k = node("Cast", [s], [f"{p}/Sub/Cast/output_0"], f"{p}/Sub/Cast", to=TensorProto.INT32)
    shape = node("Shape", ["attention_mask"], [f"{p}/Shape/output_0"], f"{p}/Shape")
    t = node("Gather", [shape, w.inline(f"{p}/index", np.array(1, np.int64))],
             [f"{p}/Gather/output_0"], f"{p}/Gather", axis=0)
    total = node("Cast", [t], [f"{p}/Gather/Cast/output_0"], f"{p}/Gather/Cast",
                 to=TensorProto.INT32)

    positions = np.arange(args.max_positions, dtype=np.float32)
    inv_freq = 1.0 / (500000.0 ** (np.arange(0, D, 2, dtype=np.float32) / D))
    freqs = np.outer(positions, inv_freq).astype(np.float32)
    cos = w.inline("cos_cache", np.cos(freqs).astype(np.float32))
    sin = w.inline("sin_cache", np.sin(freqs).astype(np.float32))

    x = node("Gather", [w.random("model.embed_tokens.weight", [V, H]), "input_ids"],
             ["/model/embed_tokens/Gather/output_0"], "/model/embed_tokens/Gather")
    normed = node("SimplifiedLayerNormalization",
                  [x, w.random("model.layers.0.input_layernorm.weight", [H], 1.0)],
                  ["/model/layers.0/input_layernorm/output_0"],
                  "/model/layers.0/input_layernorm/LayerNorm", axis=-1, epsilon=1e-5, stash_type=1)
    residual = x
    for i in range(L):
        pre, n = f"model.layers.{i}", f"/model/layers.{i}"
        q = linear(normed, f"{n}/attn/q_proj", f"{pre}.self_attn.q_proj.weight", H, N * D)
        k = linear(normed, f"{n}/attn/k_proj", f"{pre}.self_attn.k_proj.weight", H, KV * D)
        v = linear(normed, f"{n}/attn/v_proj", f"{pre}.self_attn.v_proj.weight", H, KV * D)
        attn = node("GroupQueryAttention",
                    [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k,
                     total, cos, sin],
                    [f"{n}/attn/GroupQueryAttention/output_0", f"present.{i}.key",
                     f"present.{i}.value"],
                    f"{n}/attn/GroupQueryAttention", domain=MS, num_heads=N, kv_num_heads=KV,
                    scale=float(D ** -0.5), local_window_size=-1, do_rotary=1,
                    rotary_interleaved=0, softcap=0.0)[0]
        o = linear(attn, f"{n}/attn/o_proj", f"{pre}.self_attn.o_proj.weight", N * D, H)
        normed, _, _, residual = node(
            "SkipSimplifiedLayerNormalization",
            [residual, o, w.random(f"{pre}.post_attention_layernorm.weight", [H], 1.0)],
            [f"{n}/post_attention_layernorm/output_0", "", "",
             f"{n}/post_attention_layernorm/output_3"],
            f"{n}/post_attention_layernorm/SkipLayerNorm", domain=MS, epsilon=1e-5)
        gate = linear(normed, f"{n}/mlp/gate_proj", f"{pre}.mlp.gate_proj.weight", H, I)
        sig = node("Sigmoid", [gate], [f"{n}/mlp/act_fn/Sigmoid/output_0"],
                   f"{n}/mlp/act_fn/Sigmoid")
        act = node("Mul", [gate, sig], [f"{n}/mlp/act_fn/Mul/output_0"], f"{n}/mlp/act_fn/Mul")
        up = linear(normed, f"{n}/mlp/up_proj", f"{pre}.mlp.up_proj.weight", H, I)
        prod = node("Mul", [act, up], [f"{n}/mlp/Mul/output_0"], f"{n}/mlp/Mul")
        down = linear(prod, f"{n}/mlp/down_proj", f"{pre}.mlp.down_proj.weight", I, H)
        nxt = f"model.layers.{i + 1}.input_layernorm.weight" if i + 1 < L else "model.norm.weight"
        where = f"/model/layers.{i + 1}/input_layernorm" if i + 1 < L else "/model/norm"
        normed, _, _, residual = node(
            "SkipSimplifiedLayerNormalization", [residual, down, w.random(nxt, [H], 1.0)],
            [f"{where}/output_0", "", "", f"{where}/output_3"], f"{where}/SkipLayerNorm",
            domain=MS, epsilon=1e-5)
    node("MatMul", [normed, w.random("lm_head.MatMul.weight", [H, V])], ["logits"],
         "/lm_head/MatMul")
    w.close()

    graph = helper.make_graph(nodes, "main_graph", inputs, outputs, initializer=w.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)],
                              producer_name="large_random.py")
    model.ir_version = 8
    return model, w.offset


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=14336)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--max-positions", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model, data_bytes = build(args)
    onnx.save_model(model, os.path.join(args.out, "model.onnx"))
    print(f"wrote {args.out}/model.onnx and {data_bytes} bytes of external data")


if __name__ == "__main__":
    main()
