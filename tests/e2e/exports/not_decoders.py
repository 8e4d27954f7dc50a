#!/usr/bin/python3
"""Language models hetc does not compile, each written from its own family's semantics and
exported by torch.onnx.export, and the one line hetc compile must refuse each with.

    /usr/bin/python3 tests/e2e/exports/not_decoders.py --hetc BUILD/bin/hetc --workdir DIR

* encoder: BERT (word + position + token-type embeddings, post-LayerNorm blocks, the extended
  attention mask (1 - mask) * -10000, GELU feed-forward, a tanh pooler); outputs
  last_hidden_state and pooler_output.
* no-cache decoder: a GPT-2-style causal LM (learned positions, pre-LayerNorm, tril causal mask)
  exported without past key/values: input_ids and attention_mask in, logits out.
* mixture of experts: a one-layer decoder with a KV cache whose feed-forward is Mixtral's
  sparse MoE block (transformers' modeling_mixtral.py: a router linear, softmax, top-2 of 4
  experts renormalised, each expert a SwiGLU MLP run on the tokens routed to it through
  torch.where and index_add_).
* state-space: one Mamba step (a rolling depthwise convolution state, the selective scan's state
  updated by exp(dt * A) and dt * B * x), as a recurrent decoder exports it: conv_state and
  ssm_state in and out, logits out.

Each must make hetc compile exit 1 with one stderr line that says what the model looks like (and,
but for the mixture of experts, what a decoder with a KV cache has that it lacks), and write no
plan.
"""

import os
import subprocess
import sys

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from e2e_common import CheckFailed, check_hetc_binary, check_main  # noqa: E402

VOCAB, HIDDEN, HEADS, POSITIONS = 96, 32, 4, 64


class BertLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = nn.Linear(HIDDEN, HIDDEN)
        self.ln1 = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.ffn_in = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.ffn_out = nn.Linear(4 * HIDDEN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, x, extended_mask):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (HIDDEN // HEADS) ** 0.5 + extended_mask
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, HIDDEN)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ffn_out(nn.functional.gelu(self.ffn_in(x))))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB, HIDDEN)
        self.position = nn.Embedding(POSITIONS, HIDDEN)
        self.token_type = nn.Embedding(2, HIDDEN)
        self.ln = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer() for _ in range(2)])
        self.pooler = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.ln(self.word(input_ids) + self.position(positions) +
                    self.token_type(token_type_ids))
        extended = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, extended)
        return x, torch.tanh(self.pooler(x[:, 0]))


class Gpt2NoCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(POSITIONS, HIDDEN)
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.c_attn = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids, attention_mask):
        b, s = input_ids.shape
        x = self.wte(input_ids) + self.wpe(torch.arange(s).unsqueeze(0))
        q, k, v = self.c_attn(self.ln_1(x)).view(b, s, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4)
        causal = torch.tril(torch.ones(s, s, dtype=torch.bool))
        scores = (q @ k.transpose(-1, -2)) / (HIDDEN // HEADS) ** 0.5
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        scores = scores + (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(scores.dtype).min
        x = x + self.c_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, HIDDEN))
        return self.ln_f(x) @ self.wte.weight.t()


class MixtralExpert(nn.Module):
    def __init__(self, inner=48):
        super().__init__()
        self.w1 = nn.Linear(HIDDEN, inner, bias=False)
        self.w2 = nn.Linear(inner, HIDDEN, bias=False)
        self.w3 = nn.Linear(HIDDEN, inner, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class MixtralSparseMoeBlock(nn.Module):
    """After transformers' MixtralSparseMoeBlock.forward (4.36-4.4x)."""

    def __init__(self, experts=4, top_k=2):
        super().__init__()
        self.num_experts, self.top_k = experts, top_k
        self.gate = nn.Linear(HIDDEN, experts, bias=False)
        self.experts = nn.ModuleList([MixtralExpert() for _ in range(experts)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = nn.functional.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim),
                                          dtype=hidden_states.dtype)
        expert_mask = nn.functional.one_hot(selected_experts, num_classes=self.num_experts)
        expert_mask = expert_mask.permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current = self.experts[expert_idx](current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current.to(hidden_states.dtype))
        return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)


