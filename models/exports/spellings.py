#!/usr/bin/python3
"""One Llama decoder-with-past export per integer seed, each computation written in one of the
equivalent spellings that real exporters and transformers versions write, chosen at random from
the seed. The math is hf_llama.py's (same weights from the same seed through hf_llama's
init_weights, same greedy ids up to float rounding); only the graph's spelling differs.

    /usr/bin/python3 models/exports/spellings.py export --seed N --out DIR [--print-ops] \
        [--kv-heads 1|2|4] [--set NAME=OPTION ...]
    /usr/bin/python3 models/exports/spellings.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]
    /usr/bin/python3 models/exports/spellings.py describe --seed N [--json]
    /usr/bin/python3 models/exports/spellings.py describe --list

export writes DIR/model.onnx (torch.onnx.export, opset 17, hf_llama.py's input/output names and
dynamic axes), DIR/config.json (hf_llama's Config fields plus "spellings": every choice made) and
DIR/weights.pt (the state_dict: the same parameter names as hf_llama.py's module, so
`hf_llama.py reference --model-dir DIR` decodes the same weights in hf_llama's own spelling).
reference rebuilds the spelled module from config.json and weights.pt and decodes greedily
through its own forward with the cache (common.py). describe prints the seed's choices;
--list prints every choice and its options.

The seed picks the number of KV heads (1, 2 or 4 of 4 query heads) and, per computation, one
spelling (CHOICES below, the same for every layer); the weights are hf_llama's init_weights with
that seed. --set NAME=OPTION overrides one choice (to find which spelling a consumer refuses).
Three choices are never drawn, only set (OVERRIDE_ONLY), every other spelling as the seed drew it:
positions=alibi or alibi_stored writes the same decoder with ALiBi (BLOOM's or MPT's) instead of
RoPE; products=einsum writes the attention's two products as torch.einsum (ONNX Einsum nodes) and
products=keys_first the scores as (k @ q^T)^T; softmax_code=decomposed writes the softmax over the
keys as exp(x - max) / sum. Each combines with every drawn spelling and with ALiBi; where a drawn
spelling has no such form, the option's text says what is written instead.
Two spellings need torch 2.x's export of an op that torch 1.13 exports wrongly (repeat_interleave)
or not at all (unflatten): their symbolics are ported and registered for the export
(TORCH2_SYMBOLICS). Everything else is torch 1.13's own export of the PyTorch code, artefacts
included (e.g. the If that squeeze() of a dimension of unknown size becomes).
"""

import argparse
import json
import math
import os
import random
import sys
from dataclasses import asdict
from typing import Dict, Optional, Tuple

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bloom  # noqa: E402
import common  # noqa: E402
import hf_llama  # noqa: E402

