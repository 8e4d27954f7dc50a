#!/usr/bin/python3
"""A GPT-NeoX (Pythia) decoder written after Hugging Face transformers' modeling_gpt_neox.py
(4.3x-4.4x, eager attention), exported with torch.onnx.export, plus its PyTorch greedy reference.

    /usr/bin/python3 models/exports/gpt_neox.py export --out DIR [--vocab 512 --hidden 128 ...]
    /usr/bin/python3 models/exports/gpt_neox.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]

export writes DIR/model.onnx (opset 17; inputs input_ids, attention_mask, position_ids,
past_key_values.{i}.key/value [batch, heads, past, head_size]; outputs logits,
present.{i}.key/value), DIR/config.json (GPTNeoXConfig's field names) and DIR/weights.pt (the
state_dict, with transformers' parameter names).

Semantics, as transformers has them:
  * embed_in (nn.Embedding), no position embedding; a final LayerNorm with bias and an untied
    embed_out (no bias);
  * each layer: input_layernorm and post_attention_layernorm, LayerNorms with bias (eps
    layer_norm_eps); use_parallel_residual: mlp(ln2(x)) + attn(ln1(x)) + x, summed in that order;
    --no-parallel-residual: a = attn(ln1(x)) + x, then mlp(ln2(a)) + a;
  * one query_key_value projection with bias, viewed [batch, seq, heads, 3 * head_size] and sliced
    per head into q, k, v (q, k and v interleaved by head, not in three blocks), each permuted to
    [batch, heads, seq, head_size];
  * partial rotary: rotate_half on the first rotary_ndims = int(head_size * rotary_pct) of each
    head of q and k, the rest passed through and concatenated back; cos/sin from inv_freq and
    position_ids in the graph (4.45+), or with --rope-cache each layer's own cos_cached/sin_cached
    tables [max_position, rotary_ndims], sliced to the attended length and gathered by
    position_ids (4.3x-4.44);
  * the cache [batch, heads, past, head_size] concatenated on the sequence axis after the rotation;
  * scores torch.baddbmm(zeros, q, k^T, beta=1, alpha=head_size ** -0.5) over batch * heads, viewed
    back to [batch, heads, q, k] (--scores matmul: matmul(q, k^T) * head_size ** -0.5, 4.48+);
  * the mask (--mask-style neox, 4.3x-4.41): torch.where(bias, scores, finfo.min) with `bias` each
    layer's tril buffer [1, 1, max_position, max_position] sliced to [past:total, :total], then
    the padding (1 - attention_mask) * finfo.min added; or hf_llama.py's build_mask forms, an
    additive [batch, 1, q, total] mask (--mask-style triu is 4.42-4.4x's _update_causal_mask);
  * softmax (float32: the module is float32), matmul with v, heads merged, dense with bias;
  * MLP dense_h_to_4h -> gelu (erf; --hidden-act gelu_new: the tanh form written out) ->
    dense_4h_to_h, both with bias.
"""

import argparse
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Optional, Tuple

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import hf_llama  # noqa: E402
import opt  # noqa: E402

# --mask-style: neox is modeling_gpt_neox.py's own (4.3x-4.41); the others are hf_llama.build_mask's.
MASK_STYLES = ("neox", "where", "masked_fill", "triu")


@dataclass
class Config:
    vocab_size: int = 512
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 512
    hidden_act: str = "gelu"
    rotary_pct: float = 0.25
    rotary_emb_base: float = 10000.0
    max_position_embeddings: int = 256
    layer_norm_eps: float = 1e-5
    use_parallel_residual: bool = True
    attention_bias: bool = True
    tie_word_embeddings: bool = False
    # Variants (not GPTNeoXConfig fields): how the graph writes the same function.
    rope_form: str = "inline"          # inline (inv_freq @ position_ids) | cache (tables)
    attention_scores: str = "baddbmm"  # baddbmm | matmul
    mask_style: str = "neox"           # neox | where | masked_fill | triu
    mask_value: str = "finfo-min"      # hf_llama.build_mask's fill (the neox form uses finfo.min)
    seed: int = 0
    model_type: str = "gpt_neox"
    architectures: list = field(default_factory=lambda: ["GPTNeoXForCausalLM"])
    torch_dtype: str = "float32"

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def rotary_ndims(self) -> int:
        return int(self.head_size * self.rotary_pct)

    def check(self) -> None:
        """Raises ValueError for sizes and forms that do not combine."""
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        dim = self.rotary_ndims
        if dim % 2 or not 0 < dim <= self.head_size:
            raise ValueError(f"rotary_ndims {dim} (head_size {self.head_size} x rotary_pct "
                             f"{self.rotary_pct}) must be even and within head_size")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"unknown hidden_act {self.hidden_act!r} (one of {', '.join(ACTIVATIONS)})")
        if self.rope_form not in ("inline", "cache"):
            raise ValueError(f"unknown rope_form {self.rope_form!r}")
        if self.attention_scores not in ("baddbmm", "matmul"):
            raise ValueError(f"unknown attention_scores {self.attention_scores!r}")
        if self.mask_style not in MASK_STYLES:
            raise ValueError(f"unknown mask_style {self.mask_style!r} (one of {', '.join(MASK_STYLES)})")

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


