#!/usr/bin/python3
"""An OPT decoder written after Hugging Face transformers' modeling_opt.py (4.3x), exported with
torch.onnx.export, plus its PyTorch greedy reference.

    /usr/bin/python3 models/exports/opt.py export --out DIR [--vocab 512 --hidden 128 ...]
    /usr/bin/python3 models/exports/opt.py reference --model-dir DIR --out ref.json \\
        [--prompt-ids 5,17,42 ...] [--max-new 16] [--mode single|batch]

export writes DIR/model.onnx (opset 17; inputs input_ids, attention_mask,
past_key_values.{i}.key/value [batch, heads, past, head_dim] -- OPT has no position_ids input;
outputs logits, present.{i}.key/value), DIR/config.json (OPT's field names) and DIR/weights.pt.

Semantics, as transformers has them:
  * learned positional embeddings with an offset of 2, positions from the attention mask:
    (cumsum(mask) * mask) - 1, the last `sequence` of them (padding gets position -1 + 2 = 1);
  * pre-LayerNorm (do_layer_norm_before=True) with bias; biases on q, k, v, out, fc1, fc2; ReLU
    (or, with --activation, nn.GELU or gelu_new as transformers' ACT2FN has them);
  * no GQA; q scaled by head_dim ** -0.5 before q @ k^T (bmm over batch * heads);
  * the mask: _make_causal_mask (finfo.min above the diagonal, zeros for the past) plus
    _expand_mask's padding (1 - mask, finfo.min where set), summed; after adding it to the scores,
    torch.max(scores, finfo.min);
  * a final LayerNorm, lm_head tied to the token embedding.
"""

import argparse
import math
import os
import sys
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


@dataclass
class Config:
    vocab_size: int = 512
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    ffn_dim: int = 512
    max_position_embeddings: int = 256
    word_embed_proj_dim: int = 128
    do_layer_norm_before: bool = True
    enable_bias: bool = True
    layer_norm_elementwise_affine: bool = True
    activation_function: str = "relu"
    tie_word_embeddings: bool = True
    seed: int = 0
    model_type: str = "opt"
    architectures: list = field(default_factory=lambda: ["OPTForCausalLM"])
    torch_dtype: str = "float32"

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


class OPTLearnedPositionalEmbedding(nn.Embedding):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        self.offset = 2
        super().__init__(num_embeddings + self.offset, embedding_dim)

    def forward(self, attention_mask, past_key_values_length):
        attention_mask = attention_mask.long()
        positions = (torch.cumsum(attention_mask, dim=1).type_as(attention_mask) * attention_mask).long() - 1
        positions = positions[:, past_key_values_length:]
        return super().forward(positions + self.offset)


def make_causal_mask(bsz, tgt_len, dtype, past_key_values_length):
    mask = torch.full((tgt_len, tgt_len), torch.tensor(torch.finfo(dtype).min))
    mask_cond = torch.arange(mask.size(-1))
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    mask = torch.cat([torch.zeros(tgt_len, past_key_values_length, dtype=dtype), mask], dim=-1)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)


def expand_mask(mask, dtype, tgt_len):
    bsz, src_len = mask.size()
    expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    inverted_mask = 1.0 - expanded_mask
    return inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)


class OPTAttention(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.embed_dim = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.scaling = self.head_dim ** -0.5
        bias = config.enable_bias
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=bias)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, past_key_value, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        if past_key_value is not None:
            key_states = torch.cat([past_key_value[0], key_states], dim=2)
            value_states = torch.cat([past_key_value[1], value_states], dim=2)
        present = (key_states, value_states)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.view(*proj_shape)
        value_states = value_states.view(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
        attn_weights = torch.max(attn_weights, torch.tensor(torch.finfo(attn_weights.dtype).min))
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output), present


class NewGELU(nn.Module):
    """transformers' gelu_new (GPT-2's), written out: exports as Pow, Mul, Add, Tanh."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class ReLUSquared(nn.Module):
    """transformers' relu2 (ReLUSquaredActivation: Primer's, Nemotron's): square(relu(x))."""

    def forward(self, x):
        return torch.square(nn.functional.relu(x))


# transformers' ACT2FN entries an OPT config may name (OPT checkpoints use relu).
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_new": NewGELU, "relu2": ReLUSquared}


