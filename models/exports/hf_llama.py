#!/usr/bin/python3
"""A Llama decoder written after Hugging Face transformers' modeling_llama.py (4.3x-4.4x),
with the layer forms of modeling_gemma.py and modeling_gemma2.py (4.42-4.46) as options,
exported with torch.onnx.export, plus its PyTorch greedy reference.

    /usr/bin/python3 models/exports/hf_llama.py export --out DIR [variant flags]
    /usr/bin/python3 models/exports/hf_llama.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]

export writes DIR/model.onnx (opset 17; inputs input_ids, attention_mask, position_ids,
past_key_values.{i}.key/value [batch, kv_heads, past, head_dim]; outputs logits,
present.{i}.key/value), DIR/config.json and DIR/weights.pt (the state_dict). reference rebuilds
the module from config.json and weights.pt and decodes greedily in float32.

Semantics, as transformers has them:
  * RMSNorm in float32: hidden.pow(2).mean(-1, keepdim=True), rsqrt(var + eps), weight * hidden
    (--norm layer: nn.LayerNorm with a bias, StableLM 2's);
  * rotary embedding computed inside the graph from the `inv_freq` buffer and position_ids
    (freqs = inv_freq[None, :, None] @ position_ids[:, None, :].float(), emb = cat(freqs, freqs));
    --rope-cache instead gathers rows of cos/sin tables built at construction (older versions);
  * rotate_half (or --interleaved-rope: GPT-J's rotation of interleaved pairs);
  * grouped-query attention by repeat_kv (expand + reshape); the cache holds kv_heads heads;
  * an additive 4-D mask from a causal comparison and the attention_mask (padding), see --mask-style;
  * attention: matmul * scale + mask, softmax in float32, matmul; SwiGLU MLP; tied or untied lm_head.

Gemma's and Gemma 2's forms (--gemma 1 or 2 sets them together; each has its own flag too):
  * --embedding-scale: embed_tokens(ids) * torch.tensor(hidden_size ** 0.5, dtype=hidden.dtype);
  * --norm-offset: every RMSNorm is GemmaRMSNorm, x.float() * rsqrt(mean(x.float()^2) + eps)
    * (1 + weight.float()), cast back (the weight is stored zero-centred);
  * --hidden-act gelu_pytorch_tanh (or gelu): down(act(gate(x)) * up(x)) with
    gelu(x, approximate="tanh") ("none" for gelu) instead of silu;
  * --attn-softcap C: scores = tanh(scores / C) * C after the scaling, before the mask;
  * --final-softcap C: logits = tanh(lm_head(h) / C) * C;
  * --query-pre-attn-scalar S: scale S ** -0.5 instead of head_dim ** -0.5;
  * --sandwich-norms: Gemma 2's four norms per layer, h + post_attention_layernorm(attn(
    input_layernorm(h))), then h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)));
  * --sliding-window-layers even: only layers 0, 2, 4, ... use --sliding-window (Gemma 2's
    alternating local/global layers), the others attend to every earlier key.
--gemma 1: embedding scale, norm offset, gelu_pytorch_tanh, tied embeddings; --gemma 2: also
sandwich norms, attention soft-cap 50, final soft-cap 30, query_pre_attn_scalar = head_dim and
sliding_window_layers "even" (the window itself is --sliding-window's, none unless given).
"""

import argparse
import math
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Optional, Tuple

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MASK_VALUES = {
    "finfo-min": float(torch.finfo(torch.float32).min),
    "neg-inf": float("-inf"),
    "-10000": -10000.0,
}

# The MLP's activation by hidden_act (transformers' ACT2FN names).
ACTIVATIONS = {
    "silu": nn.functional.silu,
    "gelu_pytorch_tanh": lambda x: nn.functional.gelu(x, approximate="tanh"),
    "gelu": lambda x: nn.functional.gelu(x, approximate="none"),
}


