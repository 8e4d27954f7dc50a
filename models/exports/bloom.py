#!/usr/bin/python3
"""A BLOOM decoder written after Hugging Face transformers' modeling_bloom.py (4.45, eager
attention, the cache as [batch, heads, past, head_dim]), exported with torch.onnx.export, plus
its PyTorch greedy reference. BLOOM's attention adds ALiBi, a position bias of slope x key
position per head, to the scores, and normalizes the embeddings before the first block;
--position-bias mpt adds MPT's form of ALiBi instead (a stored [heads, 1, 2048] buffer of
slope x (key - 2047), its last keys sliced and added to the 4-D scores of a plain matmul), and
--position-bias squared slope x position^2, which is not ALiBi (hetc refuses it).

    /usr/bin/python3 models/exports/bloom.py export --out DIR [--opset 14] [--vocab 512 ...]
    /usr/bin/python3 models/exports/bloom.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]

export writes DIR/model.onnx (inputs input_ids, attention_mask, past_key_values.{i}.key/value
[batch, heads, past, head_dim]; outputs logits, present.{i}.key/value), DIR/config.json
(BloomConfig's field names) and DIR/weights.pt (the state_dict, transformers' parameter names).

Semantics, as transformers has them:
  * word_embeddings, then word_embeddings_layernorm; no position embedding: the positions enter
    through ALiBi alone, alibi = slopes[h] * ((attention_mask.cumsum(-1) - 1) * attention_mask),
    [batch * heads, 1, total] (build_alibi_tensor's slopes, 2^(-8 (h + 1) / heads) for a power
    of two heads, interleaved extra slopes for the others);
  * each block: ln = input_layernorm(x); x = x + attention(ln); x = x + mlp(post_attention_
    layernorm(x)) (apply_residual_connection_post_layernorm False); LayerNorms with bias;
  * query_key_value one linear with bias, viewed [batch, seq, heads, 3, head_dim] and cut on its
    fourth axis; the cache concatenated on the positions axis;
  * scores alibi.baddbmm(q, k^T, beta=1, alpha=1/sqrt(head_dim)) over batch * heads, viewed
    [batch, heads, seq, total], plus the causal and padding mask (finfo.min), softmax in float32,
    bmm with v, heads merged, dense;
  * MLP dense_h_to_4h -> bloom_gelu (the tanh form) -> dense_4h_to_h; ln_f after the last block;
    the lm_head tied to word_embeddings.
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
import opt  # noqa: E402


@dataclass
class Config:
    vocab_size: int = 512
    hidden_size: int = 128
    n_layer: int = 2
    n_head: int = 4
    layer_norm_epsilon: float = 1e-5
    seed: int = 0
    # alibi (BLOOM's), mpt (MPT's stored relative form), or squared: slope x position^2, a bias
    # that is not ALiBi (the last two not BLOOM's)
    position_bias: str = "alibi"
    model_type: str = "bloom"
    architectures: list = field(default_factory=lambda: ["BloomForCausalLM"])
    torch_dtype: str = "float32"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.n_head

    def check(self) -> None:
        if self.hidden_size % self.n_head:
            raise ValueError("hidden_size must be a multiple of n_head")

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def build_alibi_tensor(attention_mask: torch.Tensor, num_heads: int, dtype,
                       squared: bool = False) -> torch.Tensor:
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))),
                                  dtype=torch.float32)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    if squared:
        arange_tensor = arange_tensor * arange_tensor
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


MPT_BIAS_POSITIONS = 2048


def build_mpt_alibi_tensor(num_heads: int, positions: int, alibi_bias_max: int = 8) -> torch.Tensor:
    """transformers' modeling_mpt.build_mpt_alibi_tensor: [heads, 1, positions], slope x (key -
    positions + 1), built once for the model's max_seq_len."""
    alibi = torch.arange(1 - positions, 1, dtype=torch.int32).view(1, 1, 1, positions)
    num_heads_power_of_2 = 2 ** math.ceil(math.log2(num_heads))
    base = torch.arange(1, num_heads_power_of_2 + 1, dtype=torch.int64).float()
    base = base * (alibi_bias_max / num_heads_power_of_2)
    slopes = (1.0 / torch.pow(2, base)).view(1, num_heads_power_of_2, 1, 1)
    if num_heads_power_of_2 != num_heads:
        slopes = torch.concat([slopes[:, 1::2, ...], slopes[:, ::2, ...]], dim=1)[:, :num_heads, ...]
    return (alibi * slopes).squeeze(0)


