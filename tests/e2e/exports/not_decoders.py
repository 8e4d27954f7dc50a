#!/usr/bin/python3
"""Language models hetc does not compile, each written from its own family's semantics and
exported by torch.onnx.export, and the one line hetc compile must refuse each with.

    /usr/bin/python3 tests/e2e/exports/not_decoders.py --hetc BUILD/bin/hetc --workdir DIR

* encoder: BERT (word + position + token-type embeddings, post-LayerNorm blocks, the extended
  attention mask (1 - mask) * -10000, GELU feed-forward, a tanh pooler); outputs
  last_hidden_state and pooler_output.
* no-cache decoder: a GPT-2-style causal LM (learned positions, pre-LayerNorm, tril causal mask)
  exported without past key/values: input_ids and attention_mask in, logits out.
* state-space: one Mamba step (a rolling depthwise convolution state, the selective scan's state
  updated by exp(dt * A) and dt * B * x), as a recurrent decoder exports it: conv_state and
  ssm_state in and out, logits out.

Each must make hetc compile exit 1 with one stderr line that says what the model looks like and
what a decoder with a KV cache has that it lacks, and write no plan.
"""

import argparse
import os
import subprocess
import sys

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from e2e_common import CheckFailed, check_hetc_binary, main_wrapper  # noqa: E402

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
        ok = (proc.returncode == 1 and len(lines) == 1 and expected in lines[0] and
              "missing: past key/value inputs" in lines[0] and not os.path.exists(plan))
        print(f"{'ok  ' if ok else 'FAIL'} {what}: exit {proc.returncode}: {proc.stderr.strip()}")
        if not ok:
            failures.append(what)
    if failures:
        raise CheckFailed(f"not refused with one line naming what the model looks like: {failures}")
    print("PASS: an encoder, a decoder without its cache and a state-space model are each refused "
          "with one line")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True)
    p.add_argument("--workdir", required=True)
    a = p.parse_args(argv)
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
