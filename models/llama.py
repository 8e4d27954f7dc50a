"""Llama-family decoder in PyTorch with Hugging Face semantics.

The modules follow transformers' modeling_llama (decomposed RMSNorm, rotate-half RoPE driven by
position_ids, repeat_kv for grouped-query attention, an additive float mask built from
attention_mask, past/present key-values), so that an ONNX export of this model looks like a
user's export of a Hugging Face Llama checkpoint.

Interface (the "decoder with past" form):
    logits, presents = model(input_ids, attention_mask, position_ids, past_key_values)
      input_ids       [B, S]             int64
      attention_mask  [B, past + S]      int64, 1 = attend, 0 = padding
      position_ids    [B, S]             int64
      past_key_values tuple over layers of (key, value), each [B, kv_heads, past, head_dim]
      logits          [B, S, vocab]      float32
      presents        tuple over layers of (key, value), each [B, kv_heads, past + S, head_dim]
The present key is stored after RoPE and before repeat_kv.
"""

import dataclasses
import json
import math
from typing import Dict, Tuple

import torch
from torch import nn


@dataclasses.dataclass
class LlamaConfig:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    tie_embeddings: bool = False

    def __post_init__(self):
        if self.heads % self.kv_heads != 0:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim ({self.head_dim}) must be even for rotate-half RoPE")

    def to_dict(self) -> Dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Dict) -> "LlamaConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown config keys: {sorted(unknown)}")
        return cls(**d)

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=2)
            f.write("\n")

    @classmethod
    def load(cls, path: str) -> "LlamaConfig":
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def parameter_count(self) -> int:
        h, i, d = self.hidden, self.intermediate, self.head_dim
        attn = h * self.heads * d + 2 * h * self.kv_heads * d + self.heads * d * h
        mlp = 3 * h * i
        per_layer = attn + mlp + 2 * h
        embed = self.vocab * h
        head = 0 if self.tie_embeddings else self.vocab * h
        return self.layers * per_layer + embed + head + h


PRESETS: Dict[str, LlamaConfig] = {
    "tiny": LlamaConfig(vocab=256, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16,
                        intermediate=176, rope_theta=10000.0, rms_eps=1e-5, tie_embeddings=False),
    # Awkward shapes on purpose: head_dim not a power of two, 3 query heads per KV head,
    # vocab not a multiple of 64, tied embeddings.
    "odd": LlamaConfig(vocab=1001, hidden=144, layers=3, heads=6, kv_heads=2, head_dim=24,
                       intermediate=200, rope_theta=500000.0, rms_eps=1e-6, tie_embeddings=True),
    "small": LlamaConfig(vocab=2048, hidden=256, layers=4, heads=8, kv_heads=4, head_dim=32,
                         intermediate=688, rope_theta=10000.0, rms_eps=1e-5, tie_embeddings=False),
    "llama-3.2-1b": LlamaConfig(vocab=128256, hidden=2048, layers=16, heads=32, kv_heads=8,
                                head_dim=64, intermediate=8192, rope_theta=500000.0, rms_eps=1e-5,
                                tie_embeddings=True),
    "llama-3-8b": LlamaConfig(vocab=128256, hidden=4096, layers=32, heads=32, kv_heads=8,
                              head_dim=128, intermediate=14336, rope_theta=500000.0, rms_eps=1e-5,
                              tie_embeddings=False),
    "llama-3-70b": LlamaConfig(vocab=128256, hidden=8192, layers=80, heads=64, kv_heads=8,
                               head_dim=128, intermediate=28672, rope_theta=500000.0, rms_eps=1e-5,
                               tie_embeddings=False),
}


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.promote_types(input_dtype, torch.float32))
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        self.dim = dim
        self.base = base
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.int64).float() / self.dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim: int = 1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[B, kv_heads, S, D] -> [B, kv_heads * n_rep, S, D], each KV head repeated n_rep times."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaMLP(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden, config.intermediate, bias=False)
        self.up_proj = nn.Linear(config.hidden, config.intermediate, bias=False)
        self.down_proj = nn.Linear(config.intermediate, config.hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.hidden_size = config.hidden
        self.num_heads = config.heads
        self.head_dim = config.head_dim
        self.num_key_value_heads = config.kv_heads
        self.num_key_value_groups = config.heads // config.kv_heads
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask, position_embeddings, past_key_value):
        bsz, q_len, _ = hidden_states.size()

        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)

        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        if past_key_value is not None:
            key_states = torch.cat([past_key_value[0], key_states], dim=2)
            value_states = torch.cat([past_key_value[1], value_states], dim=2)
        present = (key_states, value_states)

        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask

        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.promote_types(attn_weights.dtype, torch.float32)).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)

        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, -1)
        attn_output = self.o_proj(attn_output)
        return attn_output, present


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig, layer_idx: int):
        super().__init__()
        self.hidden_size = config.hidden
        self.self_attn = LlamaAttention(config, layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden, eps=config.rms_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden, eps=config.rms_eps)

    def forward(self, hidden_states, attention_mask, position_embeddings, past_key_value):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, present = self.self_attn(hidden_states, attention_mask, position_embeddings,
                                                past_key_value)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states, present


