#!/usr/bin/python3
"""A Llama graph in the form ONNX Runtime's transformer optimizer fuses an exported Llama into
(onnxruntime.transformers, FusionRotaryAttention), written with onnx.helper on the same seeded
weights as hf_llama.py's module.

    /usr/bin/python3 models/exports/ort_optimizer_llama.py --out DIR [hf_llama.py's size flags]
    /usr/bin/python3 models/exports/hf_llama.py reference --model-dir DIR --out ref.json ...

The optimizer keeps the export's own mask subgraph and fuses the rest:
  * SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization for the norms (as in
    ort_genai_llama.py);
  * RotaryEmbedding on q and k ([batch, seq, heads * head_dim], num_heads, cos/sin caches);
  * MultiHeadAttention (com.microsoft) per layer: query, key, value, no bias, no
    key_padding_mask, attention_bias = the export's additive mask [batch, 1, seq, total]
    (finfo.min where key position > query position or attention_mask is 0, else 0, computed from
    the inputs' shapes with Range, LessOrEqual, And, Where), past/present key and value in BNSH;
    num_heads and scale attributes. MultiHeadAttention has no grouped KV heads: --kv-heads must
    equal --heads (the optimizer fuses GQA models into GroupQueryAttention instead).
Nodes stay in topological order.
"""

import argparse
import os
import sys
from dataclasses import asdict

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import hf_llama  # noqa: E402
from ort_genai_llama import MS, GraphBuilder, finish_graph, rope_caches  # noqa: E402


def build_graph(c: hf_llama.Config, sd: dict) -> onnx.ModelProto:
    g = GraphBuilder(np.float32)
    L, N, D = c.num_hidden_layers, c.num_attention_heads, c.head_dim
    w = {k: v.detach().float().numpy() for k, v in sd.items()}

    def i64(name, values):
        return g.init(name, np.array(values, dtype=np.int64))

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch_size", "total_sequence_length"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64,
                                            ["batch_size", "sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch_size", "sequence_length", c.vocab_size])]
    for i in range(L):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", TensorProto.FLOAT,
                                                        ["batch_size", N, "past_sequence_length", D]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", TensorProto.FLOAT,
                                                         ["batch_size", N, "total_sequence_length", D]))

    # The export's mask: allowed = key <= query position and attention_mask[b, key] != 0;
    # Where(allowed, 0, finfo.min) as [batch, 1, seq, total].
    m = "/model/mask"
    seq = g.node("Gather", [g.node("Shape", ["input_ids"], [f"{m}/Shape/output_0"], f"{m}/Shape"),
                            i64(f"{m}/one", 1)], [f"{m}/Gather/output_0"], f"{m}/Gather", axis=0)
    total = g.node("Gather", [g.node("Shape", ["attention_mask"], [f"{m}/Shape_1/output_0"], f"{m}/Shape_1"),
                              i64(f"{m}/one_1", 1)], [f"{m}/Gather_1/output_0"], f"{m}/Gather_1", axis=0)
    past = g.node("Sub", [total, seq], [f"{m}/Sub/output_0"], f"{m}/Sub")
    keys = g.node("Range", [i64(f"{m}/zero", 0), total, i64(f"{m}/step", 1)], [f"{m}/Range/output_0"], f"{m}/Range")
    queries = g.node("Range", [past, total, i64(f"{m}/step_1", 1)], [f"{m}/Range_1/output_0"], f"{m}/Range_1")
    column = g.node("Unsqueeze", [queries, i64(f"{m}/axis1", [1])], [f"{m}/Unsqueeze/output_0"], f"{m}/Unsqueeze")
    causal = g.node("LessOrEqual", [keys, column], [f"{m}/LessOrEqual/output_0"], f"{m}/LessOrEqual")
    padding = g.node("Cast", [g.node("Unsqueeze", ["attention_mask", i64(f"{m}/axes12", [1, 2])],
                                     [f"{m}/Unsqueeze_1/output_0"], f"{m}/Unsqueeze_1")],
                     [f"{m}/Cast/output_0"], f"{m}/Cast", to=TensorProto.BOOL)
    allowed = g.node("And", [causal, padding], [f"{m}/And/output_0"], f"{m}/And")
    bias = g.node("Where", [allowed, g.init(f"{m}/zero_f", np.array(0.0, dtype=np.float32)),
                            g.init(f"{m}/min_f", np.array(np.finfo(np.float32).min, dtype=np.float32))],
                  [f"{m}/Where/output_0"], f"{m}/Where")

    cos, sin = rope_caches(c)
    cos_cache, sin_cache = g.init("cos_cache", cos), g.init("sin_cache", sin)

    def rotary(x, name, heads):
        return g.node("RotaryEmbedding", [x, "position_ids", cos_cache, sin_cache],
                      [f"{name}/RotaryEmbedding/output_0"], f"{name}/RotaryEmbedding", domain=MS,
                      num_heads=heads)

    def attention(i, n, q, k, v):
        return g.node("MultiHeadAttention",
                      [q, k, v, "", "", bias, f"past_key_values.{i}.key", f"past_key_values.{i}.value"],
                      [f"{n}/attn/MultiHeadAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
                      f"{n}/attn/MultiHeadAttention", domain=MS, num_heads=N, scale=float(D ** -0.5))[0]

    return finish_graph(g, c, w, rotary, attention, inputs, outputs, "ort_optimizer_llama.py")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory")
    hf_llama.add_config_args(p)
    a = p.parse_args(argv)
    try:
        config = hf_llama.config_from_args(a)
    except ValueError as e:
        p.error(str(e))
    if config.forms_beyond_llama():
        p.error("this exporter writes the Llama layer only, not " + ", ".join(config.forms_beyond_llama()))
    if config.num_key_value_heads != config.num_attention_heads:
        p.error("MultiHeadAttention has no grouped KV heads: give --kv-heads equal to --heads")
    if (config.rope_form != "inline" or config.mask_style != "where" or config.mask_value != "finfo-min"
            or config.rope_interleaved or config.rotary_dim != config.head_dim or config.sliding_window
            or config.fused_qkv != "none"):
        p.error("this form has its own mask, separate q/k/v and a whole-head rotate-half RotaryEmbedding")
    os.makedirs(a.out, exist_ok=True)
    module = hf_llama.build_model(config)
    sd = module.state_dict()
    path = os.path.join(a.out, "model.onnx")
    onnx.save(build_graph(config, sd), path)
    meta = asdict(config)
    meta.update(onnx_form="ort-transformer-optimizer")
    common.save_config(os.path.join(a.out, "config.json"), meta)
    torch.save(sd, os.path.join(a.out, "weights.pt"))
    print(f"wrote {path}, config.json, weights.pt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