def bloom_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


class BloomAttention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.num_heads = config.n_head
        self.head_dim = config.head_dim
        self.inv_norm_factor = 1.0 / math.sqrt(self.head_dim)
        self.beta = 1.0
        self.query_key_value = nn.Linear(self.hidden_size, 3 * self.hidden_size, bias=True)
        self.dense = nn.Linear(self.hidden_size, self.hidden_size)
        self.mpt = config.position_bias == "mpt"
        if self.mpt:
            self.register_buffer("position_bias",
                                 build_mpt_alibi_tensor(self.num_heads, MPT_BIAS_POSITIONS),
                                 persistent=False)

    def _reshape(self, fused_qkv):
        batch_size, seq_length, _ = fused_qkv.shape
        fused_qkv = fused_qkv.view(batch_size, seq_length, self.num_heads, 3, self.head_dim)
        query_layer = fused_qkv[..., 0, :].transpose(1, 2)
        key_layer = fused_qkv[..., 1, :].transpose(1, 2)
        value_layer = fused_qkv[..., 2, :].transpose(1, 2)
        return query_layer, key_layer, value_layer

    def _merge_heads(self, x):
        batch_size_and_num_heads, seq_length, _ = x.shape
        batch_size = batch_size_and_num_heads // self.num_heads
        x = x.view(batch_size, self.num_heads, seq_length, self.head_dim)
        x = x.permute(0, 2, 1, 3)
        return x.reshape(batch_size, seq_length, self.num_heads * self.head_dim)

    def forward(self, hidden_states, residual, alibi, attention_mask, layer_past):
        batch_size, q_length, _ = hidden_states.shape
        query_layer, key_layer, value_layer = self._reshape(self.query_key_value(hidden_states))
        if layer_past is not None:
            key_layer = torch.cat((layer_past[0], key_layer), dim=2)
            value_layer = torch.cat((layer_past[1], value_layer), dim=2)
        present = (key_layer, value_layer)
        if self.mpt:
            # MPT's: the scores of a plain matmul, plus the last keys of the stored bias.
            scores = torch.matmul(query_layer, key_layer.transpose(-1, -2)) * self.inv_norm_factor
            key_length = key_layer.shape[2]
            bias = self.position_bias[:, :, max(0, self.position_bias.size(2) - key_length):]
            attn_weights = scores + bias + attention_mask[:, :, :, :key_length]
            attention_probs = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32)
            context = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3)
            context = context.reshape(batch_size, q_length, self.num_heads * self.head_dim)
            return self.dense(context) + residual, present
        query_layer = query_layer.reshape(batch_size * self.num_heads, -1, self.head_dim)
        key_layer = key_layer.reshape(batch_size * self.num_heads, -1, self.head_dim).transpose(-1, -2)
        value_layer = value_layer.reshape(batch_size * self.num_heads, -1, self.head_dim)
        attention_scores = alibi.baddbmm(batch1=query_layer, batch2=key_layer, beta=self.beta,
                                         alpha=self.inv_norm_factor)
        attn_weights = attention_scores.view(batch_size, self.num_heads, q_length, -1)
        attn_weights = attn_weights + attention_mask[:, :, :, : key_layer.shape[-1]]
        attention_probs = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_layer.dtype)
        attention_probs_reshaped = attention_probs.view(batch_size * self.num_heads, q_length, -1)
        context_layer = self._merge_heads(torch.bmm(attention_probs_reshaped, value_layer))
        return self.dense(context_layer) + residual, present