# Every computation's spellings, in the order they are drawn from the seed (append new choices at
# the end so that earlier seeds keep their draws). Each option is annotated with where it comes
# from; the README of tests/e2e/exports has the table.
CHOICES: Dict[str, Dict[str, str]] = {
    "head_split": {
        "view_size": "bsz, q_len, _ = x.size(); q.view(bsz, q_len, H, D) (transformers <= 4.47)",
        "hidden_shape": "hidden_shape = (*x.shape[:-1], -1, D); q.view(hidden_shape) (4.48+)",
        "unflatten": "q.unflatten(-1, (H, D)), exported as torch 2.x writes it: Reshape to "
                     "Shape[:dim] ++ (H, D) ++ Shape[dim+1:] (see TORCH2_SYMBOLICS)",
        "view_neg": "q.view(bsz, q_len, -1, D)",
    },
    "head_merge": {
        "reshape_bs": "o.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)",
        "reshape_bs_hidden": "o.transpose(1, 2).contiguous().reshape(bsz, q_len, H * D) (4.3x)",
        "reshape_input_shape": "o.transpose(1, 2).reshape(*input_shape, -1).contiguous() (4.48+)",
        "flatten": "o.transpose(1, 2).flatten(2)",
    },
    "rotate_half": {
        "slice_static": "x[..., :d // 2], x[..., d // 2:] with d a Python int",
        "slice_shape": "x[..., : x.shape[-1] // 2] (bounds from the shape, transformers)",
        "chunk": "x1, x2 = x.chunk(2, dim=-1)",
        "split": "x1, x2 = torch.split(x, d // 2, dim=-1)",
        "narrow": "x.narrow(-1, 0, half), x.narrow(-1, half, half)",
    },
    "rope_table": {
        "inv_freq_matmul": "inv_freq[None, :, None] @ position_ids[:, None, :].float() per call (4.38+)",
        "cache_index": "cos_cached[position_ids], tables [max_pos, D] built at construction",
        "cache_slice_index": "cos_cached[:kv_seq_len] then [position_ids] (4.36-4.37)",
        "cache_4d_squeeze": "cos_cached[:, :, :kv_seq_len] of [1, 1, max_pos, D], squeeze(1).squeeze(0), "
                            "[position_ids] (4.31-4.35)",
        "cache_gather": "torch.gather(cos.repeat(b, 1, 1, 1), 2, position_ids[:, None, :, None].repeat(..)) "
                        "(4.28)",
        "einsum_index": "einsum('i,j->ij', arange(kv_seq_len), inv_freq) per call, cos()[position_ids] "
                        "(a dynamic cache recomputed in the graph)",
    },
    "rope_site": {
        "model": "cos/sin computed once and passed to every layer (4.45+)",
        "layer": "each attention layer computes its own cos/sin (<= 4.44)",
    },
    "rope_scaling_mul": {
        "none": "cos, sin as computed",
        "attention_scaling": "cos * attention_scaling, sin * attention_scaling with 1.0 (4.45+)",
    },
    "repeat_kv": {
        "expand_reshape": "x[:, :, None].expand(b, kv, n, t, d).reshape(b, kv * n, t, d) (transformers)",
        "repeat_interleave": "x.repeat_interleave(n, dim=1), exported as torch 2.x writes it: "
                             "Unsqueeze, Tile, Reshape (see TORCH2_SYMBOLICS)",
        "stack_flatten": "torch.stack([x] * n, dim=2).flatten(1, 2)",
    },
    "mask": {
        "where": "torch.where(causal & padding, 0, min) of arange comparisons",
        "masked_fill": "4.3x _make_causal_mask (masked_fill, zeros cat for the past) + masked_fill padding",
        "triu": "4.38-4.4x: torch.triu of a [total, total] matrix, rows of the new tokens, padding "
                "where causal + attention_mask == 0",
        "scatter_padding": "4.38-4.47 _update_causal_mask: triu, *= arange > cache_position, "
                           "causal_mask[..., :n] = causal_mask[..., :n].masked_fill(padding, min) "
                           "(ScatterND)",
        "bias_buffer": "GPT-2: bool tril buffer [max_pos, max_pos] from construction, "
                       "bias[k - q : k, :k], torch.where(bias, scores, min) in each layer; padding "
                       "added as (1 - attention_mask) * min",
    },
    "mask_value": {
        "finfo-min": "torch.finfo(float32).min",
        "neg-inf": "-inf (NaN rows with left padding: single prompts only)",
        "-10000": "-1e4",
    },
    "mask_clamp": {
        "none": "scores + mask",
        "max_finfo_min": "torch.max(scores + mask, finfo.min) (4.28-4.3x)",
    },
    "scores": {
        "mul_after": "matmul(q, k^T) * scale",
        "mul_q": "matmul(q * scale, k^T)",
        "div_sqrt": "matmul(q, k^T) / math.sqrt(D)",
        "baddbmm": "torch.baddbmm(zeros(b*H, s, t), q.view(b*H, s, D), k.view(b*H, t, D)^T, alpha=scale) "
                   "(GPT-NeoX)",
        "sdpa_sqrt": "matmul(q * sqrt(scale), k^T * sqrt(scale)) (torch.onnx's SDPA decomposition)",
    },
    "softmax": {
        "float32_cast": "softmax(x, dim=-1, dtype=torch.float32).to(q.dtype)",
        "plain": "softmax(x, dim=-1)",
        "float_type_as": "softmax(x.float(), dim=-1).type_as(q)",
    },
    "rms_formula": {
        "rsqrt": "x * torch.rsqrt(var + eps)",
        "div_sqrt": "x / torch.sqrt(var + eps)",
        "pow": "x * (var + eps).pow(-0.5)",
    },
    "rms_variance": {
        "pow_mean": "x.pow(2).mean(-1, keepdim=True)",
        "mul_mean": "(x * x).mean(-1, keepdim=True)",
    },
    "rms_casts": {
        "float32": "x.to(torch.float32) ... weight * x.to(input_dtype)",
        "none": "no casts",
    },
    "rms_weight": {
        "weight_first": "weight * x",
        "weight_last": "x * weight",
    },
    "activation": {
        "silu": "F.silu(g) * u",
        "sigmoid_mul": "g * torch.sigmoid(g) * u",
        "up_first": "u * F.silu(g)",
    },
    "qkv": {
        "separate": "q_proj(x), k_proj(x), v_proj(x)",
        "fused_split": "one linear of the concatenated weights, .split([q, kv, kv], dim=-1) (GPT-2 c_attn)",
        "fused_slice": "one linear of the concatenated weights, qkv[..., a:b] (Phi-3 qkv_proj)",
    },
    "gate_up": {
        "separate": "gate_proj(x), up_proj(x)",
        "fused_chunk": "one linear of the concatenated weights, .chunk(2, dim=-1) (Phi-3 gate_up_proj)",
    },
    "kv_cat": {
        "dim2": "torch.cat([past, new], dim=2)",
        "dim_neg2": "torch.cat((past, new), dim=-2)",
    },
    "residual": {
        "residual_first": "residual + h",
        "h_first": "h + residual",
    },
    # Read by mask=bias_buffer only; drawn after every other choice (LATE_CHOICES), so that adding
    # it left each seed's earlier draws as they were.
    "mask_buffer": {
        "bool": "bool tril buffer, torch.where(bias, scores, min) (GPT-2)",
        "additive_float": "float buffer of 0 and the mask value above the diagonal (a weight of the "
                          "file), its [k - q : k, :k] block added to the scores",
    },
    # Read by mask=bias_buffer with mask_buffer=bool and a mask value of finfo.min or -inf only
    # (a -1e4 fill divided by the scale would no longer hide a score); drawn last.
    "scale_site": {
        "scores": "the scale where the scores spelling puts it",
        "after_causal": "GPT-J's _attn: torch.where(bias, matmul(q, k^T), min) / sqrt(D), then the "
                        "padding added",
    },
    # Read by mask=where only: how its causal and padding terms are computed; drawn last.
    "mask_code": {
        "v4": "the mask style's own code above",
        "v5_index": "transformers 5.x masking_utils (sdpa_mask's index expansion, eager_mask): "
                    "and_masks(kv_idx <= q_idx, padding_mask[batch_idx, kv_idx]) over broadcast "
                    "index tensors, torch.where(mask, 0, finfo.min)",
    },
    # Never drawn (OVERRIDE_ONLY): how positions enter. With ALiBi the rope_* spellings write
    # nothing, and position_ids stays an input that nothing reads.
    "positions": {
        "rope": "RoPE, as the rope_* spellings write it",
        "alibi": "no rotation: BLOOM's ALiBi, slopes[h] * (cumsum(attention_mask) - 1) "
                 "[batch * heads, 1, total] (bloom.build_alibi_tensor), viewed [batch, heads, 1, "
                 "total] and added to the scaled scores before the mask",
        "alibi_stored": "no rotation: MPT's [heads, 1, max_pos] buffer of slope x (key - max_pos "
                        "+ 1) built at construction, its last keys added to the scaled scores",
    },
    # Never drawn (OVERRIDE_ONLY): how the attention's two products, q k^T and probs v, are
    # written (SpelledLlama.qk and attention); the scale stays where the drawn spellings put it.
    "products": {
        "matmul": "torch.matmul, as the scores spelling writes it (k transposed first); "
                  "matmul(probs, v)",
        "einsum": "torch.einsum('bhqd,bhkd->bhqk', q, k) (k not transposed), scaled as the scores "
                  "spelling (or scale_site=after_causal) scales matmul(q, k^T); baddbmm, which has "
                  "no einsum form, is read as mul_after: einsum(..) * scale; the output "
                  "torch.einsum('bhqk,bhkd->bhqd', probs, v) (ONNX Einsum)",
        "keys_first": "the scores transposed and back: matmul(k, q^T).transpose(2, 3), scaled as "
                      "the scores spelling scales them (baddbmm: baddbmm(zeros(b*H, t, s), k, q^T, "
                      "alpha=scale), viewed [b, H, t, s] and transposed); matmul(probs, v)",
    },
    # Never drawn (OVERRIDE_ONLY): how the softmax over the keys is written (SpelledLlama.softmax).
    # A row whose every score is -inf (a -inf mask and a left-padded query) is NaN in both forms,
    # as in PyTorch's softmax (its max is -inf too), so no mask value is excluded.
    "softmax_code": {
        "softmax": "F.softmax, as the softmax spelling writes it",
        "decomposed": "e = torch.exp(x - x.amax(dim=-1, keepdim=True)); e / e.sum(dim=-1, "
                      "keepdim=True), with the softmax spelling's casts (float32_cast: x.to(float32) "
                      "first, the result .to(q.dtype); float_type_as: x.float(), .type_as(q)); NaN "
                      "in the same all -inf rows as F.softmax",
    },
}

