#!/usr/bin/python3
"""A GPT-2 decoder written after Hugging Face transformers' modeling_gpt2.py (4.3x-4.4x, eager
attention), exported with torch.onnx.export, plus its PyTorch greedy reference.

    /usr/bin/python3 models/exports/gpt2.py export --out DIR [--opset 14] [--vocab 512 ...]
    /usr/bin/python3 models/exports/gpt2.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]

export writes DIR/model.onnx (opset 17 unless --opset; inputs input_ids, attention_mask,
position_ids, past_key_values.{i}.key/value [batch, heads, past, head_dim]; outputs logits,
present.{i}.key/value), DIR/config.json (GPT2Config's field names) and DIR/weights.pt (the
state_dict, with transformers' parameter names).

Semantics, as transformers has them:
  * wte (tokens) plus wpe (learned absolute positions, read at position_ids); the lm_head tied to
    wte, no bias;
  * each block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)); LayerNorms with bias
    (layer_norm_epsilon), and ln_f after the last block;
  * every projection a Conv1D: weight [in, out], torch.addmm(bias, x.view(-1, in), weight) viewed
    back to [batch, seq, out];
  * c_attn computes q, k and v in one, cut by .split(embed, dim=2); _split_heads views each
    [batch, seq, heads, head_dim] (its shape from tensor.size()) and permutes it to heads first;
  * the cache [batch, heads, past, head_dim] concatenated on the sequence axis;
  * scores matmul(q, k^T) / torch.full([], value.size(-1) ** 0.5); the causal mask
    torch.where(bias[:, :, kv - q:kv, :kv], scores, finfo.min) with `bias` each layer's tril
    buffer [1, 1, n_positions, n_positions]; then the padding, (1 - attention_mask) * finfo.min
    over [batch, 1, 1, total], added; softmax, matmul with v, heads merged, c_proj;
  * MLP c_fc -> gelu_new (the tanh form written out) -> c_proj.
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
    n_embd: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_inner: Optional[int] = None  # 4 * n_embd when None
    n_positions: int = 256
    layer_norm_epsilon: float = 1e-5
    activation_function: str = "gelu_new"
    scale_attn_weights: bool = True
    seed: int = 0
    model_type: str = "gpt2"
    architectures: list = field(default_factory=lambda: ["GPT2LMHeadModel"])
    torch_dtype: str = "float32"

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def inner(self) -> int:
        return self.n_inner if self.n_inner is not None else 4 * self.n_embd

    def check(self) -> None:
        """Raises ValueError for sizes and forms that do not combine."""
        if self.n_embd % self.n_head:
            raise ValueError("n_embd must be a multiple of n_head")
        if self.activation_function not in opt.ACTIVATIONS:
            raise ValueError(f"unknown activation_function {self.activation_function!r} "
                             f"(one of {', '.join(sorted(opt.ACTIVATIONS))})")

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


class Conv1D(nn.Module):
    """transformers' pytorch_utils.Conv1D: a linear whose weight is stored [in, out]."""

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        max_positions = config.n_positions
        self.register_buffer("bias", torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool))
                             .view(1, 1, max_positions, max_positions), persistent=False)
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = config.head_dim
        self.split_size = self.embed_dim
        self.scale_attn_weights = config.scale_attn_weights
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def _attn(self, query, key, value, attention_mask):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype,
                                                     device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        return torch.matmul(attn_weights, value)

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states, layer_past: Optional[Tuple], attention_mask):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        if layer_past is not None:
            past_key, past_value = layer_past
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        present = (key, value)
        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        return self.c_proj(attn_output), present


