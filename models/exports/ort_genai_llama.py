#!/usr/bin/python3
"""A Llama graph in the fused form of ONNX Runtime GenAI's model builder, written with onnx.helper
(no torch export), on the same seeded weights as hf_llama.py's module.

    /usr/bin/python3 models/exports/ort_genai_llama.py --out DIR [--dtype float32|float16]
        [--gqa-inputs] [--no-shuffle] [--shuffle-seed 0] [hf_llama.py's size and variant flags]
    /usr/bin/python3 models/exports/hf_llama.py reference --model-dir DIR --out ref.json ...

Weights: the module is hf_llama.build_model(config) (torch.manual_seed(config.seed)); its
state_dict is written to DIR/weights.pt and config.json holds hf_llama's Config fields, so
`hf_llama.py reference --model-dir DIR` is the PyTorch reference of this very file.

Graph (domain com.microsoft unless noted), as the builder writes it:
  * embed_tokens: Gather;
  * layer 0's input norm: SimplifiedLayerNormalization (ai.onnx domain, as ONNX Runtime registers
    it), every later norm SkipSimplifiedLayerNormalization (residual + norm, the sum as its 4th
    output), the final norm too;
  * q/k/v/o and the MLP: MatMul on transposed weights ([in, out]); --qkv-bias adds Add nodes;
    SiLU as Sigmoid + Mul;
  * RotaryEmbedding on q and k ([batch, seq, heads * head_dim]) with cos_cache/sin_cache
    initializers [max_position, rotary_dim / 2] and the position_ids input; or, with
    --rotary-in-attention (the builder's default for CPU and CUDA today), no RotaryEmbedding and
    no position_ids: GroupQueryAttention's do_rotary = 1 with the caches as its inputs 7 and 8;
  * --packed-qkv (also the builder's default there): q, k and v as one MatMul whose [B, S,
    (heads + 2 kv_heads) head_dim] result is GroupQueryAttention's query, key and value empty;
  * GroupQueryAttention with seqlens_k = ReduceSum(attention_mask) - 1 and total_sequence_length =
    Shape(attention_mask)[1] (int32) computed in the graph (or, with --gqa-inputs, taken as graph
    inputs instead of attention_mask); past/present key/value in BNSH, growing with each step;
  * lm_head: MatMul; outputs logits and present.{i}.key/value.
The nodes are shuffled (fixed seed) out of topological order, as the builder's files are.
"""

import argparse
import os
import random
import sys
from dataclasses import asdict

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import hf_llama  # noqa: E402
from ort_quantize_4bits import pack_nibbles  # noqa: E402

MS = "com.microsoft"


def bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, rounded to nearest even (as torch.bfloat16 rounds)."""
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


class GraphBuilder:
    def __init__(self, np_dtype):
        self.nodes, self.inits = [], []
        self.np_dtype = np_dtype  # a numpy float type, or "bfloat16"

    def init(self, name, array, keep_dtype=False):
        array = np.asarray(array)
        if not keep_dtype and array.dtype.kind == "f" and self.np_dtype == "bfloat16":
            self.inits.append(helper.make_tensor(name, TensorProto.BFLOAT16, array.shape,
                                                 bfloat16_bits(array).tobytes(), raw=True))
            return name
        if not keep_dtype and array.dtype.kind == "f":
            array = array.astype(self.np_dtype)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def node(self, op, inputs, outputs, name, domain="", **attrs):
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs


def quantize_int4(weight: np.ndarray, block: int, symmetric: bool):
    """A [N, K] weight in 4-bit blocks along K as ONNX Runtime's MatMulNBits holds it, quantized
    here (the builder's quantizer is its own; the file format is the contract): per block of
    `block` k, asymmetric: lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / 15,
    zero point zp = clip(round(-lo / scale), 0, 15), q = clip(round(w / scale) + zp, 0, 15);
    symmetric: scale = max |w| / 7, zp = 8 (MatMulNBits' default, so no zero_points input),
    q = clip(round(w / scale) + 8, 0, 15); a block of zeros: scale 0, q = zp. round is half to even
    (numpy's). Returns (q [N, blocks * block] uint8, scales [N, blocks] float32, zp [N, blocks]
    uint8); K is padded to whole blocks with zeros, which quantize to zp."""
    n, k = weight.shape
    blocks = (k + block - 1) // block
    w = np.zeros((n, blocks * block), dtype=np.float32)
    w[:, :k] = weight
    w = w.reshape(n, blocks, block)
    if symmetric:
        scale = np.abs(w).max(axis=2) / np.float32(7)
        zp = np.full((n, blocks), 8, dtype=np.float32)
    else:
        lo = np.minimum(w.min(axis=2), 0)
        hi = np.maximum(w.max(axis=2), 0)
        scale = (hi - lo) / np.float32(15)
        safe = np.where(scale > 0, scale, 1).astype(np.float32)
        zp = np.where(scale > 0, np.clip(np.round(-lo / safe), 0, 15), 0).astype(np.float32)
    safe = np.where(scale > 0, scale, 1).astype(np.float32)[:, :, None]
    q = np.where(scale[:, :, None] > 0, np.clip(np.round(w / safe) + zp[:, :, None], 0, 15),
                 zp[:, :, None])
    return (q.reshape(n, blocks * block).astype(np.uint8), scale.astype(np.float32),
            zp.astype(np.uint8))


def dequantize_int4(q, scales, zp, k):
    n, padded = q.shape
    block = padded // scales.shape[1]
    w = (q.reshape(n, -1, block).astype(np.float32) - zp[:, :, None].astype(np.float32)) \
        * scales[:, :, None]
    return w.reshape(n, padded)[:, :k]


def quantize_int8(weight: np.ndarray):
    """A [N, K] weight in int8 with a scale per output row n, as QDQ exports store weights for
    MatMul (symmetric, zero point 0): scale = max |w| / 127, q = round(w * (127 / max |w|)) in
    float32, half to even (hetc's --weights int8 quantizer; a zero row has scale 0, q 0)."""
    largest = np.abs(weight).max(axis=1).astype(np.float32)
    safe = np.where(largest > 0, largest, 1).astype(np.float32)
    inverse = (np.float32(127) / safe).astype(np.float32)
    q = np.where(largest[:, None] > 0, np.clip(np.round(weight * inverse[:, None]), -127, 127), 0)
    return q.astype(np.int8), (largest / np.float32(127)).astype(np.float32)


def dynamic_linear(g, x, name, quantized, unsigned: bool, activations: dict):
    """ONNX Runtime's quantize_dynamic form of a linear (its QOperator MatMulInteger): x quantized
    at run time by DynamicQuantizeLinear (uint8, a scale and zero point for the whole tensor, one
    node per tensor however many linears read it), MatMulInteger(x_q, Q, x_zp, zp) with Q = q^T
    [K, N] int8 (zero point 0) or uint8 (128) and a zero point per output column, Cast to float,
    times Mul(x_scale, scale) with a scale per output column."""
    q, scale = quantized
    if x not in activations:
        activations[x] = g.node("DynamicQuantizeLinear", [x],
                                [f"{x}_quantized", f"{x}_scale", f"{x}_zero_point"],
                                f"{x}_QuantizeLinear")
    stored = q.T.astype(np.int16) + (128 if unsigned else 0)
    dtype = np.uint8 if unsigned else np.int8
    zero = np.full(q.shape[0], 128 if unsigned else 0, dtype=dtype)
    integer = g.node("MatMulInteger",
                     [f"{x}_quantized", g.init(f"{name}.qweight", stored.astype(dtype),
                                               keep_dtype=True),
                      f"{x}_zero_point", g.init(f"{name}.zero_point", zero, keep_dtype=True)],
                     [f"{name}/MatMul/output_0_quantized"], f"{name}/MatMul_quant")
    cast = g.node("Cast", [integer], [f"{name}/MatMul/output_0_quantized_cast_output"],
                  f"{name}/MatMul_quant_output_0_cast", to=onnx.TensorProto.FLOAT)
    scales = g.node("Mul", [f"{x}_scale", g.init(f"{name}.scale", scale, keep_dtype=True)],
                    [f"{name}/MatMul_quant_scales_mul:0"], f"{name}/MatMul_quant_scales_mul")
    return g.node("Mul", [cast, scales], [f"{name}/MatMul/output_0"],
                  f"{name}/MatMul_quant_output_scale_mul")


def dequantize_linear(g, x, name, quantized, unsigned: bool):
    """MatMul(x, DequantizeLinear(Q, scale, zero point, axis=1)) with Q = q^T [K, N]: int8 with zero
    point 0, or (unsigned) uint8 with zero point 128."""
    q, scale = quantized
    stored = q.T.astype(np.int16) + (128 if unsigned else 0)
    dtype = np.uint8 if unsigned else np.int8
    zero = np.full(q.shape[0], 128 if unsigned else 0, dtype=dtype)
    w = g.node("DequantizeLinear",
               [g.init(f"{name}.qweight", stored.astype(dtype), keep_dtype=True),
                g.init(f"{name}.scale", scale, keep_dtype=True),
                g.init(f"{name}.zero_point", zero, keep_dtype=True)],
               [f"{name}/DequantizeLinear/output_0"], f"{name}/DequantizeLinear", axis=1)
    return g.node("MatMul", [x, w], [f"{name}/MatMul/output_0"], f"{name}/MatMul")


def pack_4bit(values: np.ndarray) -> bytes:
    """ONNX's INT4/UINT4 raw_data: the elements in row-major order two to a byte, the first in the
    low nibble (an odd count leaves the last high nibble 0)."""
    flat = (values.reshape(-1).astype(np.int16) & 0x0F).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()


def four_bit_tensor(name: str, values: np.ndarray, signed: bool) -> onnx.TensorProto:
    """An INT4 (22) or UINT4 (21) initializer. The ONNX library here predates the 4-bit types
    (1.16), so the proto is filled by hand: its data_type is an int32 field either way."""
    t = onnx.TensorProto()
    t.name = name
    t.data_type = 22 if signed else 21
    t.dims.extend(values.shape)
    t.raw_data = pack_4bit(values)
    return t


def dequantize_linear_4bit(g, x, name, quantized, symmetric: bool, k: int, signed: bool,
                           out: str = None):
    """MatMul(x, DequantizeLinear(Q [K, N], scale, zero point)) of opset 21 for a weight
    quantize_int4 gave: with blocks (block < K), axis 0 and block_size, the scale and zero point
    [ceil(K / block), N]; with one block over all of K, a scale per output column (axis 1, no
    block_size), scale [N]. Signed int4 holds q - 8 and its zero point zp - 8 (absent when
    symmetric: 0); uint4 holds q and zp (8 when symmetric)."""
    q, scales, zp = quantized
    n, padded = q.shape
    blocks = scales.shape[1]
    block = padded // blocks
    shift = 8 if signed else 0
    stored = q[:, :k].T.astype(np.int16) - shift
    g.inits.append(four_bit_tensor(f"{name}.qweight", stored, signed))
    inputs = [f"{name}.qweight"]
    per_column = blocks == 1 and block >= k
    scale = scales.reshape(n) if per_column else scales.T.copy()
    inputs.append(g.init(f"{name}.scale", scale, keep_dtype=True))
    if not (symmetric and signed):
        zero = zp.astype(np.int16) - shift
        g.inits.append(four_bit_tensor(f"{name}.zero_point",
                                       zero.reshape(n) if per_column else zero.T, signed))
        inputs.append(f"{name}.zero_point")
    attrs = {"axis": 1} if per_column else {"axis": 0, "block_size": block}
    w = g.node("DequantizeLinear", inputs, [f"{name}/DequantizeLinear/output_0"],
               f"{name}/DequantizeLinear", **attrs)
    return g.node("MatMul", [x, w], [out or f"{name}/MatMul/output_0"], f"{name}/MatMul")


def matmul_nbits(g, x, name, quantized, symmetric: bool, k: int, out: str = None):
    """MatMulNBits(x, B, scales[, zero_points]) for a weight quantize_int4 gave: B [N, blocks,
    block / 2] with element k of a block in byte k / 2, the even one in the low nibble; zero
    points [N * ceil(blocks / 2)] packed the same way, a row's first block in a new byte."""
    q, scales, zp = quantized
    n, padded = q.shape
    blocks = scales.shape[1]
    block = padded // blocks
    packed = pack_nibbles(q).reshape(n, blocks, block // 2)
    inputs = [x, g.init(f"{name}.qweight", packed, keep_dtype=True),
              g.init(f"{name}.scales", scales.reshape(-1))]  # the activations' type
    if not symmetric:
        zp_padded = np.zeros((n, blocks + blocks % 2), dtype=np.uint8)
        zp_padded[:, :blocks] = zp
        inputs.append(g.init(f"{name}.qzeros", pack_nibbles(zp_padded).reshape(-1),
                             keep_dtype=True))
    return g.node("MatMulNBits", inputs, [out or f"{name}/MatMul/output_0"], f"{name}/MatMul", domain=MS,
                  K=k, N=n, bits=4, block_size=block, accuracy_level=0)


def rope_caches(config: hf_llama.Config):
    """cos/sin [max_position, rotary_dim / 2] from the module's own inv_freq (scaling applied)."""
    inv_freq = hf_llama.default_inv_freq(config)
    t = torch.arange(config.max_position_embeddings, dtype=torch.int64).float()
    freqs = torch.outer(t, inv_freq)
    return freqs.cos().numpy(), freqs.sin().numpy()


def finish_graph(g: GraphBuilder, c: hf_llama.Config, w: dict, rotary, attention, inputs, outputs,
                 producer: str, packed_qkv: bool = False, int4: dict = None,
                 int4_symmetric: bool = False, int8: dict = None,
                 int8_unsigned: bool = False, int4_qdq: str = None,
                 int8_dynamic: bool = False) -> onnx.ModelProto:
    """What the GenAI builder's form and the transformer optimizer's share, written into g: the
    embedding Gather; SimplifiedLayerNormalization before layer 0 and SkipSimplifiedLayerNormalization
    (residual + norm, the sum as its 4th output) before every later sublayer and at the end; q, k,
    v as MatMuls on transposed weights (+ Add of --qkv-bias), q and k through
    rotary(x, name, heads) unless rotary is None; attention(i, n, q, k, v), the form's attention
    node, returning its output; o_proj; the SiLU MLP (Sigmoid, Mul); lm_head. With packed_qkv, q, k
    and v are one MatMul (qkv_proj: the three weights side by side, and biases) and attention gets
    (i, n, qkv, "", ""). With int4 (weight key -> quantize_int4's triple), the layers' linears are
    MatMulNBits nodes on those; with int8 (-> quantize_int8's pair), MatMuls of DequantizeLinear
    (QDQ), or with int8_dynamic ONNX Runtime's dynamic quantization of them (MatMulInteger of
    the activations quantized at run time). Returns the model."""
    L, N, KV = c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads
    eps = float(c.rms_norm_eps)

    activations = {}  # x -> its DynamicQuantizeLinear (int8_dynamic)

    def linear(x, name, weight_key, bias_key=None):
        if int4 is not None and weight_key in int4 and int4_qdq:
            out = dequantize_linear_4bit(g, x, name, int4[weight_key], int4_symmetric,
                                         w[weight_key].shape[1], int4_qdq == "int4")
        elif int4 is not None and weight_key in int4:
            out = matmul_nbits(g, x, name, int4[weight_key], int4_symmetric,
                               w[weight_key].shape[1])
        elif int8 is not None and weight_key in int8 and int8_dynamic:
            out = dynamic_linear(g, x, name, int8[weight_key], int8_unsigned, activations)
        elif int8 is not None and weight_key in int8:
            out = dequantize_linear(g, x, name, int8[weight_key], int8_unsigned)
        else:
            out = g.node("MatMul", [x, g.init(f"{weight_key}.T", w[weight_key].T.copy())],
                         [f"{name}/MatMul/output_0"], f"{name}/MatMul")
        if bias_key is not None:
            out = g.node("Add", [out, g.init(bias_key, w[bias_key])], [f"{name}/Add/output_0"], f"{name}/Add")
        return out

    x = g.node("Gather", [g.init("model.embed_tokens.weight", w["model.embed_tokens.weight"]), "input_ids"],
               ["/model/embed_tokens/Gather/output_0"], "/model/embed_tokens/Gather")
    residual = x
    normed = g.node("SimplifiedLayerNormalization",
                    [x, g.init("model.layers.0.input_layernorm.weight", w["model.layers.0.input_layernorm.weight"])],
                    ["/model/layers.0/input_layernorm/output_0"], "/model/layers.0/input_layernorm/LayerNorm",
                    axis=-1, epsilon=eps, stash_type=1)
    for i in range(L):
        pre = f"model.layers.{i}"
        n = f"/model/layers.{i}"
        bias = (lambda k: f"{pre}.self_attn.{k}.bias") if c.qkv_bias else (lambda k: None)
        if packed_qkv:
            # The builder's qkv_proj: [hidden, (N + 2 KV) D], q's columns, then k's, then v's.
            packed = f"{pre}.self_attn.qkv_proj"
            w[f"{packed}.weight"] = np.concatenate(
                [w[f"{pre}.self_attn.{p}.weight"] for p in ("q_proj", "k_proj", "v_proj")], axis=0)
            for quantized in (int4, int8):
                if quantized is not None:
                    parts = [quantized[f"{pre}.self_attn.{p}.weight"]
                             for p in ("q_proj", "k_proj", "v_proj")]
                    quantized[f"{packed}.weight"] = tuple(np.concatenate(x, axis=0)
                                                          for x in zip(*parts))
            if c.qkv_bias:
                w[f"{packed}.bias"] = np.concatenate(
                    [w[f"{pre}.self_attn.{p}.bias"] for p in ("q_proj", "k_proj", "v_proj")])
            qkv = linear(normed, f"{n}/attn/qkv_proj", f"{packed}.weight",
                         f"{packed}.bias" if c.qkv_bias else None)
            attn = attention(i, n, qkv, "", "")
        else:
            q = linear(normed, f"{n}/attn/q_proj", f"{pre}.self_attn.q_proj.weight", bias("q_proj"))
            k = linear(normed, f"{n}/attn/k_proj", f"{pre}.self_attn.k_proj.weight", bias("k_proj"))
            v = linear(normed, f"{n}/attn/v_proj", f"{pre}.self_attn.v_proj.weight", bias("v_proj"))
            if rotary is not None:
                q = rotary(q, f"{n}/attn/q_rotary", N)
                k = rotary(k, f"{n}/attn/k_rotary", KV)
            attn = attention(i, n, q, k, v)
        o = linear(attn, f"{n}/attn/o_proj", f"{pre}.self_attn.o_proj.weight")
        normed, _, _, residual = g.node(
            "SkipSimplifiedLayerNormalization",
            [residual, o, g.init(f"{pre}.post_attention_layernorm.weight", w[f"{pre}.post_attention_layernorm.weight"])],
            [f"{n}/post_attention_layernorm/output_0", "", "", f"{n}/post_attention_layernorm/output_3"],
            f"{n}/post_attention_layernorm/SkipLayerNorm", domain=MS, epsilon=eps)
        gate = linear(normed, f"{n}/mlp/gate_proj", f"{pre}.mlp.gate_proj.weight")
        sig = g.node("Sigmoid", [gate], [f"{n}/mlp/act_fn/Sigmoid/output_0"], f"{n}/mlp/act_fn/Sigmoid")
        act = g.node("Mul", [gate, sig], [f"{n}/mlp/act_fn/Mul/output_0"], f"{n}/mlp/act_fn/Mul")
        up = linear(normed, f"{n}/mlp/up_proj", f"{pre}.mlp.up_proj.weight")
        prod = g.node("Mul", [act, up], [f"{n}/mlp/Mul/output_0"], f"{n}/mlp/Mul")
        down = linear(prod, f"{n}/mlp/down_proj", f"{pre}.mlp.down_proj.weight")
        nxt = f"model.layers.{i + 1}.input_layernorm.weight" if i + 1 < L else "model.norm.weight"
        where = f"/model/layers.{i + 1}/input_layernorm" if i + 1 < L else "/model/norm"
        normed, _, _, residual = g.node(
            "SkipSimplifiedLayerNormalization", [residual, down, g.init(nxt, w[nxt])],
            [f"{where}/output_0", "", "", f"{where}/output_3"], f"{where}/SkipLayerNorm", domain=MS,
            epsilon=eps)
    head = "lm_head.weight" if "lm_head.weight" in w else "model.embed_tokens.weight"
    if int4 is not None and "lm_head.weight" in int4 and int4_qdq:
        dequantize_linear_4bit(g, normed, "/lm_head", int4["lm_head.weight"], int4_symmetric,
                               w[head].shape[1], int4_qdq == "int4", out="logits")
    elif int4 is not None and "lm_head.weight" in int4:
        matmul_nbits(g, normed, "/lm_head", int4["lm_head.weight"], int4_symmetric,
                     w[head].shape[1], out="logits")
    else:
        g.node("MatMul", [normed, g.init("lm_head.MatMul.weight", w[head].T.copy())], ["logits"],
               "/lm_head/MatMul")

    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, initializer=g.inits)
    # DequantizeLinear's 4-bit types and block_size are opset 21's.
    opset = 21 if int4_qdq else 17
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)],
                              producer_name=producer)
    model.ir_version = 8
    return model


