#!/usr/bin/python3
"""A Falcon decoder written after Hugging Face transformers' modeling_falcon.py (4.3x-4.4x, eager
attention, rotary or, with --alibi, ALiBi as Falcon-RW's), exported with torch.onnx.export, plus
its PyTorch greedy reference.

    /usr/bin/python3 models/exports/falcon.py export --out DIR [--vocab 512 --hidden 128 ...]
    /usr/bin/python3 models/exports/falcon.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]

export writes DIR/model.onnx (opset 17; inputs input_ids, attention_mask, position_ids,
past_key_values.{i}.key/value [batch, cache_heads, past, head_dim]; outputs logits,
present.{i}.key/value), DIR/config.json (FalconConfig's field names) and DIR/weights.pt (the
state_dict, with transformers' parameter names).

The cache holds what transformers' cache holds: with multi_query (falcon-7b, the default) one
key/value head, [batch, 1, total, head_dim]; with --new-decoder-architecture (falcon-40b/180b) the
keys and values already broadcast to every query head, [batch, num_attention_heads, total,
head_dim] (transformers reshapes them to num_heads, not num_kv_heads, before the cache); with
--no-multi-query [batch, num_attention_heads, total, head_dim].

Semantics, as transformers has them (the defaults are falcon-7b's config at tiny sizes):
  * word_embeddings (nn.Embedding), no position embedding; ln_f, a LayerNorm with bias; lm_head
    (no bias) tied to word_embeddings (tie_word_embeddings);
  * every projection in the layers a FalconLinear: input @ weight.T (+ bias with --bias), not
    F.linear;
  * one query_key_value projection, split by _split_heads:
      multi_query (old architecture): hidden + 2 * head_dim outputs viewed
        [batch, seq, num_heads + 2, head_dim]; query [..., :-2, :], key [..., [-2], :],
        value [..., [-1], :] (one KV head);
      --no-multi-query: 3 * hidden outputs viewed [batch, seq, num_heads, 3, head_dim];
      --new-decoder-architecture: (2 * num_kv_heads + num_heads) * head_dim outputs viewed
        [batch, seq, num_kv_heads, num_heads / num_kv_heads + 2, head_dim] (each KV group's
        queries, then its key, then its value); key and value torch.broadcast_to the query's
        shape and every one flattened to [batch, seq, num_heads, head_dim];
    then transposed to [batch, heads, seq, head_dim];
  * rotary on whole heads (rotate_half, rope_theta): by default 4.36-4.44's per-layer
    hf_llama.FamilyRotaryEmbedding tables cos_cached/sin_cached [max_position, head_dim], sliced to the
    attended length and gathered by position_ids; with --rope-inline 4.45+'s inv_freq @
    position_ids in the graph;
  * with --alibi (Falcon-RW-1B: also --no-multi-query --no-parallel-attn --bias) no rotation:
    BLOOM's alibi [batch * heads, 1, total] from the attention mask (bloom.build_alibi_tensor),
    added to the scores viewed [batch, heads, q, total] before they are scaled (attention_logits
    = scores + alibi.view(batch, heads, 1, -1); attention_logits *= inv_norm_factor);
  * the cache concatenated on the sequence axis after the rotation;
  * scores query @ key^T (torch.matmul broadcasting the single KV head over the query heads,
    no expand), divided in place by sqrt(head_dim), plus the additive mask [batch, 1, q, total];
    softmax(dtype=float32), @ value (broadcast the same way), heads merged, dense;
  * the mask: by default 4.36-4.4x's _prepare_4d_causal_attention_mask (_make_causal_mask's
    masked_fill over the new tokens, zeros for the past, then the padding masked_fill with
    finfo.min: hf_llama.build_mask's "masked_fill" form); --mask-style where|triu for
    hf_llama.build_mask's other forms (triu is 4.45+'s _update_causal_mask);
  * MLP dense_h_to_4h (hidden -> 4 * hidden) -> nn.GELU() (erf) -> dense_4h_to_h;
  * each layer, parallel_attn (old architecture): one input_layernorm read by both the attention
    and the MLP; output = (mlp + attn) + x (mlp_output += attention_output, then dropout_add
    with the residual); --new-decoder-architecture: ln_attn and ln_mlp, both of x, summed the
    same way; --no-parallel-attn: a = attn(input_layernorm(x)) + x, then
    mlp(post_attention_layernorm(a)) + a.
"""

import argparse
import math
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Optional, Tuple

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bloom  # noqa: E402
import common  # noqa: E402
import hf_llama  # noqa: E402