@dataclass
class Config:
    vocab_size: int = 512
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    intermediate_size: int = 344
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 256
    tie_word_embeddings: bool = False
    # Variants.
    rope_scaling: Optional[dict] = None          # None, {"rope_type": "linear", "factor": F} or llama3
    partial_rotary_factor: float = 1.0
    qkv_bias: bool = False                       # Qwen2: biases on q, k, v (not o)
    sliding_window: Optional[int] = None         # Mistral: keys older than N positions are hidden
    mask_style: str = "where"                    # where | masked_fill | triu
    mask_value: str = "finfo-min"                # finfo-min | neg-inf | -10000
    rope_form: str = "inline"                    # inline (inv_freq in the graph) | cache (tables)
    rope_interleaved: bool = False
    attention: str = "eager"  # or "sdpa": torch.onnx's decomposition of scaled_dot_product_attention
    linear: str = "linear"  # or "addmm": GPT-2's Conv1D form of every projection in the layers
    fused_qkv: str = "none"  # or "split" (GPT-2's c_attn.split) or "slice" (Phi-3's qkv_proj[..., a:b])
    # The attention and the MLP both read the layer's input: "two-norms" (GPT-NeoX's
    # use_parallel_residual, each its own norm) or "shared-norm" (Phi-2, Falcon: one norm for both);
    # "none": the MLP reads the attention's output added to the input (Llama).
    parallel_residual: str = "none"
    qk_norm: bool = False  # Qwen3: RMSNorm over each head of q and of k, before the rotation
    # Gemma (modeling_gemma.py) and Gemma 2 (modeling_gemma2.py).
    embedding_scale: bool = False  # embeddings * sqrt(hidden_size)
    norm_offset: bool = False      # GemmaRMSNorm: * (1 + weight), the weight stored zero-centred
    # rms (Llama) or layer: nn.LayerNorm with a bias for every norm (StableLM 2's layers).
    norm_type: str = "rms"
    attn_logit_softcapping: Optional[float] = None   # scores = tanh(scores / C) * C
    final_logit_softcapping: Optional[float] = None  # logits = tanh(logits / C) * C
    query_pre_attn_scalar: Optional[float] = None    # scale S ** -0.5 (default head_dim ** -0.5)
    sandwich_norms: bool = False   # Gemma 2: post-attention and pre/post-feedforward norms
    sliding_window_layers: str = "all"  # all | even (Gemma 2: layers 0, 2, ... are local)
    seed: int = 0
    # Informational, as in a checkpoint's config.json.
    model_type: str = "llama"
    architectures: list = field(default_factory=lambda: ["LlamaForCausalLM"])
    hidden_act: str = "silu"  # not only informational: silu | gelu_pytorch_tanh | gelu in the MLP
    torch_dtype: str = "float32"

    @property
    def rotary_dim(self) -> int:
        dim = int(self.head_dim * self.partial_rotary_factor)
        if dim % 2 or not 0 < dim <= self.head_dim:
            raise ValueError(f"rotary dim {dim} (head_dim {self.head_dim} x partial_rotary_factor "
                             f"{self.partial_rotary_factor}) must be even and within head_dim")
        return dim

    def check(self) -> None:
        """Raises ValueError for forms that do not combine."""
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"unknown hidden_act {self.hidden_act!r} (one of {', '.join(ACTIVATIONS)})")
        if self.norm_type not in ("rms", "layer") or (self.norm_type == "layer" and self.norm_offset):
            raise ValueError(f"norm_type is rms or layer (without --norm-offset), not {self.norm_type!r}")
        if self.sliding_window_layers not in ("all", "even"):
            raise ValueError(f"sliding_window_layers is all or even, not {self.sliding_window_layers!r}")
        if self.sandwich_norms and self.parallel_residual != "none":
            raise ValueError("sandwich norms (Gemma 2) do not combine with a parallel residual")
        if self.attn_logit_softcapping is not None and self.attention != "eager":
            raise ValueError("attention soft-capping needs --attention eager (scaled_dot_product_"
                             "attention has no soft-capping)")
        for name in ("attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, not {value}")

    def forms_beyond_llama(self) -> list:
        """The layer forms in use that a Llama's layer has not (for exporters that write the
        Llama layer only)."""
        forms = {"--parallel-residual": self.parallel_residual != "none", "--qk-norm": self.qk_norm,
                 "--embedding-scale": self.embedding_scale, "--norm-offset": self.norm_offset,
                 "--norm": self.norm_type != "rms",
                 "--hidden-act": self.hidden_act != "silu",
                 "--attn-softcap": self.attn_logit_softcapping is not None,
                 "--final-softcap": self.final_logit_softcapping is not None,
                 "--query-pre-attn-scalar": self.query_pre_attn_scalar is not None,
                 "--sandwich-norms": self.sandwich_norms,
                 "--sliding-window-layers": self.sliding_window_layers != "all"}
        return [flag for flag, used in forms.items() if used]

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)