# Choices no seed draws, with the option every seed takes unless --set picks another.
OVERRIDE_ONLY = {"positions": "rope", "products": "matmul", "softmax_code": "softmax"}

# Drawn after the mask value is fixed for the mask style, in this order.
LATE_CHOICES = ("mask_buffer", "scale_site", "mask_code")

# Mask values each mask style takes: scatter_padding multiplies the mask by 0/1 (-inf * 0 is NaN),
# so, as transformers, only finite values.
MASK_VALUES_FOR = {
    "scatter_padding": ("finfo-min", "-10000"),
}

KV_HEADS = (1, 2, 4)


def choose(seed: int) -> Tuple[int, Dict[str, str]]:
    """(kv_heads, spellings) for a seed."""
    rng = random.Random(seed)
    kv_heads = rng.choice(KV_HEADS)
    spellings = {}
    for name, options in CHOICES.items():
        if name not in LATE_CHOICES and name not in OVERRIDE_ONLY:
            spellings[name] = rng.choice(sorted(options))
    allowed = MASK_VALUES_FOR.get(spellings["mask"])
    if allowed and spellings["mask_value"] not in allowed:
        spellings["mask_value"] = allowed[rng.randrange(len(allowed))]
    for name in LATE_CHOICES:
        spellings[name] = rng.choice(sorted(CHOICES[name]))
    spellings.update(OVERRIDE_ONLY)
    return kv_heads, spellings


def check_spellings(spellings: Dict[str, str]) -> None:
    for name, options in CHOICES.items():
        if spellings.get(name) not in options:
            raise ValueError(f"spelling {name}={spellings.get(name)!r} is not one of {sorted(options)}")
    allowed = MASK_VALUES_FOR.get(spellings["mask"])
    if allowed and spellings["mask_value"] not in allowed:
        raise ValueError(f"mask {spellings['mask']} takes the mask values {allowed}")


def summary(spellings: Dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in spellings.items())


# ---------------------------------------------------------------------------------------------
# torch 2.x's TorchScript-exporter symbolics for two ops torch 1.13 exports wrongly or not at all.
#
# * aten::repeat_interleave with an int count: torch 1.13 (opset 9 and 13) splits the input along
#   `dim`, expands each piece and reshapes it to the input's sizes with 0 ("copy this dimension")
#   for each dynamic one, counted before the Unsqueeze that made room for the copies. A dynamic
#   dimension after `dim` (the past + new positions of [b, kv, t, d] with dim=1) therefore copies
#   the wrong dimension: the pieces come out [b, t, n, d], and ONNX Runtime fails at the scores'
#   MatMul ("left operand cannot broadcast on dim 1"); where the exporter has lost the static
#   sizes (a rank-only shape after a Gather) it writes a Loop with the same fault. torch 2.x
#   writes Unsqueeze(dim + 1), Tile by [1, .., n, .., 1], and flatten(dim, dim + 1) as a Reshape to
#   Concat(Shape[:dim], [-1], Shape[dim + 2:]) (symbolic_helper's
#   _repeat_interleave_single_value_repeat_helper), ported below.
# * aten::unflatten: torch 1.13 has no symbolic (UnsupportedOperatorError); torch 2.x writes
#   Reshape(x, Concat(Slice(Shape(x), 0, dim), sizes, Slice(Shape(x), dim + 1, INT64_MAX))) with
#   dim = (rank + dim) % rank in the graph (symbolic_opset13.unflatten), ported below.
# Both are registered for the export only (register_torch2_symbolics).


def _repeat_interleave_torch2(g, self, repeats, dim=None, output_size=None):
    from torch.onnx import symbolic_helper as sh
    from torch.onnx import symbolic_opset9 as opset9
    from torch.onnx import symbolic_opset13 as opset13
    rank = sh._get_tensor_rank(self)
    count = sh._maybe_get_const(repeats, "i")
    axis = None if sh._is_none(dim) else sh._maybe_get_const(dim, "i")
    if rank is None or not isinstance(count, int) or not isinstance(axis, int):
        return opset13.repeat_interleave(g, self, repeats, dim, output_size)
    if axis < 0:
        axis += rank
    unsqueezed = sh._unsqueeze_helper(g, self, [axis + 1])
    onehot = torch.ones(rank + 1, dtype=torch.int64)
    onehot[axis + 1] = count
    tiled = g.op("Tile", unsqueezed, g.op("Constant", value_t=onehot))
    out = opset9.flatten(g, tiled, axis, axis + 1)
    sizes = sh._get_tensor_sizes(self)
    if sizes is not None:
        sizes[axis] = None if sizes[axis] is None else sizes[axis] * count
    return _typed(out, self, sizes)