# --mask-style: hf_llama.build_mask's forms; masked_fill is 4.36-4.4x's
# _prepare_4d_causal_attention_mask, triu 4.45+'s _update_causal_mask.
MASK_STYLES = ("masked_fill", "where", "triu")


@dataclass
class Config:
    vocab_size: int = 512
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    # FalconConfig sets num_kv_heads = num_attention_heads when none is given and writes it so;
    # the old multi_query architecture ignores it (one KV head).
    num_kv_heads: Optional[int] = None
    layer_norm_epsilon: float = 1e-5
    multi_query: bool = True
    parallel_attn: bool = True
    bias: bool = False
    alibi: bool = False
    new_decoder_architecture: bool = False
    max_position_embeddings: int = 256
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = None
    # 4.41+ fields; 4.3x-4.40 hard-code 4 * hidden_size and GELU.
    ffn_hidden_size: Optional[int] = None
    activation: str = "gelu"
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    tie_word_embeddings: bool = True
    # Variants (not FalconConfig fields): how the graph writes the same function.
    rope_form: str = "cache"           # cache (per-layer tables, 4.36-4.44) | inline (4.45+)
    mask_style: str = "masked_fill"    # hf_llama.build_mask's masked_fill | where | triu
    mask_value: str = "finfo-min"      # hf_llama.build_mask's fill
    seed: int = 0
    model_type: str = "falcon"
    architectures: list = field(default_factory=lambda: ["FalconForCausalLM"])
    torch_dtype: str = "float32"

    def __post_init__(self):
        if self.num_kv_heads is None:
            self.num_kv_heads = self.num_attention_heads
        if self.ffn_hidden_size is None:
            self.ffn_hidden_size = 4 * self.hidden_size

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def cache_heads(self) -> int:
        """The heads of the past/present tensors, as transformers' cache holds them."""
        if self.new_decoder_architecture:
            return self.num_attention_heads
        return 1 if self.multi_query else self.num_kv_heads

    def check(self) -> None:
        """Raises ValueError for sizes and forms that do not combine."""
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even (rotary on whole heads)")
        if self.rope_scaling is not None:
            raise ValueError("rope_scaling is not modelled here")
        if self.activation != "gelu" or self.ffn_hidden_size != 4 * self.hidden_size:
            raise ValueError("the MLP is 4.3x's: 4 * hidden_size and GELU")
        if self.new_decoder_architecture:
            if self.num_attention_heads % self.num_kv_heads:
                raise ValueError(f"num_kv_heads {self.num_kv_heads} must divide num_attention_heads "
                                 f"{self.num_attention_heads}")
            if not self.parallel_attn:
                raise ValueError("the new decoder architecture is parallel (ln_attn and ln_mlp)")
        elif self.num_kv_heads != self.num_attention_heads:
            raise ValueError("num_kv_heads other than num_attention_heads needs the new decoder "
                             "architecture (multi_query has one KV head)")
        if self.rope_form not in ("cache", "inline"):
            raise ValueError(f"unknown rope_form {self.rope_form!r}")
        if self.mask_style not in MASK_STYLES:
            raise ValueError(f"unknown mask_style {self.mask_style!r} (one of {', '.join(MASK_STYLES)})")

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


class FalconLinear(nn.Linear):
    """transformers' FalconLinear: the matmul and the bias unfused (input @ weight.T, + bias)."""

    def forward(self, input):
        hidden_states = input @ self.weight.T
        if self.bias is None:
            return hidden_states
        return hidden_states + self.bias


