#!/usr/bin/python3
"""A GPT-J decoder written after Hugging Face transformers' modeling_gptj.py (4.3x-4.4x, eager
attention), exported with torch.onnx.export, plus its PyTorch greedy reference.

    /usr/bin/python3 models/exports/gptj.py export --out DIR [--vocab 512 --hidden 128 ...]
    /usr/bin/python3 models/exports/gptj.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]

export writes DIR/model.onnx (opset 17; inputs input_ids, attention_mask, position_ids,
past_key_values.{i}.key/value [batch, heads, past, head_dim]; outputs logits,
present.{i}.key/value), DIR/config.json (GPTJConfig's field names) and DIR/weights.pt.

Semantics, as transformers has them (each a spelling no other exporter here writes together):
  * transformer.wte (nn.Embedding), no position embedding; transformer.ln_f, LayerNorm with bias;
    an untied lm_head with a bias;
  * each layer: one ln_1 read by both the attention and the MLP, summed as
    attn_output + feed_forward_hidden_states + residual;
  * q_proj, k_proj, v_proj and out_proj without bias; _split_heads views [batch, seq, heads,
    head_dim] through `tensor.size()[:-1] + (heads, head_dim)` and keeps that layout for q and k
    until after the rotation (permuted to [batch, heads, seq, head_dim] afterwards), v permuted
    at once;
  * rotary on the first rotary_dim columns of each head, in interleaved pairs (rotate_every_two:
    x[..., ::2], x[..., 1::2], stacked and flattened), from embed_positions, a [max_positions,
    rotary_dim] buffer of cat(sin, cos) (create_sinusoidal_positions, an einsum of arange and
    inv_freq), repeated over the batch and picked by torch.gather with position_ids repeated over
    its last axis, split in halves into sin and cos, each repeat_interleave'd by 2;
  * the cache [batch, heads, past, head_dim] concatenated on the sequence axis;
  * scores matmul(q.float(), k.float()^T), then torch.where(causal_mask, scores, finfo.min) with
    causal_mask a slice of the [1, 1, max_positions, max_positions] boolean buffer `bias`, THEN
    divided by scale_attn = sqrt(head_dim), plus the padding mask (1 - mask) * finfo.min;
    softmax, cast to v's dtype, matmul with v, heads merged, out_proj;
  * MLP fc_in -> gelu_new (the tanh form written out) -> fc_out, both with bias.

torch 1.13 exports repeat_interleave over the sin/cos columns (whose count its trace cannot see)
as SplitToSequence and a Loop, which hetc unrolls once the count is evaluated; --repeat expand
writes the same repeat as unsqueeze, expand and reshape (what a model edited to export without
loops has).
"""

import argparse
import os
import sys
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import gpt_neox  # noqa: E402

ACTIVATIONS = gpt_neox.ACTIVATIONS


@dataclass
class Config:
    vocab_size: int = 512
    n_embd: int = 128
    n_inner: int = 512
    n_layer: int = 2
    n_head: int = 4
    rotary_dim: int = 16
    activation_function: str = "gelu_new"
    n_positions: int = 256
    layer_norm_epsilon: float = 1e-5
    tie_word_embeddings: bool = False
    # Not GPTJConfig's: how sin/cos are repeated pairwise (interleave: transformers' own).
    repeat: str = "interleave"
    seed: int = 0
    model_type: str = "gptj"
    architectures: list = field(default_factory=lambda: ["GPTJForCausalLM"])
    torch_dtype: str = "float32"

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def check(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError("n_embd must be a multiple of n_head")
        if self.rotary_dim % 2 or not 0 < self.rotary_dim <= self.head_dim:
            raise ValueError(f"rotary_dim {self.rotary_dim} must be even and within head_dim "
                             f"{self.head_dim}")
        if self.repeat not in ("interleave", "expand"):
            raise ValueError(f"unknown repeat {self.repeat!r}")
        if self.activation_function not in ACTIVATIONS:
            raise ValueError(f"unknown activation_function {self.activation_function!r}")

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def create_sinusoidal_positions(num_pos: int, dim: int) -> torch.Tensor:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", torch.arange(num_pos, dtype=torch.float),
                                inv_freq).float()
    return torch.cat((torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)), dim=1)


def rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)  # in einsum notation: rearrange(x, '... d j -> ... (d j)')