def _make_causal_mask(input_ids_shape, dtype, device, past_key_values_length):
    """Causal mask among the S new tokens, with every past position visible: [B, 1, S, past + S]."""
    bsz, tgt_len = input_ids_shape
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    # Always concatenated (an empty block when there is no past) so a traced graph serves both.
    mask = torch.cat([torch.zeros(tgt_len, past_key_values_length, dtype=dtype, device=device), mask], dim=-1)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)


def _expand_mask(mask, dtype, tgt_len):
    """[B, src_len] 1/0 padding mask -> additive [B, 1, tgt_len, src_len]."""
    bsz, src_len = mask.size()
    expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    inverted_mask = 1.0 - expanded_mask
    return inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)


class LlamaModel(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab, config.hidden)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config, i) for i in range(config.layers)])
        self.norm = LlamaRMSNorm(config.hidden, eps=config.rms_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config.head_dim, base=config.rope_theta)

    def _prepare_decoder_attention_mask(self, attention_mask, input_shape, inputs_embeds,
                                        past_key_values_length):
        dtype = inputs_embeds.dtype
        combined = _make_causal_mask(input_shape, dtype, inputs_embeds.device, past_key_values_length)
        if attention_mask is not None:
            expanded = _expand_mask(attention_mask, dtype, tgt_len=input_shape[-1])
            combined = expanded + combined
            # A position masked twice sums to -inf; clamp so that a fully masked (padding) row
            # gives a uniform softmax instead of NaN.
            combined = torch.max(combined, torch.tensor(torch.finfo(dtype).min, dtype=dtype))
        return combined

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None):
        batch_size, seq_length = input_ids.shape
        past_key_values_length = 0
        if past_key_values is not None:
            past_key_values_length = past_key_values[0][0].shape[2]
        if position_ids is None:
            position_ids = torch.arange(past_key_values_length, seq_length + past_key_values_length,
                                        dtype=torch.long, device=input_ids.device).unsqueeze(0)
        inputs_embeds = self.embed_tokens(input_ids)
        attention_mask = self._prepare_decoder_attention_mask(
            attention_mask, (batch_size, seq_length), inputs_embeds, past_key_values_length)

        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)

        presents = []
        for idx, decoder_layer in enumerate(self.layers):
            past_key_value = past_key_values[idx] if past_key_values is not None else None
            hidden_states, present = decoder_layer(hidden_states, attention_mask, position_embeddings,
                                                   past_key_value)
            presents.append(present)

        hidden_states = self.norm(hidden_states)
        return hidden_states, tuple(presents)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden, config.vocab, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None):
        hidden_states, presents = self.model(input_ids, attention_mask, position_ids, past_key_values)
        logits = self.lm_head(hidden_states)
        logits = logits.float()
        return logits, presents

    def empty_past(self, batch_size: int) -> Tuple[Tuple[torch.Tensor, torch.Tensor], ...]:
        c = self.config
        shape = (batch_size, c.kv_heads, 0, c.head_dim)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.layers))


@torch.no_grad()
def init_weights(model: LlamaForCausalLM, seed: int) -> None:
    """Deterministic weights with enough spread that greedy decoding is not degenerate.

    Linears ~ N(0, 1/fan_in), except q_proj and k_proj ~ N(0, 4/fan_in): sharper attention that
    depends on position, without which small random models settle into repeating one token.
    Norm weights 1 + 0.1 N(0, 1). Embeddings ~ N(0, 1); a tied table doubles as lm_head and gets
    std 1/sqrt(hidden) instead, like an untied lm_head (with std 1 the current token's own
    embedding would dominate the logits). Parameters are visited in name order from one
    generator, so the weights depend only on (config, seed).
    """
    gen = torch.Generator().manual_seed(seed)
    seen = set()
    for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        if id(p) in seen:
            continue
        seen.add(id(p))
        if name.endswith("embed_tokens.weight"):
            std = 1.0 / math.sqrt(p.shape[1]) if model.config.tie_embeddings else 1.0
            p.copy_(torch.randn(p.shape, generator=gen) * std)
        elif p.dim() == 2:
            fan_in = p.shape[1]
            gain = 2.0 if name.endswith(("q_proj.weight", "k_proj.weight")) else 1.0
            p.copy_(torch.randn(p.shape, generator=gen) * (gain / math.sqrt(fan_in)))
        elif p.dim() == 1:
            p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
        else:
            raise ValueError(f"unexpected parameter {name} of shape {tuple(p.shape)}")


def build_model(config: LlamaConfig, seed: int = 0) -> LlamaForCausalLM:
    """A float32 model in eval mode with seeded weights."""
    model = LlamaForCausalLM(config)
    init_weights(model, seed)
    model.eval()
    return model


def load_model(model_dir: str) -> LlamaForCausalLM:
    """Rebuilds the exact exported model from DIR/config.json and DIR/weights.pt."""
    import os
    config = LlamaConfig.load(os.path.join(model_dir, "config.json"))
    model = LlamaForCausalLM(config)
    state = torch.load(os.path.join(model_dir, "weights.pt"), map_location="cpu")
    model.load_state_dict(state, strict=True)
    model.eval()
    return model