class FalconAttention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.new_decoder_architecture = config.new_decoder_architecture
        self.multi_query = config.multi_query
        if config.new_decoder_architecture:
            qkv_out_dim = (config.num_kv_heads * 2 + config.num_attention_heads) * self.head_dim
        elif config.multi_query:
            qkv_out_dim = self.hidden_size + 2 * self.head_dim
        else:
            qkv_out_dim = 3 * self.hidden_size
        self.query_key_value = FalconLinear(self.hidden_size, qkv_out_dim, bias=config.bias)
        self.dense = FalconLinear(self.hidden_size, self.hidden_size, bias=config.bias)
        self.num_kv_heads = config.num_kv_heads if (self.new_decoder_architecture or not self.multi_query) else 1
        if config.rope_form == "cache" and not config.alibi:
            # 4.36-4.44: each layer's attention has its own tables (_init_rope).
            self.rotary_emb = hf_llama.FamilyRotaryEmbedding(
                config.head_dim, config.rope_theta, config.max_position_embeddings, "cache")

    def _split_heads(self, fused_qkv):
        if self.new_decoder_architecture:
            batch, seq_len, _ = fused_qkv.shape
            qkv = fused_qkv.view(batch, seq_len, -1, self.num_heads // self.num_kv_heads + 2, self.head_dim)
            query = qkv[:, :, :, :-2]
            key = qkv[:, :, :, [-2]]
            value = qkv[:, :, :, [-1]]
            key = torch.broadcast_to(key, query.shape)
            value = torch.broadcast_to(value, query.shape)
            query, key, value = [x.flatten(2, 3) for x in (query, key, value)]
            return query, key, value
        elif not self.multi_query:
            batch_size, seq_length, three_times_hidden_size = fused_qkv.shape
            fused_qkv = fused_qkv.view(batch_size, seq_length, self.num_heads, 3, self.head_dim)
            return fused_qkv[..., 0, :], fused_qkv[..., 1, :], fused_qkv[..., 2, :]
        else:
            batch_size, seq_length, three_times_hidden_size = fused_qkv.shape
            fused_qkv = fused_qkv.view(batch_size, seq_length, self.num_heads + 2, self.head_dim)
            return fused_qkv[..., :-2, :], fused_qkv[..., [-2], :], fused_qkv[..., [-1], :]

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings=None,
                layer_past: Optional[Tuple] = None):
        fused_qkv = self.query_key_value(hidden_states)  # [batch_size, seq_length, qkv_out_dim]
        num_kv_heads = self.num_heads if self.new_decoder_architecture else self.num_kv_heads
        (query_layer, key_layer, value_layer) = self._split_heads(fused_qkv)

        batch_size, query_length, _, _ = query_layer.shape

        query_layer = query_layer.transpose(1, 2).reshape(batch_size, self.num_heads, query_length, self.head_dim)
        key_layer = key_layer.transpose(1, 2).reshape(batch_size, num_kv_heads, query_length, self.head_dim)
        value_layer = value_layer.transpose(1, 2).reshape(batch_size, num_kv_heads, query_length, self.head_dim)

        if self.config.alibi:
            pass  # no rotation: position_embeddings holds ALiBi's bias
        elif self.config.rope_form == "cache":
            kv_seq_len = key_layer.shape[-2]
            if layer_past is not None:
                kv_seq_len += layer_past[0].shape[-2]
            cos, sin = self.rotary_emb(value_layer, seq_len=kv_seq_len)
            query_layer, key_layer = hf_llama.apply_rotary_pos_emb(query_layer, key_layer, cos, sin, position_ids)
        else:
            cos, sin = position_embeddings
            query_layer, key_layer = hf_llama.apply_rotary_pos_emb(query_layer, key_layer, cos, sin)

        if layer_past is not None:
            past_key, past_value = layer_past
            # concatenate along the sequence axis: [batch_size, num_kv_heads, kv_length, head_dim]
            key_layer = torch.cat((past_key, key_layer), dim=-2)
            value_layer = torch.cat((past_value, value_layer), dim=-2)
        present = (key_layer, value_layer)

        if self.config.alibi:
            # eager with alibi: the bias added before the scale
            kv_length = key_layer.shape[-2]
            attention_scores = (query_layer @ key_layer.transpose(-1, -2)).view(
                batch_size, self.num_heads, query_length, kv_length)
            attention_logits = attention_scores + position_embeddings.view(batch_size, self.num_heads, 1, -1)
            attention_logits *= 1.0 / math.sqrt(self.head_dim)
            attention_probs = F.softmax(attention_logits + attention_mask, dim=-1, dtype=hidden_states.dtype)
            attn_output = (attention_probs @ value_layer).view(batch_size, self.num_heads, query_length,
                                                               self.head_dim)
            attn_output = attn_output.permute(0, 2, 1, 3).reshape(batch_size, query_length,
                                                                  self.num_heads * self.head_dim)
            return self.dense(attn_output), present
        # eager, no alibi: matmul broadcasts a single KV head over the query heads
        attention_scores = query_layer @ key_layer.transpose(-1, -2)
        attention_scores /= math.sqrt(self.head_dim)
        attention_scores = F.softmax(attention_scores + attention_mask, dim=-1, dtype=hidden_states.dtype)
        attn_output = attention_scores @ value_layer

        attn_output = attn_output.view(batch_size, self.num_heads, query_length, self.head_dim)
        attn_output = attn_output.permute(0, 2, 1, 3)
        attn_output = attn_output.reshape(batch_size, query_length, self.num_heads * self.head_dim)
        return self.dense(attn_output), present