# ---------------------------------------------------------------------------------------------
# Modules


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class GemmaRMSNorm(nn.Module):
    """modeling_gemma.py's RMSNorm: (1 + weight) in float32, the weight stored zero-centred."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


def make_norm(config: "Config", dim: int) -> nn.Module:
    if config.norm_type == "layer":
        # StableLM 2: nn.LayerNorm(hidden, eps=layer_norm_eps), with a bias.
        return nn.LayerNorm(dim, eps=config.rms_norm_eps)
    if config.norm_offset:
        return GemmaRMSNorm(dim, config.rms_norm_eps)
    return RMSNorm(dim, config.rms_norm_eps)


def softcap(x, cap: Optional[float]):
    """Gemma 2's soft-capping, as transformers writes it: x / cap, tanh, * cap."""
    if cap is None:
        return x
    x = x / cap
    x = torch.tanh(x)
    return x * cap


def uses_window(config: "Config", layer_idx: int) -> bool:
    """Whether the layer masks keys older than config.sliding_window (Gemma 2: even layers)."""
    if not config.sliding_window:
        return False
    return config.sliding_window_layers == "all" or layer_idx % 2 == 0


def default_inv_freq(config: Config) -> torch.Tensor:
    dim = config.rotary_dim
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    scaling = config.rope_scaling
    if not scaling:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind == "llama3":
        # transformers' _compute_llama3_parameters.
        factor = scaling["factor"]
        low_freq_factor = scaling["low_freq_factor"]
        high_freq_factor = scaling["high_freq_factor"]
        old_context_len = scaling["original_max_position_embeddings"]
        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    raise ValueError(f"unknown rope_scaling {scaling}")


def duplicate_freqs(freqs: torch.Tensor, interleaved: bool) -> torch.Tensor:
    """[..., d/2] -> [..., d]: cat(f, f) for rotate_half, (f0, f0, f1, f1, ...) for pairs."""
    if interleaved:
        return torch.stack((freqs, freqs), dim=-1).flatten(-2)
    return torch.cat((freqs, freqs), dim=-1)