class MoeDecoder(nn.Module):
    """One layer: RMS-normed multi-head attention over a KV cache, then the sparse MoE block."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.o = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.moe = MixtralSparseMoeBlock()
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids, attention_mask, past_key, past_value):
        x = self.embed(input_ids)
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4)
        k = torch.cat([past_key, k], dim=2)
        v = torch.cat([past_value, v], dim=2)
        w = torch.softmax(q @ k.transpose(-1, -2) / (HIDDEN // HEADS) ** 0.5, dim=-1)
        x = x + self.o((w @ v).transpose(1, 2).reshape(b, s, HIDDEN))
        x = x + self.moe(x)
        return self.head(x), k, v


class MambaStep(nn.Module):
    """One token of a Mamba block: in_proj to (x, z), the depthwise causal convolution over the
    rolling conv_state, the selective scan's state h = exp(dt A) h + dt B x, y = C h + D x."""

    def __init__(self, inner=64, state=8, conv=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.in_proj = nn.Linear(HIDDEN, 2 * inner, bias=False)
        self.conv_weight = nn.Parameter(torch.randn(inner, conv) * 0.1)
        self.x_proj = nn.Linear(inner, 1 + 2 * state, bias=False)
        self.dt_proj = nn.Linear(1, inner)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, state + 1).float()).repeat(inner, 1))
        self.d = nn.Parameter(torch.ones(inner))
        self.out_proj = nn.Linear(inner, HIDDEN, bias=False)
        self.state = state

    def forward(self, input_ids, conv_state, ssm_state):
        x, z = self.in_proj(self.embed(input_ids[:, -1])).chunk(2, dim=-1)
        conv_state = torch.cat([conv_state[:, :, 1:], x.unsqueeze(-1)], dim=-1)
        x = nn.functional.silu((conv_state * self.conv_weight).sum(-1))
        dt_b_c = self.x_proj(x)
        dt = nn.functional.softplus(self.dt_proj(dt_b_c[:, :1]))
        b, c = dt_b_c[:, 1:1 + self.state], dt_b_c[:, 1 + self.state:]
        a = -torch.exp(self.a_log)
        ssm_state = torch.exp(dt.unsqueeze(-1) * a) * ssm_state + (dt * x).unsqueeze(-1) * b.unsqueeze(1)
        y = (ssm_state * c.unsqueeze(1)).sum(-1) + self.d * x
        logits = self.out_proj(y * nn.functional.silu(z)) @ self.embed.weight.t()
        return logits.unsqueeze(1), conv_state, ssm_state


def export(module, args, names_in, names_out, axes, path):
    torch.manual_seed(0)
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, args, path, input_names=names_in, output_names=names_out,
                          dynamic_axes=axes, opset_version=17)


def write_models(workdir):
    torch.manual_seed(0)
    ids = torch.tensor([[5, 17, 42]])
    mask = torch.ones_like(ids)
    seq = {0: "batch", 1: "sequence"}
    models = {}
    path = os.path.join(workdir, "bert.onnx")
    export(Bert(), (ids, mask, torch.zeros_like(ids)),
           ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state", "pooler_output"],
           {"input_ids": seq, "attention_mask": seq, "token_type_ids": seq,
            "last_hidden_state": seq, "pooler_output": {0: "batch"}}, path)
    models["encoder"] = (path, "it looks like an encoder (hidden states out, no KV cache)")
    path = os.path.join(workdir, "gpt2_no_cache.onnx")
    export(Gpt2NoCache(), (ids, mask), ["input_ids", "attention_mask"], ["logits"],
           {"input_ids": seq, "attention_mask": seq, "logits": seq}, path)
    models["no-cache decoder"] = (path, "it looks like a decoder exported without its KV cache")
    path = os.path.join(workdir, "mamba_step.onnx")
    step = MambaStep()
    export(step, (ids, torch.zeros(1, 64, 4), torch.zeros(1, 64, 8)),
           ["input_ids", "conv_state", "ssm_state"], ["logits", "present_conv_state", "present_ssm_state"],
           {"input_ids": seq, "conv_state": {0: "batch"}, "ssm_state": {0: "batch"}}, path)
    models["state-space"] = (path, "it looks like a state-space model (recurrent state inputs, no KV cache)")
    path = os.path.join(workdir, "mixtral_moe.onnx")
    past = torch.zeros(1, HEADS, 2, HIDDEN // HEADS)
    export(MoeDecoder(), (ids, torch.ones(1, 5, dtype=torch.int64), past, past),
           ["input_ids", "attention_mask", "past_key_values.0.key", "past_key_values.0.value"],
           ["logits", "present.0.key", "present.0.value"],
           {"input_ids": seq, "attention_mask": {0: "batch", 1: "total"},
            "past_key_values.0.key": {0: "batch", 2: "past"},
            "past_key_values.0.value": {0: "batch", 2: "past"}, "logits": seq}, path)
    models["mixture of experts"] = (path, "it looks like a mixture of experts (node '")
    return models


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    failures = []
    for what, (path, expected) in write_models(a.workdir).items():
        plan = path + ".hplan"
        if os.path.exists(plan):
            os.remove(plan)
        proc = subprocess.run([a.hetc, "compile", path, "--target", "host", "-o", plan],
                              capture_output=True, text=True, timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        names_missing = what != "mixture of experts"
        ok = (proc.returncode == 1 and len(lines) == 1 and expected in lines[0] and
              ("missing: past key/value inputs" in lines[0] or not names_missing) and
              not os.path.exists(plan))
        if what == "mixture of experts":
            ok = ok and "keeps 2 of 4 experts scored by" in lines[0]
        print(f"{'ok  ' if ok else 'FAIL'} {what}: exit {proc.returncode}: {proc.stderr.strip()}")
        if not ok:
            failures.append(what)
    if failures:
        raise CheckFailed(f"not refused with one line naming what the model looks like: {failures}")
    print("PASS: an encoder, a decoder without its cache, a state-space model and a mixture of "
          "experts are each refused with one line")


def main():
    return check_main(check, __doc__)


if __name__ == "__main__":
    sys.exit(main())