class GPT2MLP(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.c_fc = Conv1D(config.inner, config.n_embd)
        self.c_proj = Conv1D(config.n_embd, config.inner)
        self.act = opt.ACTIVATIONS[config.activation_function]()

    def forward(self, hidden_states):
        return self.c_proj(self.act(self.c_fc(hidden_states)))


class GPT2Block(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(config)

    def forward(self, hidden_states, layer_past, attention_mask):
        residual = hidden_states
        attn_output, present = self.attn(self.ln_1(hidden_states), layer_past, attention_mask)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = residual + self.mlp(self.ln_2(hidden_states))
        return hidden_states, present


class GPT2Model(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        config.check()
        self.config = config
        self.transformer = GPT2Model(config)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
        m = self.transformer
        batch_size = input_ids.shape[0]
        hidden_states = m.wte(input_ids) + m.wpe(position_ids)
        dtype = hidden_states.dtype
        # GPT2Model: [batch, 1, 1, total], 0 where attended, finfo.min on padding.
        mask = attention_mask.view(batch_size, -1)[:, None, None, :].to(dtype=dtype)
        mask = (1.0 - mask) * torch.finfo(dtype).min
        presents = []
        for i, block in enumerate(m.h):
            layer_past = None if past_key_values is None else past_key_values[i]
            hidden_states, present = block(hidden_states, layer_past, mask)
            presents.append(present)
        hidden_states = m.ln_f(hidden_states)
        # The lm_head is tied to wte.
        return nn.functional.linear(hidden_states, m.wte.weight).float(), tuple(presents)

    def empty_past(self, batch: int):
        c = self.config
        shape = (batch, c.n_head, 0, c.head_dim)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.n_layer))


@torch.no_grad()
def init_weights(model: GPT2LMHeadModel, seed: int) -> None:
    """Seeded weights, large enough that greedy decoding gives varied tokens and small enough that
    float32 rounding stays well inside the checks' 1e-4 on the logits: LayerNorm weights
    1 + 0.02 N(0, 1) and biases 0.02 N(0, 1), other biases 0.02 N(0, 1), wte and wpe N(0, 0.05^2)
    (the tied lm_head reads wte: logits of a few units), c_attn N(0, 4^2/fan_in) to sharpen the
    attention, other matrices N(0, 1/fan_in), a Conv1D's fan-in its weight's first dimension.
    With common.init_decoder_weights' biases (0.1), ln_f's bias adds one direction to every final
    state and greedy decoding repeats one token."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if name.startswith("transformer.ln") or ".ln_" in name:
            base = 1.0 if name.endswith(".weight") else 0.0
            p.copy_(base + 0.02 * torch.randn(p.shape, generator=gen))
        elif name.endswith(".bias"):
            p.copy_(0.02 * torch.randn(p.shape, generator=gen))
        elif name in ("transformer.wte.weight", "transformer.wpe.weight"):
            p.copy_(0.05 * torch.randn(p.shape, generator=gen))
        else:
            scale = 4.0 if name.endswith("c_attn.weight") else 1.0
            p.copy_(scale * torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[0]))


def build_model(config: Config) -> GPT2LMHeadModel:
    model = GPT2LMHeadModel(config)
    init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> GPT2LMHeadModel:
    return common.load_model(model_dir, Config.from_dict, GPT2LMHeadModel, init_weights)


def export(config: Config, out_dir: str, verbose: bool = False, opset: int = 17) -> str:
    return common.export_decoder(build_model(config), asdict(config), out_dir, config.vocab_size,
                                 config.n_layer, config.n_head, config.head_dim, position_ids=True,
                                 verbose=verbose, opset=opset)


def add_export_args(e: argparse.ArgumentParser) -> None:
    d = Config()
    e.add_argument("--vocab", type=int, default=d.vocab_size)
    e.add_argument("--hidden", type=int, default=d.n_embd, help="n_embd")
    e.add_argument("--layers", type=int, default=d.n_layer)
    e.add_argument("--heads", type=int, default=d.n_head)
    e.add_argument("--inner", type=int, default=None, help="n_inner (4 * n_embd by default)")
    e.add_argument("--max-position", type=int, default=d.n_positions, help="n_positions")
    e.add_argument("--eps", type=float, default=d.layer_norm_epsilon, help="layer_norm_epsilon")
    e.add_argument("--activation", choices=sorted(opt.ACTIVATIONS), default=d.activation_function,
                   help="activation_function (gelu_new, GPT-2's, exports as Tanh and Pow)")
    e.add_argument("--seed", type=int, default=d.seed)


def config_from_args(a) -> Config:
    config = Config(vocab_size=a.vocab, n_embd=a.hidden, n_layer=a.layers, n_head=a.heads,
                    n_inner=a.inner, n_positions=a.max_position, layer_norm_epsilon=a.eps,
                    activation_function=a.activation, seed=a.seed)
    config.check()
    return config


def main(argv=None) -> int:
    return common.exporter_main(argv, __doc__, "gpt2.py", add_export_args, config_from_args, export,
                                load_model)


if __name__ == "__main__":
    sys.exit(main())