class RotaryEmbedding(nn.Module):
    """cos/sin [batch, seq, rotary_dim] for position_ids."""

    def __init__(self, config: Config):
        super().__init__()
        self.form = config.rope_form
        self.interleaved = config.rope_interleaved
        inv_freq = default_inv_freq(config)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        if self.form == "cache":
            t = torch.arange(config.max_position_embeddings, dtype=torch.int64).float()
            freqs = torch.outer(t, inv_freq)
            emb = duplicate_freqs(freqs, self.interleaved)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)
        elif self.form != "inline":
            raise ValueError(f"unknown rope form {self.form}")

    def forward(self, x, position_ids):
        if self.form == "cache":
            return self.cos_cached[position_ids].to(x.dtype), self.sin_cached[position_ids].to(x.dtype)
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = duplicate_freqs(freqs, self.interleaved)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class FamilyRotaryEmbedding(nn.Module):
    """The rotary embedding of transformers' GPT-NeoX, Phi and Falcon modeling code: inv_freq
    over `dim` rotated columns; with form "cache" (4.3x-4.44) the cos/sin tables [max_position,
    dim] (emb = cat(freqs, freqs)) returned sliced to seq_len, for apply_rotary_pos_emb to gather
    by position_ids; with form "inline" (4.45+) [batch, seq, dim] computed from position_ids."""

    def __init__(self, dim: int, base: float, max_position: int, form: str):
        super().__init__()
        self.form = form
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        if form == "cache":
            self.max_seq_len_cached = max_position
            t = torch.arange(self.max_seq_len_cached, dtype=torch.int64).type_as(self.inv_freq)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)
        elif form != "inline":
            raise ValueError(f"unknown rope form {form}")

    def forward(self, x, position_ids=None, seq_len=None):
        if self.form == "cache":
            # transformers grows the tables past max_position_embeddings; a graph cannot.
            if seq_len > self.max_seq_len_cached:
                raise ValueError(f"{seq_len} positions, past max_position_embeddings "
                                 f"{self.max_seq_len_cached}")
            return self.cos_cached[:seq_len].to(dtype=x.dtype), self.sin_cached[:seq_len].to(dtype=x.dtype)
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    """transformers' apply_rotary_pos_emb for FamilyRotaryEmbedding: with position_ids, cos/sin
    are the cache form's tables, gathered here; without, already [batch, seq, dim]."""
    if position_ids is not None:
        cos = cos[position_ids]
        sin = sin[position_ids]
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary(x, cos, sin, rotary_dim: int, interleaved: bool):
    """x [batch, heads, seq, head_dim]; cos/sin [batch, seq, rotary_dim]."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    rotate = rotate_every_two if interleaved else rotate_half
    if rotary_dim == x.shape[-1]:
        return x * cos + rotate(x) * sin
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat((x_rot * cos + rotate(x_rot) * sin, x_pass), dim=-1)


def repeat_kv(hidden_states, n_rep: int):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def build_mask(config: Config, attention_mask, seq: int, past: int, dtype,
               window: Optional[int] = None):
    """Additive mask [batch, 1, seq, total]: 0 where attended, the mask value elsewhere.

    Query i (absolute position past + i) sees key j when j <= past + i, the attention_mask of key j
    is 1, and (sliding window N, the `window` argument: None for none) j > past + i - N.
    """
    value = MASK_VALUES[config.mask_value]
    batch, total = attention_mask.shape[0], attention_mask.shape[1]
    if config.mask_style == "where":
        q_pos = torch.arange(seq, dtype=torch.int64) + past
        k_pos = torch.arange(total, dtype=torch.int64)
        allowed = k_pos[None, :] <= q_pos[:, None]
        if window:
            allowed = allowed & (k_pos[None, :] > q_pos[:, None] - window)
        allowed = allowed[None, None, :, :] & (attention_mask[:, None, None, :] != 0)
        zero = torch.zeros((), dtype=dtype)
        fill = torch.full((), value, dtype=dtype)
        return torch.where(allowed, zero, fill)
    if config.mask_style == "masked_fill":
        # transformers 4.3x: _make_causal_mask over the new tokens, zeros for the past, then the
        # padding of _expand_mask.
        mask = torch.full((seq, seq), value, dtype=dtype)
        mask_cond = torch.arange(mask.size(-1))
        mask = mask.masked_fill(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
        mask = torch.cat([torch.zeros(seq, past, dtype=dtype), mask], dim=-1)
        if window:
            q_pos = torch.arange(seq, dtype=torch.int64) + past
            k_pos = torch.arange(total, dtype=torch.int64)
            mask = mask.masked_fill(k_pos[None, :] <= q_pos[:, None] - window, value)
        mask = mask[None, None, :, :].expand(batch, 1, seq, total)
        return mask.masked_fill(attention_mask[:, None, None, :] == 0, value)
    if config.mask_style == "triu":
        # transformers 4.38-4.4x _update_causal_mask: torch.triu over a full matrix, the rows of the
        # new tokens, then padding where causal + attention_mask == 0.
        full = torch.full((total, total), value, dtype=dtype)
        causal = torch.triu(full, diagonal=1)[past:, :]
        if window:
            q_pos = torch.arange(seq, dtype=torch.int64) + past
            k_pos = torch.arange(total, dtype=torch.int64)
            causal = causal.masked_fill(k_pos[None, :] <= q_pos[:, None] - window, value)
        causal = causal[None, None, :, :].expand(batch, 1, -1, -1).clone()
        padding = (causal + attention_mask[:, None, None, :].to(dtype)) == 0
        return causal.masked_fill(padding, value)
    raise ValueError(f"unknown mask style {config.mask_style}")


class Attention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        scalar = config.query_pre_attn_scalar
        self.scaling = (scalar if scalar is not None else self.head_dim) ** -0.5
        h = config.hidden_size
        q_out, kv_out = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        if config.fused_qkv != "none":
            # One projection for q, k and v (GPT-2's c_attn, Phi-3's qkv_proj).
            self.qkv_proj = nn.Linear(h, q_out + 2 * kv_out, bias=config.qkv_bias)
        else:
            self.q_proj = nn.Linear(h, q_out, bias=config.qkv_bias)
            self.k_proj = nn.Linear(h, kv_out, bias=config.qkv_bias)
            self.v_proj = nn.Linear(h, kv_out, bias=config.qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)
        if config.qk_norm:
            self.q_norm = make_norm(config, self.head_dim)
            self.k_norm = make_norm(config, self.head_dim)

    def project_qkv(self, x):
        form = self.config.linear
        if self.config.fused_qkv == "none":
            return (project(self.q_proj, x, form), project(self.k_proj, x, form),
                    project(self.v_proj, x, form))
        qkv = project(self.qkv_proj, x, form)
        q_out, kv_out = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        if self.config.fused_qkv == "split":  # exports as Split
            return qkv.split([q_out, kv_out, kv_out], dim=-1)
        # Slices of the last axis, as Phi-3 indexes them (exports as Slice)
        return qkv[..., :q_out], qkv[..., q_out:q_out + kv_out], qkv[..., q_out + kv_out:]

    def forward(self, hidden_states, cos, sin, mask, past: Optional[Tuple]):
        bsz, q_len, _ = hidden_states.shape
        q, k, v = self.project_qkv(hidden_states)
        q = q.reshape(bsz, q_len, self.num_heads, self.head_dim)
        k = k.reshape(bsz, q_len, self.num_kv_heads, self.head_dim)
        if self.config.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.reshape(bsz, q_len, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q = apply_rotary(q, cos, sin, self.config.rotary_dim, self.config.rope_interleaved)
        k = apply_rotary(k, cos, sin, self.config.rotary_dim, self.config.rope_interleaved)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        present = (k, v)
        n_rep = self.num_heads // self.num_kv_heads
        k = repeat_kv(k, n_rep)
        v = repeat_kv(v, n_rep)
        if self.config.attention == "sdpa":
            # torch.onnx's decomposition of F.scaled_dot_product_attention(q, k, v, mask) (opset
            # 14, transformers' SDPA attention under torch 2.x): q and k^T each scaled by
            # sqrt(scale) before the product.
            root = math.sqrt(self.scaling)
            attn_weights = torch.matmul(q * root, k.transpose(-2, -1) * root)
        else:
            attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        attn_weights = softcap(attn_weights, self.config.attn_logit_softcapping)
        attn_weights = attn_weights + mask[:, :, :, : k.shape[-2]]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_output = torch.matmul(attn_weights, v)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return project(self.o_proj, attn_output, self.config.linear), present


def project(layer: nn.Linear, x, form: str):
    """layer(x), or with form "addmm" as GPT-2's Conv1D computes a projection: the tokens
    flattened to rows, torch.addmm(bias, rows, weight^T) (a zero bias when the layer has none),
    viewed back."""
    if form != "addmm":
        return layer(x)
    out = layer.weight.shape[0]
    bias = layer.bias if layer.bias is not None else torch.zeros(out, dtype=x.dtype)
    rows = torch.addmm(bias, x.reshape(-1, x.shape[-1]), layer.weight.t())
    return rows.view(*x.shape[:-1], out)


class MLP(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        h, i = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        self.form = config.linear
        self.act_fn = ACTIVATIONS[config.hidden_act]

    def forward(self, x):
        form = self.form
        gate = project(self.gate_proj, x, form)
        return project(self.down_proj, self.act_fn(gate) * project(self.up_proj, x, form), form)


class DecoderLayer(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = make_norm(config, config.hidden_size)
        self.post_attention_layernorm = make_norm(config, config.hidden_size)
        self.parallel_residual = config.parallel_residual
        self.sandwich_norms = config.sandwich_norms
        if self.sandwich_norms:
            self.pre_feedforward_layernorm = make_norm(config, config.hidden_size)
            self.post_feedforward_layernorm = make_norm(config, config.hidden_size)

    def forward(self, hidden_states, cos, sin, mask, past):
        if self.sandwich_norms:
            # Gemma2DecoderLayer: each sublayer's output normed before its residual add.
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
            hidden_states, present = self.self_attn(hidden_states, cos, sin, mask, past)
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.pre_feedforward_layernorm(hidden_states)
            hidden_states = self.mlp(hidden_states)
            hidden_states = self.post_feedforward_layernorm(hidden_states)
            return residual + hidden_states, present
        parallel = self.parallel_residual
        if parallel != "none":
            # x + attn(norm1(x)) + mlp(norm2(x)), summed as GPT-NeoX writes it:
            # mlp_output + attn_output + residual.
            normed = self.input_layernorm(hidden_states)
            attn, present = self.self_attn(normed, cos, sin, mask, past)
            mlp_in = normed if parallel == "shared-norm" else self.post_attention_layernorm(hidden_states)
            return self.mlp(mlp_in) + attn + hidden_states, present
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, present = self.self_attn(hidden_states, cos, sin, mask, past)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states, present


class LlamaModel(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = make_norm(config, config.hidden_size)
        self.rotary_emb = RotaryEmbedding(config)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        config.check()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
        m = self.model
        c = self.config
        hidden_states = m.embed_tokens(input_ids)
        if c.embedding_scale:
            # GemmaModel: the normalizer in the hidden states' dtype.
            normalizer = torch.tensor(c.hidden_size ** 0.5, dtype=hidden_states.dtype)
            hidden_states = hidden_states * normalizer
        seq = input_ids.shape[1]
        past = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        # One mask per form the layers use: with the sliding window, without it (Gemma 2's
        # global layers), each built only when some layer reads it.
        windowed = [uses_window(c, i) for i in range(len(m.layers))]
        masks = {w: build_mask(c, attention_mask, seq, past, hidden_states.dtype,
                               window=c.sliding_window if w else None)
                 for w in sorted(set(windowed))}
        cos, sin = m.rotary_emb(hidden_states, position_ids)
        presents = []
        for i, layer in enumerate(m.layers):
            layer_past = None if past_key_values is None else past_key_values[i]
            hidden_states, present = layer(hidden_states, cos, sin, masks[windowed[i]], layer_past)
            presents.append(present)
        hidden_states = m.norm(hidden_states)
        logits = self.lm_head(hidden_states)
        logits = softcap(logits, c.final_logit_softcapping)
        return logits.float(), tuple(presents)

    def empty_past(self, batch: int):
        c = self.config
        shape = (batch, c.num_key_value_heads, 0, c.head_dim)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.num_hidden_layers))


@torch.no_grad()
def init_weights(model: LlamaForCausalLM, seed: int) -> None:
    """Seeded weights, large enough that greedy decoding gives varied tokens: linears N(0, 1/fan_in),
    biases N(0, 0.1^2), norm weights 1 + 0.1 N(0, 1) (0.1 N(0, 1) with norm_offset: GemmaRMSNorm
    multiplies by 1 + weight), embeddings N(0, 1) (N(0, 1/hidden) when tied to lm_head or scaled
    by sqrt(hidden), N(0, 0.04/hidden) when both, as Gemma's are)."""
    c = model.config
    std = c.hidden_size ** -0.5 if c.tie_word_embeddings or c.embedding_scale else 1.0
    if c.tie_word_embeddings and c.embedding_scale:
        # Scaled by sqrt(hidden) in the residual stream, N(0, 1/hidden) embeddings would
        # outweigh the two layers' outputs and the tied lm_head would echo the current
        # token every step: a fifth of that (scaled, N(0, 0.04)).
        std *= 0.2
    common.init_decoder_weights(
        model, seed,
        is_norm=lambda name: (name.endswith("layernorm.weight") or name == "model.norm.weight"
                              or name.endswith("_norm.weight")),
        embedding_std=lambda name: std if name == "model.embed_tokens.weight" else None,
        norm_base=0.0 if c.norm_offset else 1.0)


def build_model(config: Config) -> LlamaForCausalLM:
    model = LlamaForCausalLM(config)
    init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> LlamaForCausalLM:
    return common.load_model(model_dir, Config.from_dict, LlamaForCausalLM, init_weights)


# ---------------------------------------------------------------------------------------------
# Command line


def rope_scaling_arg(text: str) -> Optional[dict]:
    if text == "none":
        return None
    if text == "llama3":
        return {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}
    kind, sep, factor = text.partition(":")
    if kind == "linear" and sep:
        try:
            return {"rope_type": "linear", "factor": float(factor)}
        except ValueError:
            pass
    raise argparse.ArgumentTypeError(f"--rope-scaling takes none, linear:F or llama3, not {text!r}")


def softcap_arg(text: str) -> float:
    """A soft-cap C > 0, or 0 / none for none (to drop --gemma 2's)."""
    if text == "none":
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"a soft-cap is a positive number, 0 or none, not {text!r}")
    return value