def _typed(out, like, sizes):
    """Declares out's type: like's with `sizes` (None where dynamic). Without it the exporter
    keeps the sizes of the traced run for a custom symbolic's output, so that a later x.shape[i]
    would fold to the traced size (the sequence length 3)."""
    if sizes is not None:
        out.setType(like.type().with_sizes(sizes))
    return out


def _unflatten_torch2(g, input, dim, unflattened_size):
    from torch.onnx import symbolic_helper as sh
    rank = sh._get_tensor_rank(input)
    if rank is None:
        return sh._unimplemented("unflatten", "input rank must be known at export time", input)
    sizes = sh._maybe_get_const(unflattened_size, "is")
    if isinstance(sizes, (list, tuple)):
        unflattened_size = g.op("Constant", value_t=torch.tensor(list(sizes), dtype=torch.int64))
    one = torch.tensor([1], dtype=torch.int64)
    dim_arg = dim
    input_dim = g.op("Constant", value_t=torch.tensor([rank], dtype=torch.int64))
    dim = g.op("Add", input_dim, dim)
    dim = g.op("Mod", dim, input_dim)
    input_size = g.op("Shape", input)
    head_start_idx = g.op("Constant", value_t=torch.tensor([0], dtype=torch.int64))
    head_end_idx = g.op("Reshape", dim, g.op("Constant", value_t=one))
    head_part_rank = g.op("Slice", input_size, head_start_idx, head_end_idx)
    dim_plus_one = g.op("Add", dim, g.op("Constant", value_t=one))
    tail_start_idx = g.op("Reshape", dim_plus_one, g.op("Constant", value_t=one))
    tail_end_idx = g.op("Constant", value_t=torch.tensor([2 ** 63 - 1], dtype=torch.int64))
    tail_part_rank = g.op("Slice", input_size, tail_start_idx, tail_end_idx)
    final_shape = g.op("Concat", head_part_rank, unflattened_size, tail_part_rank, axis_i=0)
    out = sh._reshape_helper(g, input, final_shape)
    in_sizes = sh._get_tensor_sizes(input)
    axis = sh._maybe_get_const(dim_arg, "i")
    if in_sizes is None or not isinstance(axis, int) or not isinstance(sizes, (list, tuple)):
        return out
    axis %= rank
    return _typed(out, input, in_sizes[:axis] + [int(v) for v in sizes] + in_sizes[axis + 1:])


TORCH2_SYMBOLICS = {"aten::repeat_interleave": _repeat_interleave_torch2,
                    "aten::unflatten": _unflatten_torch2}


def register_torch2_symbolics(opset: int = 17) -> None:
    for name, fn in TORCH2_SYMBOLICS.items():
        torch.onnx.register_custom_op_symbolic(name, fn, opset)


# ---------------------------------------------------------------------------------------------
# The spelled module: hf_llama's parameters (same names, same order, so init_weights gives the
# same weights), a forward written in the chosen spellings.


def rope_tables(config: hf_llama.Config, positions: int) -> Tuple[torch.Tensor, torch.Tensor]:
    inv_freq = hf_llama.default_inv_freq(config)
    t = torch.arange(positions, dtype=torch.int64).float()
    emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
    return emb.cos(), emb.sin()


