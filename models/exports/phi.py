#!/usr/bin/python3
"""A Phi-2 decoder written after Hugging Face transformers' modeling_phi.py (4.37-4.4x, eager
attention), exported with torch.onnx.export, plus its PyTorch greedy reference.

    /usr/bin/python3 models/exports/phi.py export --out DIR [--vocab 512 --hidden 128 ...]
    /usr/bin/python3 models/exports/phi.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]

export writes DIR/model.onnx (opset 17; inputs input_ids, attention_mask, position_ids,
past_key_values.{i}.key/value [batch, kv_heads, past, head_dim]; outputs logits,
present.{i}.key/value), DIR/config.json (PhiConfig's field names) and DIR/weights.pt (the
state_dict, with transformers' parameter names).

Semantics, as transformers has them:
  * model.embed_tokens (nn.Embedding), no position embedding; model.final_layernorm, a LayerNorm
    with bias (eps layer_norm_eps); an untied lm_head WITH a bias (Phi-2's; --no-lm-head-bias
    drops it);
  * each layer: one input_layernorm (LayerNorm with bias) read by both the attention and the MLP,
    summed as attn_outputs + feed_forward_hidden_states + residual;
  * q_proj, k_proj, v_proj and dense, all with bias; q viewed [batch, seq, heads, head_dim],
    k and v [batch, seq, kv_heads, head_dim], transposed to [batch, heads, seq, head_dim]
    (head_dim = hidden_size // num_attention_heads);
  * partial rotary: rotate_half on the first rotary dim = int(partial_rotary_factor * head_dim)
    of each head of q and k, the rest passed through and concatenated back; cos/sin the
    attention's own rotary tables (hf_llama.FamilyRotaryEmbedding) [max_position, rotary dim] (emb = cat(freqs,
    freqs)), sliced to the attended length (kv_seq_len) and gathered by position_ids (4.37-4.44);
    --rope-inline: inv_freq @ position_ids in the graph (4.45+'s form);
  * the cache [batch, kv_heads, past, head_dim] concatenated on the sequence axis after the
    rotation; repeat_kv (expand + reshape) to the query heads when kv_heads < heads;
  * scores matmul(q.to(float32), k.to(float32)^T) / sqrt(head_dim) (Phi upcasts q and k), plus
    an additive 4-D causal + padding mask [batch, 1, q, total] (hf_llama.py's build_mask;
    --mask-style masked_fill, the default, is 4.37-4.40's _prepare_4d_causal_attention_mask,
    triu 4.41-4.4x's _update_causal_mask); softmax in float32, cast to v's dtype, matmul with v,
    heads merged, dense;
  * MLP fc1 -> gelu_new (NewGELUActivation, the tanh form written out; --hidden-act gelu: the
    erf form) -> fc2, both with bias, not gated.
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
import gpt_neox  # noqa: E402
import hf_llama  # noqa: E402

# --mask-style: hf_llama.build_mask's additive forms.
MASK_STYLES = ("masked_fill", "where", "triu")
# transformers' ACT2FN entries a Phi config may name (Phi-2 uses gelu_new).
ACTIVATIONS = gpt_neox.ACTIVATIONS


@dataclass
class Config:
    vocab_size: int = 512
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    hidden_act: str = "gelu_new"
    max_position_embeddings: int = 256
    layer_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = None
    partial_rotary_factor: float = 0.4
    qk_layernorm: bool = False
    resid_pdrop: float = 0.0
    embd_pdrop: float = 0.0
    attention_dropout: float = 0.0
    # Variants (not PhiConfig fields): Phi-2's lm_head has a bias; how the graph writes the rest.
    lm_head_bias: bool = True
    rope_form: str = "cache"           # cache (tables, 4.37-4.44) | inline (inv_freq @ position_ids)
    mask_style: str = "masked_fill"    # hf_llama.build_mask's: masked_fill | where | triu
    mask_value: str = "finfo-min"      # hf_llama.build_mask's fill
    seed: int = 0
    model_type: str = "phi"
    architectures: list = field(default_factory=lambda: ["PhiForCausalLM"])
    torch_dtype: str = "float32"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def rotary_ndims(self) -> int:
        return int(self.partial_rotary_factor * self.head_dim)

    def check(self) -> None:
        """Raises ValueError for sizes and forms that do not combine."""
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        if self.num_key_value_heads < 1 or self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        dim = self.rotary_ndims
        if dim % 2 or not 0 < dim <= self.head_dim:
            raise ValueError(f"rotary dim {dim} (head_dim {self.head_dim} x partial_rotary_factor "
                             f"{self.partial_rotary_factor}) must be even and within head_dim")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"unknown hidden_act {self.hidden_act!r} (one of {', '.join(ACTIVATIONS)})")
        if self.rope_form not in ("cache", "inline"):
            raise ValueError(f"unknown rope_form {self.rope_form!r}")
        if self.mask_style not in MASK_STYLES:
            raise ValueError(f"unknown mask_style {self.mask_style!r} (one of {', '.join(MASK_STYLES)})")
        if self.rope_scaling is not None:
            raise ValueError("rope_scaling is not modelled here")
        if self.qk_layernorm:
            raise ValueError("qk_layernorm is not modelled here")
        if self.tie_word_embeddings:
            raise ValueError("tie_word_embeddings is not modelled here (Phi-2's lm_head is untied)")

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


class PhiMLP(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.activation_fn = ACTIVATIONS[config.hidden_act]()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        return self.fc2(hidden_states)


class PhiAttention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.dense = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=True)
        self.rotary_ndims = config.rotary_ndims
        if config.rope_form == "cache":
            # 4.37-4.44: each layer's attention has its own tables (_init_rope).
            self.rotary_emb = hf_llama.FamilyRotaryEmbedding(
                self.rotary_ndims, config.rope_theta, config.max_position_embeddings, "cache")

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings=None,
                past_key_value: Optional[Tuple] = None):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        kv_seq_len = key_states.shape[-2]
        if past_key_value is not None:
            kv_seq_len += past_key_value[0].shape[-2]

        # Partial rotary embedding
        query_rot, query_pass = (query_states[..., : self.rotary_ndims],
                                 query_states[..., self.rotary_ndims:])
        key_rot, key_pass = (key_states[..., : self.rotary_ndims],
                             key_states[..., self.rotary_ndims:])
        if self.config.rope_form == "cache":
            cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
            query_rot, key_rot = hf_llama.apply_rotary_pos_emb(query_rot, key_rot, cos, sin, position_ids)
        else:
            cos, sin = position_embeddings
            query_rot, key_rot = hf_llama.apply_rotary_pos_emb(query_rot, key_rot, cos, sin)
        query_states = torch.cat((query_rot, query_pass), dim=-1)
        key_states = torch.cat((key_rot, key_pass), dim=-1)

        if past_key_value is not None:
            key_states = torch.cat((past_key_value[0], key_states), dim=-2)
            value_states = torch.cat((past_key_value[1], value_states), dim=-2)
        present = (key_states, value_states)

        key_states = hf_llama.repeat_kv(key_states, self.num_key_value_groups)
        value_states = hf_llama.repeat_kv(value_states, self.num_key_value_groups)

        # Queries and keys upcast to fp32 is required by Phi-2 to avoid overflow
        attn_weights = torch.matmul(
            query_states.to(torch.float32), key_states.to(torch.float32).transpose(2, 3)
        ) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask
        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(value_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        return self.dense(attn_output), present


class PhiDecoderLayer(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.self_attn = PhiAttention(config)
        self.mlp = PhiMLP(config)
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings, past_key_value):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        attn_outputs, present = self.self_attn(hidden_states, attention_mask, position_ids,
                                               position_embeddings, past_key_value)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = attn_outputs + feed_forward_hidden_states + residual
        return hidden_states, present


class PhiModel(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([PhiDecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.final_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        if config.rope_form == "inline":
            # 4.45+: one rotary embedding for all layers.
            self.rotary_emb = hf_llama.FamilyRotaryEmbedding(
                config.rotary_ndims, config.rope_theta, config.max_position_embeddings, "inline")


class PhiForCausalLM(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        config.check()
        self.config = config
        self.model = PhiModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=config.lm_head_bias)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
        m = self.model
        c = self.config
        seq = input_ids.shape[1]
        past = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        inputs_embeds = m.embed_tokens(input_ids)
        # [batch, 1, seq, total]: 0 where attended, finfo.min elsewhere.
        mask = hf_llama.build_mask(c, attention_mask, seq, past, inputs_embeds.dtype)
        hidden_states = inputs_embeds
        position_embeddings = (m.rotary_emb(hidden_states, position_ids)
                               if c.rope_form == "inline" else None)
        presents = []
        for i, layer in enumerate(m.layers):
            layer_past = None if past_key_values is None else past_key_values[i]
            hidden_states, present = layer(hidden_states, mask, position_ids, position_embeddings, layer_past)
            presents.append(present)
        hidden_states = m.final_layernorm(hidden_states)
        logits = self.lm_head(hidden_states)
        return logits.float(), tuple(presents)

    def empty_past(self, batch: int):
        c = self.config
        shape = (batch, c.num_key_value_heads, 0, c.head_dim)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.num_hidden_layers))


@torch.no_grad()
def init_weights(model: PhiForCausalLM, seed: int) -> None:
    """Seeded weights, large enough that greedy decoding gives varied tokens: linears N(0, 1/fan_in)
    (lm_head too) except q_proj and k_proj, N(0, 2.5^2/fan_in), biases N(0, 0.1^2) (lm_head's
    too), LayerNorm weights 1 + 0.1 N(0, 1) and biases 0.1 N(0, 1), the token embedding N(0, 1).

    q_proj's and k_proj's larger weights sharpen the attention, so that the context and not only
    the current token's embedding decides the next token (gpt_neox.py's init notes)."""
    common.init_decoder_weights(
        model, seed, is_norm=lambda name: "layernorm" in name,
        embedding_std=lambda name: 1.0 if name == "model.embed_tokens.weight" else None,
        sharpened=("q_proj.weight", "k_proj.weight"))


def build_model(config: Config) -> PhiForCausalLM:
    model = PhiForCausalLM(config)
    init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> PhiForCausalLM:
    return common.load_model(model_dir, Config.from_dict, PhiForCausalLM, init_weights)


def export(config: Config, out_dir: str, verbose: bool = False, opset: int = 17) -> str:
    return common.export_decoder(build_model(config), asdict(config), out_dir, config.vocab_size,
                                 config.num_hidden_layers, config.num_key_value_heads,
                                 config.head_dim, position_ids=True, verbose=verbose, opset=opset)


def add_export_args(e: argparse.ArgumentParser) -> None:
    d = Config()
    e.add_argument("--vocab", type=int, default=d.vocab_size)
    e.add_argument("--hidden", type=int, default=d.hidden_size)
    e.add_argument("--layers", type=int, default=d.num_hidden_layers)
    e.add_argument("--heads", type=int, default=d.num_attention_heads)
    e.add_argument("--kv-heads", type=int, default=None,
                   help="num_key_value_heads (default: --heads, as Phi-2)")
    e.add_argument("--intermediate", type=int, default=d.intermediate_size)
    e.add_argument("--max-position", type=int, default=d.max_position_embeddings)
    e.add_argument("--partial-rotary", type=float, default=d.partial_rotary_factor, metavar="F",
                   help="partial_rotary_factor: rotary dim = int(F * head_dim), the rest of each "
                        "head passes through")
    e.add_argument("--rope-theta", type=float, default=d.rope_theta)
    e.add_argument("--eps", type=float, default=d.layer_norm_eps, help="layer_norm_eps")
    e.add_argument("--hidden-act", choices=sorted(ACTIVATIONS), default=d.hidden_act,
                   help="the MLP's activation (gelu_new exports as Tanh and Pow, gelu as Erf)")
    e.add_argument("--no-lm-head-bias", action="store_true",
                   help="lm_head without a bias (Phi-2's has one)")
    e.add_argument("--rope-inline", action="store_true",
                   help="cos/sin from inv_freq @ position_ids in the graph (4.45+), instead of each "
                        "layer's tables sliced to the attended length and gathered by position_ids")
    e.add_argument("--mask-style", choices=MASK_STYLES, default=d.mask_style,
                   help="hf_llama.py's additive mask forms: masked_fill (4.37-4.40's "
                        "_prepare_4d_causal_attention_mask), where, triu (4.41+'s _update_causal_mask)")
    e.add_argument("--seed", type=int, default=d.seed)


def config_from_args(a) -> Config:
    config = Config(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                    num_attention_heads=a.heads,
                    num_key_value_heads=a.heads if a.kv_heads is None else a.kv_heads,
                    intermediate_size=a.intermediate, hidden_act=a.hidden_act,
                    max_position_embeddings=a.max_position, layer_norm_eps=a.eps,
                    rope_theta=a.rope_theta, partial_rotary_factor=a.partial_rotary,
                    lm_head_bias=not a.no_lm_head_bias,
                    rope_form="inline" if a.rope_inline else "cache", mask_style=a.mask_style,
                    seed=a.seed)
    config.check()
    return config


def main(argv=None) -> int:
    return common.exporter_main(argv, __doc__, "phi.py", add_export_args, config_from_args, export,
                                load_model)


if __name__ == "__main__":
    sys.exit(main())