class OPTDecoderLayer(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.embed_dim = config.hidden_size
        self.self_attn = OPTAttention(config)
        self.do_layer_norm_before = config.do_layer_norm_before
        affine = config.layer_norm_elementwise_affine
        self.self_attn_layer_norm = nn.LayerNorm(self.embed_dim, elementwise_affine=affine)
        self.fc1 = nn.Linear(self.embed_dim, config.ffn_dim, bias=config.enable_bias)
        self.fc2 = nn.Linear(config.ffn_dim, self.embed_dim, bias=config.enable_bias)
        self.final_layer_norm = nn.LayerNorm(self.embed_dim, elementwise_affine=affine)
        self.activation_fn = ACTIVATIONS[config.activation_function]()

    def forward(self, hidden_states, attention_mask, past_key_value):
        residual = hidden_states
        if self.do_layer_norm_before:
            hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states, present = self.self_attn(hidden_states, past_key_value, attention_mask)
        hidden_states = residual + hidden_states
        if not self.do_layer_norm_before:
            hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states_shape = hidden_states.shape
        hidden_states = hidden_states.reshape(-1, hidden_states.size(-1))
        residual = hidden_states
        if self.do_layer_norm_before:
            hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        hidden_states = self.fc2(hidden_states)
        hidden_states = (residual + hidden_states).view(hidden_states_shape)
        if not self.do_layer_norm_before:
            hidden_states = self.final_layer_norm(hidden_states)
        return hidden_states, present


class OPTDecoder(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        if config.word_embed_proj_dim != config.hidden_size:
            raise ValueError("word_embed_proj_dim != hidden_size (project_in/out) is not modelled here")
        self.embed_tokens = nn.Embedding(config.vocab_size, config.word_embed_proj_dim)
        self.embed_positions = OPTLearnedPositionalEmbedding(config.max_position_embeddings, config.hidden_size)
        self.final_layer_norm = (nn.LayerNorm(config.hidden_size, elementwise_affine=config.layer_norm_elementwise_affine)
                                 if config.do_layer_norm_before else None)
        self.layers = nn.ModuleList([OPTDecoderLayer(config) for _ in range(config.num_hidden_layers)])


class OPTModel(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.decoder = OPTDecoder(config)


class OPTForCausalLM(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.model = OPTModel(config)
        self.lm_head = nn.Linear(config.word_embed_proj_dim, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.decoder.embed_tokens.weight

    def forward(self, input_ids, attention_mask, past_key_values=None):
        d = self.model.decoder
        bsz, seq = input_ids.shape
        past = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        inputs_embeds = d.embed_tokens(input_ids)
        causal = make_causal_mask(bsz, seq, inputs_embeds.dtype, past)
        causal_attention_mask = expand_mask(attention_mask, inputs_embeds.dtype, seq) + causal
        pos_embeds = d.embed_positions(attention_mask, past)
        hidden_states = inputs_embeds + pos_embeds
        presents = []
        for i, layer in enumerate(d.layers):
            layer_past = None if past_key_values is None else past_key_values[i]
            hidden_states, present = layer(hidden_states, causal_attention_mask, layer_past)
            presents.append(present)
        if d.final_layer_norm is not None:
            hidden_states = d.final_layer_norm(hidden_states)
        return self.lm_head(hidden_states).float(), tuple(presents)

    def step(self, input_ids, attention_mask, position_ids, past):
        """common.greedy's interface: OPT derives positions from the attention mask itself."""
        return self(input_ids, attention_mask, past)

    def empty_past(self, batch: int):
        c = self.config
        shape = (batch, c.num_attention_heads, 0, c.head_dim)
        return tuple((torch.zeros(shape), torch.zeros(shape)) for _ in range(c.num_hidden_layers))


@torch.no_grad()
def init_weights(model: OPTForCausalLM, seed: int) -> None:
    """Seeded: linears N(0, 1/fan_in), biases N(0, 0.1^2), LayerNorm weights 1 + 0.1 N(0, 1) and
    biases 0.1 N(0, 1), token and position embeddings N(0, 1/hidden) (the token one is lm_head)."""
    hidden = model.config.hidden_size
    common.init_decoder_weights(
        model, seed, is_norm=lambda name: "layer_norm" in name,
        embedding_std=lambda name: hidden ** -0.5 if "embed_" in name else None)


def build_model(config: Config) -> OPTForCausalLM:
    model = OPTForCausalLM(config)
    init_weights(model, config.seed)
    return model.eval()


def load_model(model_dir: str) -> OPTForCausalLM:
    return common.load_model(model_dir, Config.from_dict, OPTForCausalLM, init_weights)


def export(config: Config, out_dir: str, verbose: bool = False, opset: int = 17) -> str:
    # OPT has no position_ids input: positions come from the attention mask's cumsum.
    return common.export_decoder(build_model(config), asdict(config), out_dir, config.vocab_size,
                                 config.num_hidden_layers, config.num_attention_heads,
                                 config.head_dim, position_ids=False, verbose=verbose, opset=opset)


def fuse_activations(path: str, layers: int, activation: str) -> None:
    """Rewrites the file as ONNX Runtime's transformer optimizer fuses an activation written out:
    every node of layer i's activation_fn (torch names them /layers.i/activation_fn/...) becomes
    one com.microsoft node, FastGelu for gelu_new, Gelu for nn.GELU, reading fc1's output."""
    import onnx
    from onnx import helper
    op = {"gelu_new": "FastGelu", "gelu": "Gelu"}[activation]
    model = onnx.load(path)
    nodes = list(model.graph.node)
    for i in range(layers):
        prefix = f"/layers.{i}/activation_fn/"
        part = [n for n in nodes if n.name.startswith(prefix)]
        produced = {o for n in part for o in n.output}
        inputs = {x for n in part for x in n.input if x not in produced and x}
        # fc1's output, beside the constants the written-out form reads
        (source,) = [x for x in inputs if not any(x in c.output for c in nodes if c.op_type == "Constant")
                     and x not in {t.name for t in model.graph.initializer}]
        read = {x for n in nodes if n not in part for x in n.input}
        (result,) = [o for o in produced if o in read]
        at = nodes.index(part[0])
        nodes = [n for n in nodes if n not in part]
        nodes.insert(at, helper.make_node(op, [source], [result], name=f"{prefix}{op}",
                                          domain="com.microsoft"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, path)


def fuse_skip_norms(path: str) -> int:
    """Rewrites the file as ONNX Runtime's optimizer fuses a residual sum and the LayerNorm that
    reads it: LayerNormalization(Add(a, b)) becomes SkipLayerNormalization(a, b, gamma, beta)
    (com.microsoft) with the sum as its output 3. Returns how many were fused."""
    import onnx
    from onnx import helper
    model = onnx.load(path)
    nodes = list(model.graph.node)
    producer = {o: n for n in nodes for o in n.output}
    fused = 0
    for norm in [n for n in nodes if n.op_type == "LayerNormalization"]:
        add = producer.get(norm.input[0])
        if add is None or add.op_type != "Add" or len(add.input) != 2:
            continue
        eps = next((a.f for a in norm.attribute if a.name == "epsilon"), 1e-5)
        skip = helper.make_node("SkipLayerNormalization", [add.input[0], add.input[1], *norm.input[1:3]],
                                [norm.output[0], "", "", add.output[0]], name=norm.name + "/Skip",
                                domain="com.microsoft", epsilon=eps)
        at = nodes.index(norm)
        nodes[at] = skip
        nodes.remove(add)
        fused += 1
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, path)
    return fused


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write model.onnx, config.json, weights.pt")
    e.add_argument("--out", required=True)
    d = Config()
    e.add_argument("--vocab", type=int, default=d.vocab_size)
    e.add_argument("--hidden", type=int, default=d.hidden_size)
    e.add_argument("--layers", type=int, default=d.num_hidden_layers)
    e.add_argument("--heads", type=int, default=d.num_attention_heads)
    e.add_argument("--ffn", type=int, default=d.ffn_dim)
    e.add_argument("--max-position", type=int, default=d.max_position_embeddings)
    e.add_argument("--activation", choices=sorted(ACTIVATIONS), default=d.activation_function,
                   help="the feed-forward's activation_function (nn.GELU exports as Erf, gelu_new "
                        "as Tanh and Pow)")
    e.add_argument("--seed", type=int, default=d.seed)
    e.add_argument("--post-layer-norm", action="store_true",
                   help="do_layer_norm_before=False (opt-350m): each norm after its residual add, "
                        "no final norm")
    e.add_argument("--ort-fused-norms", action="store_true",
                   help="a LayerNormalization of a residual Add as one com.microsoft "
                        "SkipLayerNormalization (the sum as its output 3), as ONNX Runtime fuses them")
    e.add_argument("--ort-fused-activation", action="store_true",
                   help="with --activation gelu or gelu_new: one com.microsoft Gelu or FastGelu node "
                        "per layer, as ONNX Runtime's transformer optimizer fuses them")
    e.add_argument("--opset", type=int, default=17,
                   help="ONNX opset (before 17, torch decomposes LayerNorm into nodes)")
    e.add_argument("--verbose", action="store_true")
    e.add_argument("--print-ops", action="store_true")
    r = sub.add_parser("reference", help="greedy decoding in PyTorch to JSON")
    common.add_reference_args(r)
    a = p.parse_args(argv)

    if a.command == "export":
        if a.hidden % a.heads:
            p.error("--hidden must be a multiple of --heads")
        config = Config(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                        num_attention_heads=a.heads, ffn_dim=a.ffn, max_position_embeddings=a.max_position,
                        activation_function=a.activation, do_layer_norm_before=not a.post_layer_norm,
                        word_embed_proj_dim=a.hidden, seed=a.seed)
        if a.ort_fused_activation and a.activation == "relu":
            p.error("--ort-fused-activation fuses a GELU: give --activation gelu or gelu_new")
        if a.ort_fused_norms and a.opset < 17:
            p.error("--ort-fused-norms fuses ONNX's LayerNormalization, which opset 17 has")
        path = export(config, a.out, verbose=a.verbose, opset=a.opset)
        if a.ort_fused_activation:
            fuse_activations(path, a.layers, a.activation)
        if a.ort_fused_norms and fuse_skip_norms(path) == 0:
            p.error("--ort-fused-norms found no LayerNormalization of an Add")
        print(f"wrote {path}, config.json, weights.pt")
        if a.print_ops:
            print(common.op_summary(path))
        return 0

    model = load_model(a.model_dir)
    try:
        return common.run_reference(a, model.step, model.empty_past, model.config.vocab_size,
                                    f"torch {torch.__version__} (opt.py)")
    except (ValueError, RuntimeError) as err:
        print(f"opt.py reference: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