class SpelledLlama(hf_llama.LlamaForCausalLM):
    def __init__(self, config: hf_llama.Config, spellings: Dict[str, str]):
        super().__init__(config)
        check_spellings(spellings)
        if config.rotary_dim != config.head_dim or config.rope_interleaved:
            raise ValueError("spellings.py writes full rotate_half RoPE only")
        self.sp = dict(spellings)
        table = self.sp["rope_table"]
        if table.startswith("cache"):
            cos, sin = rope_tables(config, config.max_position_embeddings)
            if table in ("cache_4d_squeeze", "cache_gather"):
                cos, sin = cos[None, None], sin[None, None]  # [1, 1, max_pos, D]
            self.register_buffer("cos_cached", cos, persistent=False)
            self.register_buffer("sin_cached", sin, persistent=False)
        self.mask_value = hf_llama.MASK_VALUES[self.sp["mask_value"]]
        if self.sp["mask"] == "bias_buffer":
            n = config.max_position_embeddings
            causal = torch.tril(torch.ones((n, n), dtype=torch.bool))
            additive = self.sp["mask_buffer"] == "additive_float"
            if additive:
                causal = torch.zeros((n, n)).masked_fill(~causal, self.mask_value)
            # A persistent buffer is an initializer of the file (a weight to hetc); a
            # non-persistent one a Constant node. Either way the config rebuilds it, so
            # weights.pt leaves it out (common.export_decoder reads constructed_buffers).
            self.register_buffer("causal_bias", causal, persistent=additive)
            if additive:
                self.constructed_buffers = ("causal_bias",)
        if self.sp["positions"] == "alibi_stored":
            self.register_buffer("alibi_stored", bloom.build_mpt_alibi_tensor(
                config.num_attention_heads, config.max_position_embeddings), persistent=False)

    # -- norms, MLP -----------------------------------------------------------------------------

    def rms_norm(self, norm: hf_llama.RMSNorm, x):
        sp = self.sp
        input_dtype = x.dtype
        if sp["rms_casts"] == "float32":
            x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True) if sp["rms_variance"] == "pow_mean" else (x * x).mean(-1, keepdim=True)
        eps = norm.variance_epsilon
        if sp["rms_formula"] == "rsqrt":
            x = x * torch.rsqrt(var + eps)
        elif sp["rms_formula"] == "div_sqrt":
            x = x / torch.sqrt(var + eps)
        else:
            x = x * (var + eps).pow(-0.5)
        if sp["rms_casts"] == "float32":
            x = x.to(input_dtype)
        return norm.weight * x if sp["rms_weight"] == "weight_first" else x * norm.weight

    def mlp(self, mlp: hf_llama.MLP, x):
        sp = self.sp
        if sp["gate_up"] == "fused_chunk":
            gate, up = F.linear(x, torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight], dim=0)).chunk(2, dim=-1)
        else:
            gate, up = mlp.gate_proj(x), mlp.up_proj(x)
        if sp["activation"] == "silu":
            h = F.silu(gate) * up
        elif sp["activation"] == "sigmoid_mul":
            h = gate * torch.sigmoid(gate) * up
        else:
            h = up * F.silu(gate)
        return mlp.down_proj(h)

    def add_residual(self, residual, h):
        return residual + h if self.sp["residual"] == "residual_first" else h + residual

    # -- RoPE -----------------------------------------------------------------------------------

    def rope(self, x, position_ids, kv_seq_len):
        """cos, sin [batch, seq, D] for position_ids (kv_seq_len: past + new tokens)."""
        table = self.sp["rope_table"]
        if table == "inv_freq_matmul":
            inv_freq = self.model.rotary_emb.inv_freq
            inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            position_ids_expanded = position_ids[:, None, :].float()
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        elif table == "einsum_index":
            inv_freq = self.model.rotary_emb.inv_freq
            t = torch.arange(kv_seq_len, dtype=inv_freq.dtype)
            freqs = torch.einsum("i,j->ij", t, inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[position_ids], emb.sin()[position_ids]
        elif table == "cache_index":
            cos, sin = self.cos_cached[position_ids], self.sin_cached[position_ids]
        elif table == "cache_slice_index":
            cos, sin = self.cos_cached[:kv_seq_len], self.sin_cached[:kv_seq_len]
            cos, sin = cos[position_ids], sin[position_ids]
        elif table == "cache_4d_squeeze":
            cos = self.cos_cached[:, :, :kv_seq_len, ...]
            sin = self.sin_cached[:, :, :kv_seq_len, ...]
            cos = cos.squeeze(1).squeeze(0)  # [seq_len, dim]
            sin = sin.squeeze(1).squeeze(0)
            cos, sin = cos[position_ids], sin[position_ids]
        else:  # cache_gather, transformers 4.28's apply_rotary_pos_emb
            cos = self.cos_cached[:, :, :kv_seq_len, ...]
            sin = self.sin_cached[:, :, :kv_seq_len, ...]
            gather_indices = position_ids[:, None, :, None]  # [bs, 1, seq_len, 1]
            gather_indices = gather_indices.repeat(1, cos.shape[1], 1, cos.shape[3])
            cos = torch.gather(cos.repeat(gather_indices.shape[0], 1, 1, 1), 2, gather_indices)
            sin = torch.gather(sin.repeat(gather_indices.shape[0], 1, 1, 1), 2, gather_indices)
            cos, sin = cos.squeeze(1), sin.squeeze(1)
        if self.sp["rope_scaling_mul"] == "attention_scaling":
            attention_scaling = 1.0
            cos = cos * attention_scaling
            sin = sin * attention_scaling
        return cos.to(x.dtype), sin.to(x.dtype)

    def rotate_half(self, x):
        form = self.sp["rotate_half"]
        half = self.config.head_dim // 2
        if form == "slice_static":
            x1, x2 = x[..., :half], x[..., half:]
        elif form == "slice_shape":
            x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        elif form == "chunk":
            x1, x2 = x.chunk(2, dim=-1)
        elif form == "split":
            x1, x2 = torch.split(x, half, dim=-1)
        else:
            x1, x2 = x.narrow(-1, 0, half), x.narrow(-1, half, half)
        return torch.cat((-x2, x1), dim=-1)

    def apply_rope(self, q, k, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + self.rotate_half(q) * sin, k * cos + self.rotate_half(k) * sin

    # -- attention ------------------------------------------------------------------------------

    def split_heads(self, t, x, heads: int):
        form = self.sp["head_split"]
        d = self.config.head_dim
        if form == "view_size":
            bsz, q_len, _ = x.size()
            t = t.view(bsz, q_len, heads, d)
        elif form == "hidden_shape":
            input_shape = x.shape[:-1]
            hidden_shape = (*input_shape, -1, d)
            t = t.view(hidden_shape)
        elif form == "unflatten":
            t = t.unflatten(-1, (heads, d))
        else:
            bsz, q_len, _ = x.size()
            t = t.view(bsz, q_len, -1, d)
        return t.transpose(1, 2)

    def merge_heads(self, o, x):
        form = self.sp["head_merge"]
        if form == "reshape_bs":
            bsz, q_len, _ = x.size()
            return o.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        if form == "reshape_bs_hidden":
            bsz, q_len, _ = x.size()
            return o.transpose(1, 2).contiguous().reshape(bsz, q_len, self.config.num_attention_heads
                                                          * self.config.head_dim)
        if form == "reshape_input_shape":
            input_shape = x.shape[:-1]
            return o.transpose(1, 2).reshape(*input_shape, -1).contiguous()
        return o.transpose(1, 2).flatten(2)

    def project_qkv(self, attn: hf_llama.Attention, x):
        form = self.sp["qkv"]
        if form == "separate":
            return attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
        qkv = F.linear(x, torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight], dim=0))
        q_out = self.config.num_attention_heads * self.config.head_dim
        kv_out = self.config.num_key_value_heads * self.config.head_dim
        if form == "fused_split":
            return qkv.split([q_out, kv_out, kv_out], dim=-1)
        return qkv[..., :q_out], qkv[..., q_out:q_out + kv_out], qkv[..., q_out + kv_out:]

    def repeat_kv(self, x, n_rep: int):
        form = self.sp["repeat_kv"]
        if form == "expand_reshape":
            batch, kv, slen, d = x.shape
            if n_rep == 1:
                return x
            x = x[:, :, None, :, :].expand(batch, kv, n_rep, slen, d)
            return x.reshape(batch, kv * n_rep, slen, d)
        if form == "repeat_interleave":
            return x.repeat_interleave(n_rep, dim=1)  # see TORCH2_SYMBOLICS
        return torch.stack([x] * n_rep, dim=2).flatten(1, 2)

    def qk(self, q, k, root=None):
        """The unscaled product q k^T [b, H, s, t] as the products spelling writes it; `root`
        multiplies the keys (sdpa_sqrt: k^T * root with matmul, k * root without a transpose).
        products=matmul is the code every seed had before that choice, op for op."""
        form = self.sp["products"]
        if form == "einsum":
            return torch.einsum("bhqd,bhkd->bhqk", q, k if root is None else k * root)
        if form == "keys_first":
            return torch.matmul(k if root is None else k * root, q.transpose(2, 3)).transpose(2, 3)
        return torch.matmul(q, k.transpose(2, 3) if root is None else k.transpose(-2, -1) * root)

    def scores(self, q, k):
        form = self.sp["scores"]
        d = self.config.head_dim
        scale = d ** -0.5
        if form == "baddbmm" and self.sp["products"] == "einsum":
            form = "mul_after"  # baddbmm has no einsum form: einsum(q, k) * scale
        if form == "mul_after":
            return self.qk(q, k) * scale
        if form == "mul_q":
            return self.qk(q * scale, k)
        if form == "div_sqrt":
            return self.qk(q, k) / math.sqrt(d)
        if form == "sdpa_sqrt":
            root = math.sqrt(scale)
            return self.qk(q * root, k, root)
        # GPT-NeoX's _attn: batch and heads flattened, baddbmm into zeros.
        batch_size, num_heads, query_length, head_size = q.size()
        key_length = k.size(-2)
        query = q.reshape(batch_size * num_heads, query_length, head_size)
        key = k.reshape(batch_size * num_heads, key_length, head_size)
        if self.sp["products"] == "keys_first":
            # The same baddbmm with the operands swapped, [b*H, t, s], transposed back.
            attn_scores = torch.zeros(batch_size * num_heads, key_length, query_length, dtype=q.dtype)
            attn_scores = torch.baddbmm(attn_scores, key, query.transpose(1, 2), beta=1.0, alpha=scale)
            return attn_scores.view(batch_size, num_heads, key_length, query_length).transpose(2, 3)
        attn_scores = torch.zeros(batch_size * num_heads, query_length, key_length, dtype=q.dtype)
        attn_scores = torch.baddbmm(attn_scores, query, key.transpose(1, 2), beta=1.0, alpha=scale)
        return attn_scores.view(batch_size, num_heads, query_length, key_length)

    def softmax(self, w, q):
        form = self.sp["softmax"]
        if self.sp["softmax_code"] == "decomposed":
            # F.softmax(x, dtype=float32) casts its input before the softmax: the same cast here.
            x = w.to(torch.float32) if form == "float32_cast" else w
            x = x.float() if form == "float_type_as" else x
            # The max of a row of -inf is -inf and -inf - -inf NaN: the same NaN row as F.softmax.
            e = torch.exp(x - x.amax(dim=-1, keepdim=True))
            probs = e / e.sum(dim=-1, keepdim=True)
            if form == "float32_cast":
                return probs.to(q.dtype)
            return probs.type_as(q) if form == "float_type_as" else probs
        if form == "float32_cast":
            return F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        if form == "plain":
            return F.softmax(w, dim=-1)
        return F.softmax(w.float(), dim=-1).type_as(q)

    def scale_after_causal(self) -> bool:
        """GPT-J's _attn, which no model combines with ALiBi: with positions other than rope the
        scale is where the scores spelling puts it."""
        sp = self.sp
        return (sp["scale_site"] == "after_causal" and sp["mask"] == "bias_buffer" and
                sp["mask_buffer"] == "bool" and sp["mask_value"] != "-10000" and
                sp["positions"] == "rope")

    def masked(self, w, mask, q_len_kv_len, scale=None):
        """The scores w with the mask applied; with `scale`, unscaled scores divided by it after
        the causal buffer and before the padding (scale_site=after_causal)."""
        sp = self.sp
        if sp["mask"] == "bias_buffer":
            query_length, key_length = q_len_kv_len
            causal_mask = self.causal_bias[key_length - query_length: key_length, :key_length]
            if sp["mask_buffer"] == "additive_float":
                w = w + causal_mask.to(w.dtype)
            else:
                mask_value = torch.full([], self.mask_value, dtype=w.dtype)
                w = torch.where(causal_mask, w, mask_value)
            if scale is not None:
                w = w / scale
            w = w + mask  # the padding, [batch, 1, 1, total]
        elif sp["mask"] in ("triu", "scatter_padding"):
            w = w + mask[:, :, :, : q_len_kv_len[1]]
        else:
            w = w + mask
        if sp["mask_clamp"] == "max_finfo_min":
            w = torch.max(w, torch.tensor(torch.finfo(w.dtype).min))
        return w

    def with_position_bias(self, w, alibi):
        """The scores plus ALiBi's bias (positions=alibi or alibi_stored); w as it was with RoPE."""
        form = self.sp["positions"]
        if form == "alibi":
            return w + alibi.view(w.shape[0], self.config.num_attention_heads, 1, -1)
        if form == "alibi_stored":
            return w + self.alibi_stored[:, :, self.alibi_stored.size(2) - w.shape[-1]:]
        return w

    def attention(self, attn: hf_llama.Attention, x, cos, sin, mask, past, position_ids,
                  alibi=None):
        sp = self.sp
        c = self.config
        q, k, v = self.project_qkv(attn, x)
        q = self.split_heads(q, x, c.num_attention_heads)
        k = self.split_heads(k, x, c.num_key_value_heads)
        v = self.split_heads(v, x, c.num_key_value_heads)
        if sp["positions"] == "rope":
            if sp["rope_site"] == "layer":
                kv_seq_len = k.shape[-2] + past[0].shape[-2]
                cos, sin = self.rope(v, position_ids, kv_seq_len)
            q, k = self.apply_rope(q, k, cos, sin)
        if sp["kv_cat"] == "dim2":
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        else:
            k = torch.cat((past[0], k), dim=-2)
            v = torch.cat((past[1], v), dim=-2)
        present = (k, v)
        n_rep = c.num_attention_heads // c.num_key_value_heads
        k = self.repeat_kv(k, n_rep)
        v = self.repeat_kv(v, n_rep)
        if self.scale_after_causal():
            w = self.qk(q, k)
            w = self.masked(w, mask, (q.size(-2), k.size(-2)), scale=math.sqrt(c.head_dim))
        else:
            w = self.with_position_bias(self.scores(q, k), alibi)
            w = self.masked(w, mask, (q.size(-2), k.size(-2)))
        w = self.softmax(w, q)
        o = torch.einsum("bhqk,bhkd->bhqd", w, v) if sp["products"] == "einsum" else torch.matmul(w, v)
        return attn.o_proj(self.merge_heads(o, x)), present

    # -- the mask -------------------------------------------------------------------------------

    def build_mask(self, attention_mask, seq, past, dtype):
        """[batch, 1, seq, total] additive (or [batch, 1, 1, total] padding for bias_buffer)."""
        style = self.sp["mask"]
        value = self.mask_value
        if style == "where" and self.sp["mask_code"] == "v5_index":
            return self.v5_mask(attention_mask, seq, past, dtype)
        if style in ("where", "masked_fill", "triu"):
            cfg = hf_llama.Config(mask_style=style, mask_value=self.sp["mask_value"])
            return hf_llama.build_mask(cfg, attention_mask, seq, past, dtype)
        if style == "bias_buffer":
            # GPT-2: the padding as an additive [batch, 1, 1, total] mask.
            am = attention_mask[:, None, None, :]
            if math.isfinite(value):
                am = am.to(dtype=dtype)
                return (1.0 - am) * value
            return torch.zeros(am.shape, dtype=dtype).masked_fill(am == 0, value)
        # scatter_padding: transformers 4.38-4.47 _update_causal_mask (+ the 4.42+
        # _prepare_4d_causal_attention_mask_with_cache_position), a dynamic cache.
        min_dtype = value
        sequence_length = seq
        target_length = attention_mask.shape[-1]
        cache_position = torch.arange(past, past + seq)
        batch_size = attention_mask.shape[0]
        causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype, dtype=dtype)
        # transformers skips the triu when sequence_length == 1; the product below masks the
        # same keys either way, so the traced graph (3 new tokens) keeps it for every step.
        causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask *= torch.arange(target_length) > cache_position.reshape(-1, 1)
        causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1)
        causal_mask = causal_mask.clone()  # copy to contiguous memory for in-place edit
        mask_length = attention_mask.shape[-1]
        padding_mask = causal_mask[:, :, :, :mask_length] + attention_mask[:, None, None, :]
        padding_mask = padding_mask == 0
        causal_mask[:, :, :, :mask_length] = causal_mask[:, :, :, :mask_length].masked_fill(
            padding_mask, min_dtype)
        return causal_mask

    @staticmethod
    def v5_mask(attention_mask, seq, past, dtype):
        """transformers 5.x: create_causal_mask -> sdpa_mask without vmap (the index expansion
        `_non_vmap_expansion_sdpa`) of and_masks(causal_mask_function,
        padding_mask_function(attention_mask)), then eager_mask's where(mask, 0, min); kv_offset
        0, the attention mask already kv_length long (prepare_padding_mask pads nothing)."""
        batch_size = attention_mask.shape[0]
        cache_position = torch.arange(past, past + seq)
        kv_length = past + seq
        padding_mask = attention_mask.bool()
        kv_arange = torch.arange(kv_length)
        batch_arange = torch.arange(batch_size)
        head_arange = torch.arange(1)
        batch_idx = batch_arange[:, None, None, None]
        head_idx = head_arange[None, :, None, None]
        q_idx = cache_position[None, None, :, None]
        kv_idx = kv_arange[None, None, None, :]
        del head_idx  # neither mask function reads it
        result = q_idx.new_ones((), dtype=torch.bool)
        result = result & (kv_idx <= q_idx)
        result = result & padding_mask[batch_idx, kv_idx]
        # eager_mask passes min_dtype as a Python float, which torch 1.13's exporter writes as a
        # double constant that ONNX Runtime refuses beside the float zero: a float tensor here.
        min_dtype = torch.tensor(torch.finfo(dtype).min, dtype=dtype)
        return torch.where(result, torch.tensor(0.0, dtype=dtype), min_dtype)

    # -- forward --------------------------------------------------------------------------------

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
        m = self.model
        if past_key_values is None:
            past_key_values = self.empty_past(input_ids.shape[0])
        hidden_states = m.embed_tokens(input_ids)
        seq = input_ids.shape[1]
        past = past_key_values[0][0].shape[2]
        mask = self.build_mask(attention_mask, seq, past, hidden_states.dtype)
        cos = sin = alibi = None
        if self.sp["positions"] == "alibi":
            alibi = bloom.build_alibi_tensor(attention_mask, self.config.num_attention_heads,
                                             hidden_states.dtype)
        if self.sp["rope_site"] == "model" and self.sp["positions"] == "rope":
            cos, sin = self.rope(hidden_states, position_ids, past + seq)
        presents = []
        for i, layer in enumerate(m.layers):
            residual = hidden_states
            h = self.rms_norm(layer.input_layernorm, hidden_states)
            h, present = self.attention(layer.self_attn, h, cos, sin, mask, past_key_values[i],
                                        position_ids, alibi)
            hidden_states = self.add_residual(residual, h)
            residual = hidden_states
            h = self.rms_norm(layer.post_attention_layernorm, hidden_states)
            h = self.mlp(layer.mlp, h)
            hidden_states = self.add_residual(residual, h)
            presents.append(present)
        hidden_states = self.rms_norm(m.norm, hidden_states)
        return self.lm_head(hidden_states).float(), tuple(presents)