def repeat_pairs(x: torch.Tensor, form: str) -> torch.Tensor:
    """x [b, s, n] -> [b, s, 1, 2 n], each column twice in a row."""
    if form == "interleave":
        return torch.repeat_interleave(x[:, :, None, :], 2, 3)
    b, s, n = x.shape
    return x[:, :, None, :, None].expand(b, s, 1, n, 2).reshape(b, s, 1, 2 * n)


def apply_rotary_pos_emb(tensor: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor,
                         repeat: str = "interleave") -> torch.Tensor:
    sin = repeat_pairs(sin, repeat)
    cos = repeat_pairs(cos, repeat)
    return (tensor * cos) + (rotate_every_two(tensor) * sin)


class GPTJAttention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        max_positions = config.n_positions
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False)
        self.embed_dim = config.n_embd
        self.num_attention_heads = config.n_head
        self.head_dim = config.head_dim
        self.scale_attn = torch.sqrt(torch.tensor(self.head_dim, dtype=torch.float32)).to(
            torch.get_default_dtype())
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.rotary_dim = config.rotary_dim
        self.repeat = config.repeat
        pos_embd_dim = self.rotary_dim or self.embed_dim
        self.embed_positions = create_sinusoidal_positions(max_positions, pos_embd_dim)

    def _split_heads(self, tensor, num_attention_heads, attn_head_size, rotary):
        new_shape = tensor.size()[:-1] + (num_attention_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        if rotary:
            return tensor
        if len(tensor.shape) == 5:
            return tensor.permute(0, 1, 3, 2, 4)  # (batch, blocks, head, block_length, head_features)
        return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def _merge_heads(self, tensor, num_attention_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_attention_heads * attn_head_size,)
        return tensor.view(new_shape)

    def _attn(self, query, key, value, attention_mask=None):
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        query = query.to(torch.float32)
        key = key.to(torch.float32)
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.tensor(mask_value, dtype=attn_weights.dtype).to(attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = attn_weights / self.scale_attn
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.to(value.dtype)
        return torch.matmul(attn_weights, value)

    def _get_embed_positions(self, position_ids):
        embed_positions = self.embed_positions
        if embed_positions.device != position_ids.device:
            embed_positions = embed_positions.to(position_ids.device)
            self.embed_positions = embed_positions
        return embed_positions.repeat(position_ids.shape[0], 1, 1)

    def forward(self, hidden_states, layer_past, attention_mask, position_ids):
        query = self.q_proj(hidden_states)
        key = self.k_proj(hidden_states)
        value = self.v_proj(hidden_states)

        query = self._split_heads(query, self.num_attention_heads, self.head_dim, True)
        key = self._split_heads(key, self.num_attention_heads, self.head_dim, True)
        value = self._split_heads(value, self.num_attention_heads, self.head_dim, False)

        embed_positions = self._get_embed_positions(position_ids)
        repeated_position_ids = position_ids.unsqueeze(-1).repeat(1, 1, embed_positions.shape[-1])
        sincos = torch.gather(embed_positions, 1, repeated_position_ids)
        sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)

        if self.rotary_dim is not None:
            k_rot = key[:, :, :, : self.rotary_dim]
            k_pass = key[:, :, :, self.rotary_dim:]
            q_rot = query[:, :, :, : self.rotary_dim]
            q_pass = query[:, :, :, self.rotary_dim:]
            k_rot = apply_rotary_pos_emb(k_rot, sin, cos, self.repeat)
            q_rot = apply_rotary_pos_emb(q_rot, sin, cos, self.repeat)
            key = torch.cat([k_rot, k_pass], dim=-1)
            query = torch.cat([q_rot, q_pass], dim=-1)
        else:
            key = apply_rotary_pos_emb(key, sin, cos, self.repeat)
            query = apply_rotary_pos_emb(query, sin, cos, self.repeat)

        key = key.permute(0, 2, 1, 3)
        query = query.permute(0, 2, 1, 3)

        if layer_past is not None:
            key = torch.cat((layer_past[0], key), dim=-2)
            value = torch.cat((layer_past[1], value), dim=-2)
        present = (key, value)

        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_attention_heads, self.head_dim)
        return self.out_proj(attn_output), present


class GPTJMLP(nn.Module):
    def __init__(self, intermediate_size: int, config: Config):
        super().__init__()
        self.fc_in = nn.Linear(config.n_embd, intermediate_size)
        self.fc_out = nn.Linear(intermediate_size, config.n_embd)
        self.act = ACTIVATIONS[config.activation_function]()

    def forward(self, hidden_states):
        return self.fc_out(self.act(self.fc_in(hidden_states)))