def add_config_args(p: argparse.ArgumentParser) -> None:
    d = Config()
    p.add_argument("--vocab", type=int, default=d.vocab_size)
    p.add_argument("--hidden", type=int, default=d.hidden_size)
    p.add_argument("--layers", type=int, default=d.num_hidden_layers)
    p.add_argument("--heads", type=int, default=d.num_attention_heads)
    p.add_argument("--kv-heads", type=int, default=d.num_key_value_heads)
    p.add_argument("--head-dim", type=int, default=d.head_dim)
    p.add_argument("--intermediate", type=int, default=d.intermediate_size)
    p.add_argument("--eps", type=float, default=d.rms_norm_eps)
    p.add_argument("--rope-theta", type=float, default=None,
                   help="default 1e4, or 5e5 with --rope-scaling llama3")
    p.add_argument("--max-position", type=int, default=d.max_position_embeddings)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--tie-embeddings", action="store_true", help="lm_head shares the embedding")
    p.add_argument("--mask-style", choices=("where", "masked_fill", "triu"), default=d.mask_style)
    p.add_argument("--mask-value", choices=sorted(MASK_VALUES), default=d.mask_value)
    p.add_argument("--rope-scaling", type=rope_scaling_arg, default=None, metavar="none|linear:F|llama3")
    p.add_argument("--partial-rotary", type=float, default=1.0, metavar="F",
                   help="rotary dim = F * head_dim (the rest of each head passes through)")
    p.add_argument("--qkv-bias", action="store_true", help="biases on q, k, v (Qwen2)")
    p.add_argument("--sliding-window", type=int, default=None, metavar="N",
                   help="keys older than N positions are masked (Mistral)")
    p.add_argument("--rope-cache", action="store_true",
                   help="cos/sin as precomputed tables gathered by position_ids")
    p.add_argument("--interleaved-rope", action="store_true",
                   help="rotate interleaved pairs (GPT-J) instead of rotate_half")
    p.add_argument("--linear", choices=("linear", "addmm"), default="linear",
                   help="addmm: every projection in the layers as GPT-2's Conv1D, "
                        "addmm(bias, x.view(-1, in), W^T).view(.., out) (exports as Gemm)")
    p.add_argument("--fused-qkv", choices=("none", "split", "slice"), default="none",
                   help="q, k and v from one projection, cut by Split (GPT-2's c_attn.split) or "
                        "by Slices of the last axis (Phi-3's qkv_proj)")
    p.add_argument("--norm", choices=("rms", "layer"), default="rms",
                   help="layer: every norm an nn.LayerNorm with a bias (StableLM 2)")
    p.add_argument("--qk-norm", action="store_true",
                   help="RMSNorm over each head of q and of k before the rotation (Qwen3)")
    p.add_argument("--parallel-residual", choices=("none", "two-norms", "shared-norm"),
                   default="none",
                   help="the attention and the MLP both read the layer's input, each through its "
                        "own norm (GPT-NeoX) or one shared norm (Phi-2, Falcon)")
    p.add_argument("--attention", choices=("eager", "sdpa"), default="eager",
                   help="sdpa: scores as torch.onnx writes scaled_dot_product_attention, q and "
                        "k^T each scaled by sqrt(scale) before the product")
    g = p.add_argument_group("Gemma forms", "each defaults to off unless --gemma sets it; a flag "
                                            "given overrides the preset's value")
    g.add_argument("--gemma", type=int, choices=(1, 2), default=None,
                   help="1: --embedding-scale --norm-offset --hidden-act gelu_pytorch_tanh "
                        "--tie-embeddings (model_type gemma); 2: also --sandwich-norms "
                        "--attn-softcap 50 --final-softcap 30 --query-pre-attn-scalar HEAD_DIM "
                        "--sliding-window-layers even (model_type gemma2; the window is "
                        "--sliding-window's)")
    g.add_argument("--embedding-scale", action="store_true",
                   help="embeddings times sqrt(hidden), a tensor of the hidden dtype (Gemma)")
    g.add_argument("--norm-offset", action="store_true",
                   help="every RMSNorm is GemmaRMSNorm: float32, times (1 + weight)")
    g.add_argument("--hidden-act", choices=tuple(ACTIVATIONS), default=None,
                   help="the MLP's activation (default silu; gelu_pytorch_tanh with --gemma)")
    g.add_argument("--attn-softcap", type=softcap_arg, default=None, metavar="C",
                   help="attention scores tanh(s / C) * C before the mask (Gemma 2); 0 or none: off")
    g.add_argument("--final-softcap", type=softcap_arg, default=None, metavar="C",
                   help="logits tanh(l / C) * C (Gemma 2); 0 or none: off")
    g.add_argument("--query-pre-attn-scalar", type=float, default=None, metavar="S",
                   help="attention scale S ** -0.5 instead of head_dim ** -0.5 (Gemma 2)")
    g.add_argument("--sandwich-norms", action="store_true",
                   help="Gemma 2's four norms per layer: post-attention and pre/post-feedforward")
    g.add_argument("--sliding-window-layers", choices=("all", "even"), default=None,
                   help="with --sliding-window: every layer uses it (default) or only layers 0, 2, "
                        "4, ... (Gemma 2; the others attend to everything)")