# ---------------------------------------------------------------------------------------------
# Config, build, load


def config_for_seed(seed: int, kv_heads: Optional[int] = None) -> hf_llama.Config:
    kv, _ = choose(seed)
    return hf_llama.Config(num_key_value_heads=kv_heads or kv, seed=seed)


def config_doc(config: hf_llama.Config, spellings: Dict[str, str]) -> dict:
    doc = asdict(config)
    # hf_llama's own fields where they describe the file; the rest is in "spellings".
    doc["mask_value"] = spellings["mask_value"]
    if spellings["mask"] in ("where", "masked_fill", "triu"):
        doc["mask_style"] = spellings["mask"]
    else:
        del doc["mask_style"]
    doc["rope_form"] = "cache" if spellings["rope_table"].startswith("cache") else "inline"
    doc["exporter"] = "models/exports/spellings.py"
    doc["spellings"] = dict(spellings)
    return doc


def build_model(seed: int, kv_heads: Optional[int] = None,
                spellings: Optional[Dict[str, str]] = None) -> SpelledLlama:
    config = config_for_seed(seed, kv_heads)
    model = SpelledLlama(config, spellings or choose(seed)[1])
    hf_llama.init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> SpelledLlama:
    doc = common.load_config(model_dir)
    if "spellings" not in doc:
        raise ValueError(f"{model_dir}/config.json has no \"spellings\": not written by spellings.py")
    config = hf_llama.Config.from_dict(doc)
    # A file written before a never-drawn choice existed was exported with its default.
    sp = dict(doc["spellings"])
    for name, option in OVERRIDE_ONLY.items():
        sp.setdefault(name, option)
    model = SpelledLlama(config, sp)
    weights = os.path.join(model_dir, "weights.pt")
    if os.path.exists(weights):
        missing, unexpected = model.load_state_dict(torch.load(weights), strict=False)
        rebuilt = getattr(model, "constructed_buffers", ())
        if unexpected or any(k not in rebuilt for k in missing):
            raise ValueError(f"{weights} does not fit the module: missing {missing}, "
                             f"unexpected {unexpected}")
    else:
        hf_llama.init_weights(model, config.seed)
    return model.eval()