class GPTJBlock(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPTJAttention(config)
        self.mlp = GPTJMLP(config.n_inner, config)

    def forward(self, hidden_states, layer_past, attention_mask, position_ids):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output, present = self.attn(hidden_states, layer_past, attention_mask, position_ids)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = attn_output + feed_forward_hidden_states + residual
        return hidden_states, present


class GPTJModel(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.h = nn.ModuleList([GPTJBlock(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)


class GPTJForCausalLM(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        config.check()
        self.config = config
        self.transformer = GPTJModel(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
        t = self.transformer
        hidden_states = t.wte(input_ids)
        # GPTJModel.forward's padding mask: [batch, 1, 1, total], 0 or finfo.min.
        mask = attention_mask[:, None, None, :].to(dtype=hidden_states.dtype)
        mask = (1.0 - mask) * torch.finfo(hidden_states.dtype).min
        presents = []
        for i, block in enumerate(t.h):
            layer_past = None if past_key_values is None else past_key_values[i]
            hidden_states, present = block(hidden_states, layer_past, mask, position_ids)
            presents.append(present)
        hidden_states = t.ln_f(hidden_states)
        logits = self.lm_head(hidden_states).to(torch.float32)
        return logits, tuple(presents)

    def empty_past(self, batch: int):
        c = self.config
        shape = (batch, c.n_head, 0, c.head_dim)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.n_layer))


@torch.no_grad()
def init_weights(model: GPTJForCausalLM, seed: int) -> None:
    """Seeded weights (common.init_decoder_weights): q_proj and k_proj sharpened, LayerNorm weights
    1 + 0.1 N(0, 1), the token embedding N(0, 1)."""
    common.init_decoder_weights(
        model, seed, is_norm=lambda name: ".ln_" in name,
        embedding_std=lambda name: 1.0 if name == "transformer.wte.weight" else None,
        sharpened=("q_proj.weight", "k_proj.weight"))


def build_model(config: Config) -> GPTJForCausalLM:
    model = GPTJForCausalLM(config)
    init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> GPTJForCausalLM:
    return common.load_model(model_dir, Config.from_dict, GPTJForCausalLM, init_weights)


def export(config: Config, out_dir: str, verbose: bool = False, opset: int = 17) -> str:
    return common.export_decoder(build_model(config), asdict(config), out_dir, config.vocab_size,
                                 config.n_layer, config.n_head, config.head_dim,
                                 position_ids=True, verbose=verbose, opset=opset)


def add_export_args(e: argparse.ArgumentParser) -> None:
    d = Config()
    e.add_argument("--vocab", type=int, default=d.vocab_size)
    e.add_argument("--hidden", type=int, default=d.n_embd)
    e.add_argument("--layers", type=int, default=d.n_layer)
    e.add_argument("--heads", type=int, default=d.n_head)
    e.add_argument("--intermediate", type=int, default=d.n_inner)
    e.add_argument("--rotary-dim", type=int, default=d.rotary_dim,
                   help="rotary_dim: the rotated columns of each head (GPT-J 6B: 64 of 256)")
    e.add_argument("--max-position", type=int, default=d.n_positions)
    e.add_argument("--eps", type=float, default=d.layer_norm_epsilon)
    e.add_argument("--hidden-act", choices=sorted(ACTIVATIONS), default=d.activation_function)
    e.add_argument("--repeat", choices=("interleave", "expand"), default=d.repeat,
                   help="sin/cos repeated pairwise by repeat_interleave (transformers'; exported "
                        "as a Loop) or by expand and reshape")
    e.add_argument("--seed", type=int, default=d.seed)


def config_from_args(a) -> Config:
    config = Config(vocab_size=a.vocab, n_embd=a.hidden, n_layer=a.layers, n_head=a.heads,
                    n_inner=a.intermediate, rotary_dim=a.rotary_dim, n_positions=a.max_position,
                    layer_norm_epsilon=a.eps, activation_function=a.hidden_act, repeat=a.repeat,
                    seed=a.seed)
    config.check()
    return config


def main(argv=None) -> int:
    return common.exporter_main(argv, __doc__, "gptj.py", add_export_args, config_from_args, export,
                                load_model)


if __name__ == "__main__":
    sys.exit(main())