class GELUActivation(nn.Module):
    """transformers' ACT2FN["gelu"]: nn.functional.gelu, the erf form (exports as Erf)."""

    def forward(self, x):
        return nn.functional.gelu(x)


# transformers' ACT2FN entries a GPT-NeoX config may name (Pythia uses gelu).
ACTIVATIONS = {"gelu": GELUActivation, "gelu_new": opt.NewGELU}


class GPTNeoXAttention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.num_attention_heads = config.num_attention_heads
        self.hidden_size = config.hidden_size
        self.head_size = config.head_size
        self.rotary_ndims = config.rotary_ndims
        if config.mask_style == "neox":
            max_positions = config.max_position_embeddings
            self.register_buffer("bias", torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool))
                                 .view(1, 1, max_positions, max_positions), persistent=False)
        if config.rope_form == "cache":
            # 4.3x-4.44: each layer's attention has its own tables.
            self.rotary_emb = hf_llama.FamilyRotaryEmbedding(
                config.rotary_ndims, config.rotary_emb_base, config.max_position_embeddings, "cache")
        self.norm_factor = self.head_size ** -0.5
        self.query_key_value = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings=None,
                layer_past: Optional[Tuple] = None):
        has_layer_past = layer_past is not None
        qkv = self.query_key_value(hidden_states)
        # [batch, seq, 3 * hidden] -> [batch, seq, heads, 3 * head_size]
        new_qkv_shape = qkv.size()[:-1] + (self.num_attention_heads, 3 * self.head_size)
        qkv = qkv.view(*new_qkv_shape)
        # [batch, seq, heads, 3 * head_size] -> 3 x [batch, heads, seq, head_size]
        query = qkv[..., : self.head_size].permute(0, 2, 1, 3)
        key = qkv[..., self.head_size: 2 * self.head_size].permute(0, 2, 1, 3)
        value = qkv[..., 2 * self.head_size:].permute(0, 2, 1, 3)

        # Partial rotary: the first rotary_ndims of each head.
        query_rot = query[..., : self.rotary_ndims]
        query_pass = query[..., self.rotary_ndims:]
        key_rot = key[..., : self.rotary_ndims]
        key_pass = key[..., self.rotary_ndims:]
        if self.config.rope_form == "cache":
            seq_len = key.shape[-2]
            if has_layer_past:
                seq_len += layer_past[0].shape[-2]
            cos, sin = self.rotary_emb(value, seq_len=seq_len)
            query, key = hf_llama.apply_rotary_pos_emb(query_rot, key_rot, cos, sin, position_ids)
        else:
            cos, sin = position_embeddings
            query, key = hf_llama.apply_rotary_pos_emb(query_rot, key_rot, cos, sin)
        query = torch.cat((query, query_pass), dim=-1)
        key = torch.cat((key, key_pass), dim=-1)

        if has_layer_past:
            past_key = layer_past[0]
            past_value = layer_past[1]
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        present = (key, value)

        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_attention_heads, self.head_size)
        return self.dense(attn_output), present

    @classmethod
    def _merge_heads(cls, tensor, num_attention_heads, attn_head_size):
        # [batch, heads, seq, head_size] -> [batch, seq, hidden]
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size(0), tensor.size(1), num_attention_heads * attn_head_size)

    def _attn(self, query, key, value, attention_mask):
        batch_size, num_attention_heads, query_length, attn_head_size = query.size()
        key_length = key.size(-2)
        if self.config.attention_scores == "baddbmm":
            query = query.view(batch_size * num_attention_heads, query_length, attn_head_size)
            key = key.view(batch_size * num_attention_heads, key_length, attn_head_size)
            attn_scores = torch.zeros(batch_size * num_attention_heads, query_length, key_length,
                                      dtype=query.dtype, device=key.device)
            attn_scores = torch.baddbmm(attn_scores, query, key.transpose(1, 2), beta=1.0,
                                        alpha=self.norm_factor)
            attn_scores = attn_scores.view(batch_size, num_attention_heads, query_length, key_length)
        else:
            attn_scores = torch.matmul(query, key.transpose(-1, -2)) * self.norm_factor

        if self.config.mask_style == "neox":
            if key_length > self.bias.shape[-1]:
                raise ValueError(f"{key_length} positions, past max_position_embeddings {self.bias.shape[-1]}")
            causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
            mask_value = torch.finfo(attn_scores.dtype).min
            mask_value = torch.tensor(mask_value, dtype=attn_scores.dtype).to(attn_scores.device)
            attn_scores = torch.where(causal_mask, attn_scores, mask_value)
            # the padding, (1 - attention_mask) * finfo.min [batch, 1, 1, total]
            attn_scores = attn_scores + attention_mask
        else:
            # 4.42+: the additive causal + padding mask [batch, 1, q, total]
            attn_scores = attn_scores + attention_mask[:, :, :, :key_length]

        attn_weights = nn.functional.softmax(attn_scores, dim=-1)
        attn_weights = attn_weights.to(value.dtype)
        return torch.matmul(attn_weights, value)