def export(seed: int, out_dir: str, kv_heads: Optional[int] = None, verbose: bool = False,
           overrides: Optional[Dict[str, str]] = None) -> Tuple[str, Dict[str, str]]:
    spellings = dict(choose(seed)[1])
    spellings.update(overrides or {})
    model = build_model(seed, kv_heads, spellings)
    c = model.config
    register_torch2_symbolics()
    path = common.export_decoder(model, config_doc(c, spellings), out_dir, c.vocab_size,
                                 c.num_hidden_layers, c.num_key_value_heads, c.head_dim,
                                 position_ids=True, verbose=verbose)
    return path, spellings


def parse_overrides(items) -> Dict[str, str]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or name not in CHOICES or value not in CHOICES[name]:
            raise argparse.ArgumentTypeError(
                f"--set takes NAME=OPTION with NAME one of {list(CHOICES)} and OPTION one of its "
                f"options (describe --list), not {item!r}")
        out[name] = value
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write model.onnx, config.json, weights.pt")
    e.add_argument("--seed", type=int, required=True)
    e.add_argument("--out", required=True, help="output directory")
    e.add_argument("--kv-heads", type=int, choices=KV_HEADS, help="instead of the seed's choice")
    e.add_argument("--set", action="append", metavar="NAME=OPTION",
                   help="override one of the seed's spellings (repeatable)")
    e.add_argument("--verbose", action="store_true", help="show the exporter's warnings")
    e.add_argument("--print-ops", action="store_true")
    r = sub.add_parser("reference", help="greedy decoding in PyTorch to JSON")
    common.add_reference_args(r)
    d = sub.add_parser("describe", help="print the spellings a seed chooses")
    d.add_argument("--seed", type=int)
    d.add_argument("--json", action="store_true")
    d.add_argument("--list", action="store_true", help="every choice and its options")
    a = p.parse_args(argv)

    if a.command == "describe":
        if a.list:
            for name, options in CHOICES.items():
                print(name)
                for opt, what in options.items():
                    print(f"    {opt:20} {what}")
            return 0
        if a.seed is None:
            p.error("describe needs --seed N (or --list)")
        kv, sp = choose(a.seed)
        if a.json:
            print(json.dumps({"seed": a.seed, "num_key_value_heads": kv, "spellings": sp}))
        else:
            print(f"seed {a.seed}: kv_heads={kv}")
            for name, value in sp.items():
                print(f"  {name:18} {value:20} {CHOICES[name][value]}")
        return 0

    if a.command == "export":
        try:
            overrides = parse_overrides(a.set)
            path, sp = export(a.seed, a.out, a.kv_heads, a.verbose, overrides)
        except (ValueError, argparse.ArgumentTypeError) as err:
            p.error(str(err))
        print(f"wrote {path}, config.json, weights.pt")
        print(f"seed {a.seed}: {summary(sp)}")
        if a.print_ops:
            print(common.op_summary(path))
        return 0

    try:
        model = load_model(a.model_dir)
        return common.run_reference(a, model, model.empty_past, model.config.vocab_size,
                                    f"torch {torch.__version__} (spellings.py)")
    except (ValueError, RuntimeError) as err:
        print(f"spellings.py reference: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
