#!/usr/bin/python3
"""PyTorch greedy-decoding reference for an exported model directory.

    /usr/bin/python3 models/reference.py --model-dir DIR --prompt-ids 5,17,42,7 --prompt-ids 1,2 \\
                                         --max-new 32 --out OUTDIR

Rebuilds the model from DIR/config.json and DIR/weights.pt (float32) and, for each prompt on
its own (batch 1, no padding), runs prefill and then greedy decoding with the KV cache through the
model's past/present interface. Writes:
  OUTDIR/tokens.txt  one line per prompt: the max_new generated ids separated by single spaces
  OUTDIR/logits.npy  float32 [num_prompts, max_new, vocab]: row [s, t] holds the logits token t of
                     sequence s was picked from (t = 0: last prompt position after prefill)
Then checks itself: for the first prompt, one forward pass without past over prompt + generated
tokens must give the same logits as the cached run (within 1e-5 of the largest |logit|), which
shows the past/present path is consistent.
"""

import argparse
import os
import sys
from typing import List, Tuple

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama import LlamaForCausalLM, load_model  # noqa: E402

SELF_CHECK_TOLERANCE = 1e-5


def parse_prompt(text: str) -> List[int]:
    try:
        ids = [int(t) for t in text.split(",") if t.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"prompt ids must be comma-separated integers, got {text!r}")
    if not ids:
        raise argparse.ArgumentTypeError("a prompt needs at least one id")
    return ids


@torch.no_grad()
def greedy(model: LlamaForCausalLM, prompt: List[int], max_new: int) -> Tuple[List[int], np.ndarray]:
    """Prefill, then greedy decode with the KV cache. Returns the tokens and [max_new, vocab] logits."""
    vocab = model.config.vocab
    bad = [t for t in prompt if not 0 <= t < vocab]
    if bad:
        raise ValueError(f"prompt ids {bad} are outside the vocabulary (vocab {vocab})")
    past = model.empty_past(1)
    step_ids = torch.tensor([prompt], dtype=torch.int64)
    past_len = 0
    tokens, rows = [], []
    for _ in range(max_new):
        seq = step_ids.shape[1]
        attention_mask = torch.ones(1, past_len + seq, dtype=torch.int64)
        position_ids = torch.arange(past_len, past_len + seq, dtype=torch.int64).unsqueeze(0)
        logits, past = model(step_ids, attention_mask, position_ids, past)
        row = logits[0, -1]
        token = int(torch.argmax(row))
        tokens.append(token)
        rows.append(row.numpy().copy())
        past_len += seq
        step_ids = torch.tensor([[token]], dtype=torch.int64)
    return tokens, np.stack(rows) if rows else np.zeros((0, vocab), np.float32)


@torch.no_grad()
def full_recompute_logits(model: LlamaForCausalLM, prompt: List[int], generated: List[int]) -> np.ndarray:
    """Logits at the positions the cached run picked its tokens from, without any past."""
    ids = prompt + generated[:-1]
    n = len(ids)
    logits, _ = model(torch.tensor([ids]), torch.ones(1, n, dtype=torch.int64),
                      torch.arange(n).unsqueeze(0), None)
    return logits[0, len(prompt) - 1:].numpy()


def self_check(model: LlamaForCausalLM, prompt: List[int], tokens: List[int], logits: np.ndarray) -> float:
    full = full_recompute_logits(model, prompt, tokens)
    scale = max(float(np.max(np.abs(full))), 1.0)
    err = float(np.max(np.abs(full - logits))) / scale
    if err > SELF_CHECK_TOLERANCE:
        raise RuntimeError(f"self-check failed: cached and full-recompute logits differ by {err:.3g} "
                           f"(relative to max |logit| {scale:.3g}); the past/present path is wrong")
    full_tokens = [int(t) for t in np.argmax(full, axis=-1)]
    if full_tokens != tokens:
        raise RuntimeError(f"self-check failed: full recompute picks {full_tokens}, cached run {tokens}")
    return err


def write_outputs(out_dir: str, all_tokens: List[List[int]], all_logits: List[np.ndarray]) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokens.txt"), "w") as f:
        for tokens in all_tokens:
            f.write(" ".join(str(t) for t in tokens) + "\n")
    np.save(os.path.join(out_dir, "logits.npy"), np.stack(all_logits).astype(np.float32))


def run(model_dir: str, prompts: List[List[int]], max_new: int, out_dir: str, check: bool = True):
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    model = load_model(model_dir)
    all_tokens, all_logits = [], []
    for prompt in prompts:
        tokens, logits = greedy(model, prompt, max_new)
        all_tokens.append(tokens)
        all_logits.append(logits)
    err = None
    if check and max_new > 0:
        err = self_check(model, prompts[0], all_tokens[0], all_logits[0])
    write_outputs(out_dir, all_tokens, all_logits)
    return all_tokens, np.stack(all_logits), err


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-dir", required=True, help="directory written by export.py")
    p.add_argument("--prompt-ids", action="append", type=parse_prompt, required=True,
                   help="comma-separated token ids; repeat for several sequences")
    p.add_argument("--max-new", type=int, default=32)
    p.add_argument("--out", required=True, help="output directory for tokens.txt and logits.npy")
    p.add_argument("--no-self-check", action="store_true")
    a = p.parse_args(argv)
    if a.max_new < 1:
        p.error("--max-new must be at least 1")
    try:
        tokens, logits, err = run(a.model_dir, a.prompt_ids, a.max_new, a.out, check=not a.no_self_check)
    except (ValueError, RuntimeError) as e:
        print(f"reference: {e}", file=sys.stderr)
        return 1
    for t in tokens:
        print(" ".join(str(x) for x in t))
    check = "" if err is None else f"; self-check passed (cached vs full recompute: {err:.2e})"
    print(f"wrote {a.out}/tokens.txt and {a.out}/logits.npy {list(logits.shape)}{check}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