class BloomMLP(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(config.hidden_size, 4 * config.hidden_size)
        self.dense_4h_to_h = nn.Linear(4 * config.hidden_size, config.hidden_size)

    def forward(self, hidden_states, residual):
        return self.dense_4h_to_h(bloom_gelu(self.dense_h_to_4h(hidden_states))) + residual


class BloomBlock(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.self_attention = BloomAttention(config)
        self.post_attention_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = BloomMLP(config)

    def forward(self, hidden_states, alibi, attention_mask, layer_past):
        layernorm_output = self.input_layernorm(hidden_states)
        attention_output, present = self.self_attention(layernorm_output, hidden_states, alibi,
                                                        attention_mask, layer_past)
        layernorm_output = self.post_attention_layernorm(attention_output)
        return self.mlp(layernorm_output, attention_output), present


class BloomModel(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.word_embeddings_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.h = nn.ModuleList([BloomBlock(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)


class BloomForCausalLM(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        config.check()
        self.config = config
        self.transformer = BloomModel(config)

    def forward(self, input_ids, attention_mask, past_key_values=None):
        m = self.transformer
        batch, seq = input_ids.shape
        past = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        hidden_states = m.word_embeddings_layernorm(m.word_embeddings(input_ids))
        dtype = hidden_states.dtype
        alibi = build_alibi_tensor(attention_mask, self.config.n_head, dtype,
                                   squared=self.config.position_bias == "squared")
        mask = (opt.expand_mask(attention_mask, dtype, seq) +
                opt.make_causal_mask(batch, seq, dtype, past)).clamp(min=torch.finfo(dtype).min)
        presents = []
        for i, block in enumerate(m.h):
            layer_past = None if past_key_values is None else past_key_values[i]
            hidden_states, present = block(hidden_states, alibi, mask, layer_past)
            presents.append(present)
        hidden_states = m.ln_f(hidden_states)
        return nn.functional.linear(hidden_states, m.word_embeddings.weight).float(), tuple(presents)

    def step(self, input_ids, attention_mask, position_ids, past):
        """common.greedy's interface: BLOOM's positions are ALiBi's, from the attention mask."""
        return self(input_ids, attention_mask, past)

    def empty_past(self, batch: int):
        c = self.config
        shape = (batch, c.n_head, 0, c.head_dim)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.n_layer))


@torch.no_grad()
def init_weights(model: BloomForCausalLM, seed: int) -> None:
    """common.init_decoder_weights: LayerNorm weights 1 + 0.1 N(0, 1), biases 0.1 N(0, 1),
    word_embeddings N(0, 0.05^2) (the tied lm_head reads it), query_key_value sharpened."""
    common.init_decoder_weights(model, seed, lambda name: "layernorm" in name or ".ln_" in name,
                                lambda name: 0.05 if name.endswith("word_embeddings.weight") else None,
                                sharpened=("query_key_value.weight",))


def build_model(config: Config) -> BloomForCausalLM:
    model = BloomForCausalLM(config)
    init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> BloomForCausalLM:
    return common.load_model(model_dir, Config.from_dict, BloomForCausalLM, init_weights)


def export(config: Config, out_dir: str, verbose: bool = False, opset: int = 17) -> str:
    return common.export_decoder(build_model(config), asdict(config), out_dir, config.vocab_size,
                                 config.n_layer, config.n_head, config.head_dim, position_ids=False,
                                 verbose=verbose, opset=opset)


def add_export_args(e: argparse.ArgumentParser) -> None:
    d = Config()
    e.add_argument("--vocab", type=int, default=d.vocab_size)
    e.add_argument("--hidden", type=int, default=d.hidden_size, help="hidden_size")
    e.add_argument("--layers", type=int, default=d.n_layer)
    e.add_argument("--heads", type=int, default=d.n_head)
    e.add_argument("--eps", type=float, default=d.layer_norm_epsilon, help="layer_norm_epsilon")
    e.add_argument("--seed", type=int, default=d.seed)
    e.add_argument("--position-bias", choices=["alibi", "mpt", "squared"],
                   default=d.position_bias,
                   help="BLOOM's ALiBi, MPT's, or slope x position^2 (not ALiBi: a refusal's test)")


def config_from_args(a) -> Config:
    config = Config(vocab_size=a.vocab, hidden_size=a.hidden, n_layer=a.layers, n_head=a.heads,
                    layer_norm_epsilon=a.eps, seed=a.seed, position_bias=a.position_bias)
    config.check()
    return config


def main(argv=None) -> int:
    return common.exporter_main(argv, __doc__, "bloom.py", add_export_args, config_from_args, export,
                                load_model)


if __name__ == "__main__":
    sys.exit(main())