def config_from_args(a) -> Config:
    theta = a.rope_theta
    if theta is None:
        theta = 500000.0 if a.rope_scaling and a.rope_scaling.get("rope_type") == "llama3" else 10000.0
    config = Config(
        vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
        intermediate_size=a.intermediate, rms_norm_eps=a.eps, rope_theta=theta,
        max_position_embeddings=a.max_position, tie_word_embeddings=a.tie_embeddings,
        rope_scaling=a.rope_scaling, partial_rotary_factor=a.partial_rotary, qkv_bias=a.qkv_bias,
        sliding_window=a.sliding_window, mask_style=a.mask_style, mask_value=a.mask_value,
        rope_form="cache" if a.rope_cache else "inline", rope_interleaved=a.interleaved_rope,
        attention=a.attention, linear=a.linear, fused_qkv=a.fused_qkv,
        parallel_residual=a.parallel_residual, qk_norm=a.qk_norm, norm_type=a.norm, seed=a.seed)
    gemma = a.gemma
    if gemma:
        # The preset, then the flags given, which override it.
        config.embedding_scale = config.norm_offset = config.tie_word_embeddings = True
        config.hidden_act = "gelu_pytorch_tanh"
        config.model_type, config.architectures = "gemma", ["GemmaForCausalLM"]
        if gemma == 2:
            config.sandwich_norms = True
            config.attn_logit_softcapping, config.final_logit_softcapping = 50.0, 30.0
            config.query_pre_attn_scalar = float(config.head_dim)
            config.sliding_window_layers = "even"
            config.model_type, config.architectures = "gemma2", ["Gemma2ForCausalLM"]
    config.embedding_scale |= a.embedding_scale
    config.norm_offset |= a.norm_offset
    config.sandwich_norms |= a.sandwich_norms
    if a.hidden_act is not None:
        config.hidden_act = a.hidden_act
    if a.attn_softcap is not None:
        config.attn_logit_softcapping = a.attn_softcap or None
    if a.final_softcap is not None:
        config.final_logit_softcapping = a.final_softcap or None
    if a.query_pre_attn_scalar is not None:
        config.query_pre_attn_scalar = a.query_pre_attn_scalar
    if a.sliding_window_layers is not None:
        config.sliding_window_layers = a.sliding_window_layers
    if config.num_attention_heads % config.num_key_value_heads:
        raise ValueError("--heads must be a multiple of --kv-heads")
    config.rotary_dim  # validates partial_rotary_factor
    config.check()
    return config