class FalconMLP(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        hidden_size = config.hidden_size
        self.dense_h_to_4h = FalconLinear(hidden_size, config.ffn_hidden_size, bias=config.bias)
        self.act = nn.GELU()
        self.dense_4h_to_h = FalconLinear(config.ffn_hidden_size, hidden_size, bias=config.bias)

    def forward(self, x):
        x = self.act(self.dense_h_to_4h(x))
        return self.dense_4h_to_h(x)


def dropout_add(x, residual):
    """transformers' dropout_add at inference: residual + x."""
    return residual + x


class FalconDecoderLayer(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        hidden_size = config.hidden_size
        self.config = config
        self.self_attention = FalconAttention(config)
        self.mlp = FalconMLP(config)
        if config.new_decoder_architecture:
            # The layer norm before self-attention, and the one before the MLP.
            self.ln_attn = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
            self.ln_mlp = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        else:
            self.input_layernorm = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
            if not config.parallel_attn:
                self.post_attention_layernorm = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings, layer_past):
        residual = hidden_states
        if self.config.new_decoder_architecture:
            attention_layernorm_out = self.ln_attn(hidden_states)
            mlp_layernorm_out = self.ln_mlp(hidden_states)
        else:
            attention_layernorm_out = self.input_layernorm(hidden_states)

        attention_output, present = self.self_attention(attention_layernorm_out, attention_mask, position_ids,
                                                        position_embeddings, layer_past)

        if not self.config.new_decoder_architecture:
            if self.config.parallel_attn:
                mlp_layernorm_out = attention_layernorm_out
            else:
                residual = dropout_add(attention_output, residual)
                mlp_layernorm_out = self.post_attention_layernorm(residual)

        mlp_output = self.mlp(mlp_layernorm_out)
        if self.config.new_decoder_architecture or self.config.parallel_attn:
            mlp_output += attention_output
        output = dropout_add(mlp_output, residual)
        return output, present


class FalconModel(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.h = nn.ModuleList([FalconDecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.ln_f = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        if config.rope_form == "inline" and not config.alibi:
            # 4.45+: one rotary embedding for all layers.
            self.rotary_emb = hf_llama.FamilyRotaryEmbedding(
                config.head_dim, config.rope_theta, config.max_position_embeddings, "inline")


class FalconForCausalLM(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        config.check()
        self.config = config
        self.transformer = FalconModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.transformer.word_embeddings.weight

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
        m = self.transformer
        c = self.config
        seq = input_ids.shape[1]
        past = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        hidden_states = m.word_embeddings(input_ids)
        # 4d mask [batch, 1, seq, total], 0 where attended
        mask = hf_llama.build_mask(c, attention_mask, seq, past, hidden_states.dtype)
        position_embeddings = m.rotary_emb(hidden_states, position_ids) if c.rope_form == "inline" else None
        if c.alibi:
            # transformers passes alibi to each layer in this place
            position_embeddings = bloom.build_alibi_tensor(attention_mask, c.num_attention_heads,
                                                           hidden_states.dtype)
        presents = []
        for i, block in enumerate(m.h):
            layer_past = None if past_key_values is None else past_key_values[i]
            hidden_states, present = block(hidden_states, mask, position_ids, position_embeddings, layer_past)
            presents.append(present)
        hidden_states = m.ln_f(hidden_states)
        return self.lm_head(hidden_states).float(), tuple(presents)

    def empty_past(self, batch: int):
        c = self.config
        shape = (batch, c.cache_heads, 0, c.head_dim)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.num_hidden_layers))


LAYER_NORMS = ("input_layernorm", "post_attention_layernorm", "ln_attn", "ln_mlp", "ln_f")


@torch.no_grad()
def init_weights(model: FalconForCausalLM, seed: int) -> None:
    """Seeded weights, large enough that greedy decoding gives varied tokens: linears N(0, 1/fan_in)
    except query_key_value, N(0, 2.5^2/fan_in), biases (--bias) N(0, 0.1^2), LayerNorm weights
    1 + 0.1 N(0, 1) and biases 0.1 N(0, 1), the token embedding (which is also lm_head)
    N(0, 0.15^2).

    As in gpt_neox.py, query_key_value's larger weights sharpen the attention so that the context,
    not only the current token, decides the next token. The embedding is far smaller than
    gpt_neox.py's N(0, 1) because it is tied: with N(0, 1) the current token's own embedding,
    carried by the residual into ln_f, dominates its own logit (max |logit| ~100) and greedy
    decoding repeats the last prompt token; at 0.15 the logits stay within ~10, which also keeps
    float32 rounding differences (PyTorch vs ONNX Runtime ~2e-5) well inside the checks' 1e-4."""
    # The tied lm_head.weight is word_embeddings.weight.
    common.init_decoder_weights(
        model, seed, is_norm=lambda name: name.split(".")[-2] in LAYER_NORMS,
        embedding_std=lambda name: 0.15 if name == "transformer.word_embeddings.weight" else None,
        sharpened=("query_key_value.weight",))


def build_model(config: Config) -> FalconForCausalLM:
    model = FalconForCausalLM(config)
    init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> FalconForCausalLM:
    return common.load_model(model_dir, Config.from_dict, FalconForCausalLM, init_weights)


def broadcast_to_symbolic(g, self, size):
    """aten::broadcast_to as torch 2.x's exporter writes it (symbolic_opset9.broadcast_to:
    expand(g, self, size, None), one Expand); torch 1.13's exporter has no symbolic for it."""
    from torch.onnx import symbolic_opset9
    return symbolic_opset9.expand(g, self, size, None)


def export(config: Config, out_dir: str, verbose: bool = False, opset: int = 17) -> str:
    model = build_model(config)
    # The new architecture's _split_heads calls torch.broadcast_to.
    torch.onnx.register_custom_op_symbolic("aten::broadcast_to", broadcast_to_symbolic, 9)
    try:
        return common.export_decoder(model, asdict(config), out_dir, config.vocab_size,
                                     config.num_hidden_layers, config.cache_heads, config.head_dim,
                                     position_ids=True, verbose=verbose, opset=opset)
    finally:
        torch.onnx.unregister_custom_op_symbolic("aten::broadcast_to", 9)


def add_export_args(e: argparse.ArgumentParser) -> None:
    d = Config()
    e.add_argument("--vocab", type=int, default=d.vocab_size)
    e.add_argument("--hidden", type=int, default=d.hidden_size)
    e.add_argument("--layers", type=int, default=d.num_hidden_layers)
    e.add_argument("--heads", type=int, default=d.num_attention_heads)
    e.add_argument("--kv-heads", type=int, default=None,
                   help="num_kv_heads (with --new-decoder-architecture; default num_attention_heads)")
    e.add_argument("--max-position", type=int, default=d.max_position_embeddings)
    e.add_argument("--rope-theta", type=float, default=d.rope_theta)
    e.add_argument("--eps", type=float, default=d.layer_norm_epsilon, help="layer_norm_epsilon")
    e.add_argument("--new-decoder-architecture", action="store_true",
                   help="falcon-40b/180b: ln_attn and ln_mlp, query_key_value grouped per KV head "
                        "(--kv-heads), keys and values broadcast to every query head before the cache")
    e.add_argument("--no-multi-query", action="store_true",
                   help="multi_query=False (old architecture): query_key_value viewed [.., heads, 3, "
                        "head_dim], one KV head per query head")
    e.add_argument("--no-parallel-attn", action="store_true",
                   help="parallel_attn=False (old architecture): the MLP reads "
                        "post_attention_layernorm(attn + x)")
    e.add_argument("--bias", action="store_true", help="bias=True: biases on every FalconLinear")
    e.add_argument("--alibi", action="store_true", help="ALiBi instead of rotary (Falcon-RW)")
    e.add_argument("--rope-inline", action="store_true",
                   help="cos/sin from inv_freq @ position_ids in the graph (4.45+), instead of each "
                        "layer's tables sliced and gathered by position_ids (4.36-4.44)")
    e.add_argument("--mask-style", choices=MASK_STYLES, default=d.mask_style,
                   help="hf_llama.py's additive mask forms: masked_fill (4.36-4.4x's "
                        "_prepare_4d_causal_attention_mask), where, triu (4.45+)")
    e.add_argument("--seed", type=int, default=d.seed)


def config_from_args(a) -> Config:
    if a.kv_heads is not None and not a.new_decoder_architecture:
        raise ValueError("--kv-heads needs --new-decoder-architecture")
    config = Config(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                    num_attention_heads=a.heads, num_kv_heads=a.kv_heads, layer_norm_epsilon=a.eps,
                    multi_query=not a.no_multi_query, parallel_attn=not a.no_parallel_attn,
                    bias=a.bias, alibi=a.alibi, new_decoder_architecture=a.new_decoder_architecture,
                    max_position_embeddings=a.max_position, rope_theta=a.rope_theta,
                    rope_form="inline" if a.rope_inline else "cache", mask_style=a.mask_style,
                    seed=a.seed)
    config.check()
    return config


def main(argv=None) -> int:
    return common.exporter_main(argv, __doc__, "falcon.py", add_export_args, config_from_args, export,
                                load_model)


if __name__ == "__main__":
    sys.exit(main())