class GPTNeoXMLP(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(config.hidden_size, config.intermediate_size)
        self.dense_4h_to_h = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = ACTIVATIONS[config.hidden_act]()

    def forward(self, hidden_states):
        hidden_states = self.dense_h_to_4h(hidden_states)
        hidden_states = self.act(hidden_states)
        return self.dense_4h_to_h(hidden_states)


class GPTNeoXLayer(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.use_parallel_residual = config.use_parallel_residual
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = GPTNeoXAttention(config)
        self.mlp = GPTNeoXMLP(config)

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings, layer_past):
        attn_output, present = self.attention(self.input_layernorm(hidden_states), attention_mask,
                                              position_ids, position_embeddings, layer_past)
        if self.use_parallel_residual:
            # pseudocode: x = x + attn(ln1(x)) + mlp(ln2(x))
            mlp_output = self.mlp(self.post_attention_layernorm(hidden_states))
            hidden_states = mlp_output + attn_output + hidden_states
        else:
            # pseudocode: x = x + attn(ln1(x)); x = x + mlp(ln2(x))
            attn_output = attn_output + hidden_states
            mlp_output = self.mlp(self.post_attention_layernorm(attn_output))
            hidden_states = mlp_output + attn_output
        return hidden_states, present


class GPTNeoXModel(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.embed_in = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([GPTNeoXLayer(config) for _ in range(config.num_hidden_layers)])
        self.final_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        if config.rope_form == "inline":
            # 4.45+: one rotary embedding for all layers.
            self.rotary_emb = hf_llama.FamilyRotaryEmbedding(
                config.rotary_ndims, config.rotary_emb_base, config.max_position_embeddings, "inline")


class GPTNeoXForCausalLM(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        config.check()
        self.config = config
        self.gpt_neox = GPTNeoXModel(config)
        self.embed_out = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
        m = self.gpt_neox
        c = self.config
        seq = input_ids.shape[1]
        past = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        hidden_states = m.embed_in(input_ids)
        dtype = hidden_states.dtype
        if c.mask_style == "neox":
            # 4.3x-4.41 GPTNeoXModel: [batch, 1, 1, total], 0 where attended, finfo.min on padding;
            # each layer adds it after its own causal torch.where.
            mask = attention_mask[:, None, None, :].to(dtype=dtype)
            mask = (1.0 - mask) * torch.finfo(dtype).min
        else:
            mask = hf_llama.build_mask(c, attention_mask, seq, past, dtype)
        position_embeddings = m.rotary_emb(hidden_states, position_ids) if c.rope_form == "inline" else None
        presents = []
        for i, layer in enumerate(m.layers):
            layer_past = None if past_key_values is None else past_key_values[i]
            hidden_states, present = layer(hidden_states, mask, position_ids, position_embeddings, layer_past)
            presents.append(present)
        hidden_states = m.final_layer_norm(hidden_states)
        return self.embed_out(hidden_states).float(), tuple(presents)

    def empty_past(self, batch: int):
        c = self.config
        shape = (batch, c.num_attention_heads, 0, c.head_size)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.num_hidden_layers))


@torch.no_grad()
def init_weights(model: GPTNeoXForCausalLM, seed: int) -> None:
    """Seeded weights, large enough that greedy decoding gives varied tokens: linears N(0, 1/fan_in)
    (embed_out too) except query_key_value, N(0, 2.5^2/fan_in), biases N(0, 0.1^2), LayerNorm
    weights 1 + 0.1 N(0, 1) and biases 0.1 N(0, 1), the token embedding N(0, 1).

    query_key_value's larger weights sharpen the attention, so that the context and not only the
    current token's embedding decides the next token: with N(0, 1/fan_in) there too, greedy decoding
    of the default model falls into cycles of one to three tokens (23 of 32 tokens one id)."""
    common.init_decoder_weights(
        model, seed, is_norm=lambda name: "layernorm" in name or "layer_norm" in name,
        embedding_std=lambda name: 1.0 if name == "gpt_neox.embed_in.weight" else None,
        sharpened=("query_key_value.weight",))


def build_model(config: Config) -> GPTNeoXForCausalLM:
    model = GPTNeoXForCausalLM(config)
    init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> GPTNeoXForCausalLM:
    return common.load_model(model_dir, Config.from_dict, GPTNeoXForCausalLM, init_weights)


def export(config: Config, out_dir: str, verbose: bool = False, opset: int = 17) -> str:
    return common.export_decoder(build_model(config), asdict(config), out_dir, config.vocab_size,
                                 config.num_hidden_layers, config.num_attention_heads,
                                 config.head_size, position_ids=True, verbose=verbose, opset=opset)


def add_export_args(e: argparse.ArgumentParser) -> None:
    d = Config()
    e.add_argument("--vocab", type=int, default=d.vocab_size)
    e.add_argument("--hidden", type=int, default=d.hidden_size)
    e.add_argument("--layers", type=int, default=d.num_hidden_layers)
    e.add_argument("--heads", type=int, default=d.num_attention_heads)
    e.add_argument("--intermediate", type=int, default=d.intermediate_size)
    e.add_argument("--max-position", type=int, default=d.max_position_embeddings)
    e.add_argument("--rotary-pct", type=float, default=d.rotary_pct,
                   help="rotary_ndims = int(head_size * F), the rest of each head passes through")
    e.add_argument("--rotary-base", type=float, default=d.rotary_emb_base, help="rotary_emb_base")
    e.add_argument("--eps", type=float, default=d.layer_norm_eps, help="layer_norm_eps")
    e.add_argument("--hidden-act", choices=sorted(ACTIVATIONS), default=d.hidden_act,
                   help="the MLP's activation (gelu exports as Erf, gelu_new as Tanh and Pow)")
    e.add_argument("--no-parallel-residual", action="store_true",
                   help="use_parallel_residual=False: the MLP reads the attention's output added "
                        "to the input")
    e.add_argument("--scores", choices=("baddbmm", "matmul"), default=d.attention_scores,
                   help="baddbmm(zeros, q, k^T, alpha=scale) over batch * heads (4.3x-4.4x), or "
                        "matmul(q, k^T) * scale")
    e.add_argument("--rope-cache", action="store_true",
                   help="each layer's cos/sin tables sliced to the attended length and gathered "
                        "by position_ids (4.3x-4.44), instead of inv_freq @ position_ids in the graph")
    e.add_argument("--mask-style", choices=MASK_STYLES, default=d.mask_style,
                   help="neox: torch.where(tril bias, scores, finfo.min) + the padding (4.3x-4.41); "
                        "where, masked_fill, triu: hf_llama.py's additive mask forms")
    e.add_argument("--seed", type=int, default=d.seed)


def config_from_args(a) -> Config:
    config = Config(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                    num_attention_heads=a.heads, intermediate_size=a.intermediate,
                    hidden_act=a.hidden_act, rotary_pct=a.rotary_pct, rotary_emb_base=a.rotary_base,
                    max_position_embeddings=a.max_position, layer_norm_eps=a.eps,
                    use_parallel_residual=not a.no_parallel_residual,
                    rope_form="cache" if a.rope_cache else "inline", attention_scores=a.scores,
                    mask_style=a.mask_style, seed=a.seed)
    config.check()
    return config


def main(argv=None) -> int:
    return common.exporter_main(argv, __doc__, "gpt_neox.py", add_export_args, config_from_args, export,
                                load_model)


if __name__ == "__main__":
    sys.exit(main())