def export(config: Config, out_dir: str, verbose: bool = False, constant_folding: bool = True) -> str:
    return common.export_decoder(build_model(config), asdict(config), out_dir, config.vocab_size,
                                 config.num_hidden_layers, config.num_key_value_heads,
                                 config.head_dim, position_ids=True, verbose=verbose,
                                 constant_folding=constant_folding)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write model.onnx, config.json, weights.pt")
    e.add_argument("--out", required=True, help="output directory")
    e.add_argument("--verbose", action="store_true", help="show the exporter's warnings")
    e.add_argument("--print-ops", action="store_true")
    e.add_argument("--no-constant-folding", action="store_true",
                   help="torch.onnx.export(do_constant_folding=False): constants stay as nodes")
    e.add_argument("--batch-one", action="store_true",
                   help="declare every input's and output's batch dimension as 1 (an export for "
                        "one sequence at a time)")
    add_config_args(e)
    r = sub.add_parser("reference", help="greedy decoding in PyTorch to JSON")
    common.add_reference_args(r)
    a = p.parse_args(argv)

    if a.command == "export":
        try:
            config = config_from_args(a)
        except ValueError as err:
            p.error(str(err))
        path = export(config, a.out, verbose=a.verbose, constant_folding=not a.no_constant_folding)
        if a.batch_one:
            import onnx
            model = onnx.load(path)
            for value in list(model.graph.input) + list(model.graph.output):
                dim = value.type.tensor_type.shape.dim[0]
                dim.ClearField("dim_param")
                dim.dim_value = 1
            onnx.save(model, path)
        print(f"wrote {path}, config.json, weights.pt")
        if a.print_ops:
            print(common.op_summary(path))
        return 0

    model = load_model(a.model_dir)
    try:
        return common.run_reference(a, model, model.empty_past, model.config.vocab_size,
                                    f"torch {torch.__version__} (hf_llama.py)")
    except (ValueError, RuntimeError) as err:
        print(f"hf_llama.py reference: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