def build_graph(config: hf_llama.Config, sd: dict, dtype: str, gqa_inputs: bool, packed_qkv: bool,
                rotary_in_attention: bool, int4: dict = None, int4_symmetric: bool = False,
                int8: dict = None, int8_unsigned: bool = False,
                int4_qdq: str = None, int8_dynamic: bool = False) -> onnx.ModelProto:
    np_dtype = {"float16": np.float16, "bfloat16": "bfloat16"}.get(dtype, np.float32)
    elem = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}.get(dtype, TensorProto.FLOAT)
    g = GraphBuilder(np_dtype)
    c = config
    L, N, KV, D = c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim
    w = {k: v.detach().float().numpy() for k, v in sd.items()}

    # Inputs and outputs.
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])]
    if gqa_inputs:
        inputs += [helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch_size"]),
                   helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])]
    else:
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                                    ["batch_size", "total_sequence_length"]))
    if not rotary_in_attention:  # the attention rotates at the positions seqlens_k implies
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64,
                                                    ["batch_size", "sequence_length"]))
    outputs = [helper.make_tensor_value_info("logits", elem, ["batch_size", "sequence_length", c.vocab_size])]
    for i in range(L):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", elem,
                                                        ["batch_size", KV, "past_sequence_length", D]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", elem,
                                                         ["batch_size", KV, "total_sequence_length", D]))

    # seqlens_k and total_sequence_length from the attention mask.
    if gqa_inputs:
        seqlens_k, total_len = "seqlens_k", "total_sequence_length"
    else:
        p = "/model/attn_mask_reformat/attn_mask_subgraph"
        one_axis = g.init(f"{p}/ReduceSum/axes", np.array([1], dtype=np.int64))
        s = g.node("ReduceSum", ["attention_mask", one_axis], [f"{p}/ReduceSum/output_0"], f"{p}/ReduceSum",
                   keepdims=0)
        s = g.node("Sub", [s, g.init(f"{p}/Sub/one", np.array(1, dtype=np.int64))], [f"{p}/Sub/output_0"], f"{p}/Sub")
        seqlens_k = g.node("Cast", [s], [f"{p}/Sub/Cast/output_0"], f"{p}/Sub/Cast", to=TensorProto.INT32)
        shape = g.node("Shape", ["attention_mask"], [f"{p}/Shape/output_0"], f"{p}/Shape")
        t = g.node("Gather", [shape, g.init(f"{p}/Gather/index", np.array(1, dtype=np.int64))],
                   [f"{p}/Gather/output_0"], f"{p}/Gather", axis=0)
        total_len = g.node("Cast", [t], [f"{p}/Gather/Cast/output_0"], f"{p}/Gather/Cast", to=TensorProto.INT32)

    cos, sin = rope_caches(c)
    cos_cache = g.init("cos_cache", cos)
    sin_cache = g.init("sin_cache", sin)
    rot = c.rotary_dim
    interleaved = int(c.rope_interleaved)

    def rotary(x, name, heads):
        attrs = {"interleaved": interleaved}
        if rot != D:
            attrs.update(rotary_embedding_dim=rot, num_heads=heads)
        return g.node("RotaryEmbedding", [x, "position_ids", cos_cache, sin_cache],
                      [f"{name}/RotaryEmbedding/output_0"], f"{name}/RotaryEmbedding", domain=MS, **attrs)

    def attention(i, n, q, k, v):
        ins = [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k, total_len]
        if rotary_in_attention:
            ins += [cos_cache, sin_cache]
        return g.node("GroupQueryAttention", ins,
                      [f"{n}/attn/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
                      f"{n}/attn/GroupQueryAttention", domain=MS, num_heads=N, kv_num_heads=KV,
                      scale=float((c.query_pre_attn_scalar or D) ** -0.5),
                      local_window_size=int(c.sliding_window or -1),
                      do_rotary=int(rotary_in_attention),
                      rotary_interleaved=interleaved if rotary_in_attention else 0,
                      softcap=float(c.attn_logit_softcapping or 0.0))[0]

    return finish_graph(g, c, w, None if rotary_in_attention else rotary, attention, inputs, outputs,
                        "ort_genai_llama.py", packed_qkv=packed_qkv, int4=int4,
                        int4_symmetric=int4_symmetric, int8=int8, int8_unsigned=int8_unsigned,
                        int4_qdq=int4_qdq, int8_dynamic=int8_dynamic)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32",
                   help="initializers, logits and past/present key/values")
    p.add_argument("--gqa-inputs", action="store_true",
                   help="seqlens_k and total_sequence_length as graph inputs (no attention_mask)")
    p.add_argument("--packed-qkv", action="store_true",
                   help="q, k and v as one MatMul (qkv_proj) feeding GroupQueryAttention's query alone")
    p.add_argument("--rotary-in-attention", action="store_true",
                   help="GroupQueryAttention rotates q and k (do_rotary = 1, cos/sin caches as its "
                        "inputs 7 and 8; no RotaryEmbedding nodes, no position_ids input)")
    p.add_argument("--int4-block-size", type=int, default=0,
                   help="the layers' linears as MatMulNBits with 4-bit blocks of this many k "
                        "(0: float MatMuls); weights.pt then holds the dequantized weights")
    p.add_argument("--int4-symmetric", action="store_true",
                   help="with --int4-block-size: zero point 8, no zero_points input")
    p.add_argument("--int8-qdq", choices=("int8", "uint8"),
                   help="the layers' linears as MatMul(x, DequantizeLinear(Q, scale, zero point)) "
                        "with a scale per output column: int8 with zero point 0 or uint8 with 128; "
                        "weights.pt then holds the dequantized weights")
    p.add_argument("--int8-dynamic", choices=("int8", "uint8"),
                   help="--int8-qdq's weights in ONNX Runtime's quantize_dynamic form: "
                        "DynamicQuantizeLinear of the activations, MatMulInteger, Cast, and Mul by "
                        "the activation's scale times the weight's (per output column)")
    p.add_argument("--int4-qdq", choices=("int4", "uint4"),
                   help="the layers' linears as MatMul(x, DequantizeLinear(Q, scale, zero point)) of "
                        "opset 21 with 4-bit Q [K, N]: blocked along K (axis 0, block_size) by "
                        "--int4-block-size, or with --int4-block-size 0 a scale per output column; "
                        "the same quantizer as MatMulNBits'")
    p.add_argument("--int4-lm-head", action="store_true",
                   help="with --int4-block-size: the lm_head in 4 bits too (as GenAI's int4 "
                        "export writes it unless told to exclude it); an untied model's only")
    p.add_argument("--no-shuffle", action="store_true", help="keep the nodes in topological order")
    p.add_argument("--shuffle-seed", type=int, default=0)
    p.add_argument("--print-ops", action="store_true")
    hf_llama.add_config_args(p)
    a = p.parse_args(argv)
    try:
        config = hf_llama.config_from_args(a)
    except ValueError as e:
        p.error(str(e))
    # GroupQueryAttention's softcap and scale attributes carry Gemma 2's score forms.
    beyond = [f for f in config.forms_beyond_llama()
              if f not in ("--attn-softcap", "--query-pre-attn-scalar")]
    if beyond:
        p.error("this exporter writes the Llama layer only, not " + ", ".join(beyond))
    if (config.rope_form != "inline" or config.mask_style != "where" or config.mask_value != "finfo-min"
            or config.fused_qkv != "none"):
        p.error("--rope-cache, --mask-style, --mask-value and --fused-qkv describe torch exports; this "
                "graph has its own (cos/sin caches, GroupQueryAttention's mask, --packed-qkv)")

    os.makedirs(a.out, exist_ok=True)
    module = hf_llama.build_model(config)
    sd = module.state_dict()
    if a.dtype == "bfloat16":
        # The file's weights are the module's rounded to bfloat16; weights.pt holds those very
        # values (in float32), so the PyTorch reference computes with what the file holds.
        sd = {k: v.to(torch.bfloat16).to(torch.float32) if v.is_floating_point() else v
              for k, v in sd.items()}
    if a.packed_qkv and not a.rotary_in_attention:
        p.error("--packed-qkv needs --rotary-in-attention: RotaryEmbedding nodes rotate q and k "
                "apart, so the builder packs them only when the attention rotates")
    int4 = int8 = None
    if a.int8_qdq and a.int8_dynamic:
        p.error("--int8-qdq and --int8-dynamic are two forms of one quantization: pick one")
    int8_kind = a.int8_qdq or a.int8_dynamic
    if int8_kind:
        if a.dtype != "float32" or a.int4_block_size:
            p.error("--int8-qdq and --int8-dynamic write float32 scales and exclude "
                    "--int4-block-size")
        int8 = {}
        for key in list(sd):
            if key.startswith("model.layers.") and key.endswith("_proj.weight"):
                q, scale = int8[key] = quantize_int8(sd[key].detach().float().numpy())
                sd[key] = torch.from_numpy(q.astype(np.float32) * scale[:, None])
    if a.int4_qdq and (a.dtype != "float32" or int8_kind):
        p.error("--int4-qdq writes float32 scales and excludes --int8-qdq")
    if a.int4_lm_head and (not (a.int4_block_size or a.int4_qdq) or config.tie_word_embeddings):
        p.error("--int4-lm-head needs --int4-block-size (or --int4-qdq) and an untied lm_head")
    if a.int4_block_size or a.int4_qdq:
        # MatMulNBits' scales have the activations' type: float32, or float16 (the builder's
        # CUDA form); ONNX Runtime's CPU kernel takes no bfloat16.
        if a.dtype == "bfloat16" or (a.int4_qdq and a.dtype != "float32"):
            p.error("--int4-block-size writes float32 or float16 scales (--int4-qdq float32): "
                    "use --dtype float32 or float16")
        # The layers' linears, quantized once; the reference computes with what the file holds.
        int4 = {}
        for key in list(sd):
            if (key.startswith("model.layers.") and key.endswith("_proj.weight")) or \
                    (key == "lm_head.weight" and a.int4_lm_head):
                weight = sd[key].detach().float().numpy()
                # Block size 0 (QDQ only): one block over all of K, a scale per output column.
                q, scales, zp = quantize_int4(weight, a.int4_block_size or weight.shape[1],
                                              a.int4_symmetric)
                int4[key] = (q, scales.astype(a.dtype).astype(np.float32), zp)
                sd[key] = torch.from_numpy(dequantize_int4(*int4[key], weight.shape[1]).copy())
    model = build_graph(config, sd, a.dtype, a.gqa_inputs, a.packed_qkv, a.rotary_in_attention,
                        int4, a.int4_symmetric, int8, int8_kind == "uint8", a.int4_qdq,
                        int8_dynamic=bool(a.int8_dynamic))
    # No onnx.checker here: it knows no SimplifiedLayerNormalization in the ai.onnx domain (an
    # ONNX Runtime contrib op registered there) and wants topological order; loading the file in
    # ONNX Runtime (tests/e2e/ort/greedy.mjs) is the check.
    if not a.no_shuffle:
        nodes = list(model.graph.node)
        random.Random(a.shuffle_seed).shuffle(nodes)
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    path = os.path.join(a.out, "model.onnx")
    onnx.save(model, path)
    meta = asdict(config)
    meta.update(onnx_form="ort-genai", onnx_dtype=a.dtype, gqa_inputs=a.gqa_inputs,
                int4_block_size=a.int4_block_size, int4_symmetric=a.int4_symmetric,
                int8_qdq=a.int8_qdq, int8_dynamic=a.int8_dynamic, int4_qdq=a.int4_qdq,
                packed_qkv=a.packed_qkv, rotary_in_attention=a.rotary_in_attention,
                nodes_shuffled=not a.no_shuffle)
    common.save_config(os.path.join(a.out, "config.json"), meta)
    torch.save(sd, os.path.join(a.out, "weights.pt"))
    print(f"wrote {path}, config.json, weights.pt ({a.dtype}, "
          f"{'shuffled' if not a.no_shuffle else 'topological'} nodes)")
    if a.print_ops:
        print(common.op_summary(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
