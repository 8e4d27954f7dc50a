"""Pieces shared by the exporters of this folder: prompt parsing, greedy decoding with past
key/values through a model's own forward, the JSON layout of results, and ONNX export.

The JSON layout (the same one tests/e2e/ort/greedy.mjs writes, so that compare.py can put the two
side by side):

    {
      "source":  "what produced it",
      "model":   "the model directory or file",
      "mode":    "single" (each prompt alone, batch 1) or "batch" (one left-padded batch),
      "prompts": [[ids...], ...],
      "max_new": N,
      "vocab":   V,
      "tokens":  [[N generated ids], ...]                one list per prompt
      "logits":  [[[V float32 values] x N], ...]         per prompt, the row each token was picked
                                                         from (step 0: last prompt position);
                                                         NaN is written as null
    }
"""

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import warnings
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch

# The ragged batch of the end-to-end checks: different lengths, ids below every vocabulary here.
DEFAULT_PROMPTS = [
    [5, 17, 42, 7, 99, 3],
    [1, 2],
    [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210],
]
DEFAULT_MAX_NEW = 16
# Padding id of the left-padded batch mode (any id works: padded positions are masked).
PAD_ID = 0

# forward(input_ids, attention_mask, position_ids, past) -> (logits [B, S, V], present)
# where past and present are tuples of (key, value) per layer.
Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Tuple], Tuple[torch.Tensor, Tuple]]


def parse_prompt(text: str) -> List[int]:
    try:
        ids = [int(t) for t in text.split(",") if t.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"prompt ids must be comma-separated integers, got {text!r}")
    if not ids:
        raise argparse.ArgumentTypeError("a prompt needs at least one id")
    return ids


def add_reference_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-dir", required=True, help="directory written by the export command")
    p.add_argument("--prompt-ids", action="append", type=parse_prompt, default=None,
                   help="comma-separated token ids; repeat for several prompts "
                        "(default: the three prompts of the end-to-end checks)")
    p.add_argument("--max-new", type=int, default=DEFAULT_MAX_NEW)
    p.add_argument("--mode", choices=("single", "batch"), default="single",
                   help="single: each prompt alone (batch 1, no padding); batch: all prompts in one "
                        "left-padded batch (attention_mask 0 on the padding)")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--no-self-check", action="store_true",
                   help="skip the check that cached decoding equals a full recompute")


def check_prompts(prompts: Sequence[Sequence[int]], vocab: int) -> None:
    for p in prompts:
        bad = [t for t in p if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt ids {bad} are outside the vocabulary (vocab {vocab})")


def left_pad(prompts: Sequence[Sequence[int]]) -> Tuple[torch.Tensor, torch.Tensor]:
    """input_ids and attention_mask [B, L] of the prompts left-padded to the longest one."""
    longest = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), longest), PAD_ID, dtype=torch.int64)
    mask = torch.zeros((len(prompts), longest), dtype=torch.int64)
    for b, p in enumerate(prompts):
        ids[b, longest - len(p):] = torch.tensor(p, dtype=torch.int64)
        mask[b, longest - len(p):] = 1
    return ids, mask


def positions_from_mask(mask: torch.Tensor, seq: int) -> torch.Tensor:
    """Hugging Face generate()'s position_ids: cumsum(mask) - 1, 1 on padding; last `seq` columns."""
    pos = mask.cumsum(-1) - 1
    pos = pos.masked_fill(mask == 0, 1)
    return pos[:, -seq:]


@torch.no_grad()
def greedy_batch(forward: Forward, empty_past: Callable[[int], Tuple], prompts: Sequence[Sequence[int]],
                 max_new: int) -> Tuple[List[List[int]], List[np.ndarray]]:
    """Greedy decoding of all prompts as one batch (left padding when ragged)."""
    step_ids, mask = left_pad(prompts)
    past = empty_past(len(prompts))
    tokens = [[] for _ in prompts]
    rows = [[] for _ in prompts]
    for _ in range(max_new):
        position_ids = positions_from_mask(mask, step_ids.shape[1])
        logits, past = forward(step_ids, mask, position_ids, past)
        last = logits[:, -1].float()
        picked = torch.argmax(last, dim=-1)
        for b in range(len(prompts)):
            tokens[b].append(int(picked[b]))
            rows[b].append(last[b].numpy().copy())
        step_ids = picked.unsqueeze(1).to(torch.int64)
        mask = torch.cat([mask, torch.ones((len(prompts), 1), dtype=torch.int64)], dim=1)
    return tokens, [np.stack(r) for r in rows]


@torch.no_grad()
def greedy(forward: Forward, empty_past: Callable[[int], Tuple], prompts: Sequence[Sequence[int]],
           max_new: int, mode: str = "single") -> Tuple[List[List[int]], List[np.ndarray]]:
    if mode == "batch":
        return greedy_batch(forward, empty_past, prompts, max_new)
    all_tokens, all_rows = [], []
    for p in prompts:
        tokens, rows = greedy_batch(forward, empty_past, [p], max_new)
        all_tokens.append(tokens[0])
        all_rows.append(rows[0])
    return all_tokens, all_rows


@torch.no_grad()
def self_check(forward: Forward, empty_past: Callable[[int], Tuple], prompt: Sequence[int],
               tokens: Sequence[int], logits: np.ndarray, tolerance: float = 1e-5) -> float:
    """One pass without past over prompt + generated tokens must give the cached run's logits."""
    ids = list(prompt) + list(tokens[:-1])
    n = len(ids)
    full, _ = forward(torch.tensor([ids]), torch.ones(1, n, dtype=torch.int64),
                      torch.arange(n).unsqueeze(0), empty_past(1))
    full = full[0, len(prompt) - 1:].float().numpy()
    scale = max(float(np.max(np.abs(full))), 1.0)
    err = float(np.max(np.abs(full - logits))) / scale
    if not np.isfinite(err) or err > tolerance:
        raise RuntimeError(f"self-check failed: cached and full-recompute logits differ by {err:.3g} "
                           f"(relative to max |logit| {scale:.3g}); the past/present path is wrong")
    return err


def write_json(path: str, source: str, model: str, mode: str, prompts, max_new: int, vocab: int,
               tokens: List[List[int]], logits: List[np.ndarray]) -> None:
    doc = {
        "source": source,
        "model": model,
        "mode": mode,
        "prompts": [list(map(int, p)) for p in prompts],
        "max_new": int(max_new),
        "vocab": int(vocab),
        "tokens": [list(map(int, t)) for t in tokens],
        # NaN as null, as JSON.stringify writes it (JSON has no NaN).
        "logits": [[[None if v != v else v for v in row] for row in np.asarray(r, dtype=np.float32).tolist()]
                   for r in logits],
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)


def run_reference(args, forward: Forward, empty_past: Callable[[int], Tuple], vocab: int,
                  source: str) -> int:
    """The `reference` command of an exporter: greedy decoding in PyTorch to JSON."""
    torch.set_num_threads(1)
    prompts = args.prompt_ids or DEFAULT_PROMPTS
    if args.max_new < 1:
        raise SystemExit("--max-new must be at least 1")
    check_prompts(prompts, vocab)
    tokens, logits = greedy(forward, empty_past, prompts, args.max_new, args.mode)
    note = ""
    if not args.no_self_check:
        err = self_check(forward, empty_past, prompts[0], tokens[0], logits[0])
        note = f"; self-check passed (cached vs full recompute {err:.1e})"
    write_json(args.out, source, args.model_dir, args.mode, prompts, args.max_new, vocab, tokens, logits)
    for t in tokens:
        print(" ".join(str(x) for x in t))
    print(f"wrote {args.out}{note}")
    return 0


def example_past(layers: int, kv_heads: int, head_dim: int, batch: int, past: int,
                 gen: torch.Generator) -> Tuple:
    shape = (batch, kv_heads, past, head_dim)
    return tuple((torch.randn(shape, generator=gen), torch.randn(shape, generator=gen))
                 for _ in range(layers))


def io_names(layers: int, position_ids: bool = True) -> Tuple[List[str], List[str]]:
    inputs = ["input_ids", "attention_mask"] + (["position_ids"] if position_ids else [])
    outputs = ["logits"]
    for i in range(layers):
        inputs += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outputs += [f"present.{i}.key", f"present.{i}.value"]
    return inputs, outputs


def dynamic_axes(layers: int, position_ids: bool = True) -> dict:
    axes = {
        "input_ids": {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "total_sequence"},
        "logits": {0: "batch", 1: "sequence"},
    }
    if position_ids:
        axes["position_ids"] = {0: "batch", 1: "sequence"}
    for i in range(layers):
        for kind in ("key", "value"):
            axes[f"past_key_values.{i}.{kind}"] = {0: "batch", 2: "past_sequence"}
            axes[f"present.{i}.{kind}"] = {0: "batch", 2: "total_sequence"}
    return axes


def onnx_export(module: torch.nn.Module, args: tuple, path: str, layers: int,
                position_ids: bool = True, opset: int = 17, verbose: bool = False,
                constant_folding: bool = True) -> None:
    """torch.onnx.export with the decoder-with-past names and dynamic batch/sequence/past axes;
    without constant_folding the graph keeps every computation on constants as nodes (weights
    transposed by Transpose nodes, shape arithmetic on Constant nodes)."""
    import onnx
    inputs, outputs = io_names(layers, position_ids)
    scratch = tempfile.mkdtemp(prefix="export-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        tmp = os.path.join(scratch, "model.onnx")
        with warnings.catch_warnings():
            if not verbose:
                warnings.simplefilter("ignore")
            with torch.no_grad():
                torch.onnx.export(module, args, tmp, input_names=inputs, output_names=outputs,
                                  dynamic_axes=dynamic_axes(layers, position_ids),
                                  opset_version=opset, do_constant_folding=constant_folding,
                                  export_params=True)
        shutil.move(tmp, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    onnx.checker.check_model(path)


def save_config(path: str, config: dict) -> None:
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=False)
        f.write("\n")


def load_config(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def init_decoder_weights(model: torch.nn.Module, seed: int, is_norm: Callable[[str], bool],
                         embedding_std: Callable[[str], Optional[float]],
                         sharpened: Tuple[str, ...] = (), norm_base: float = 1.0) -> None:
    """Seeded weights, large enough that greedy decoding gives varied tokens, drawn from one
    generator in named_parameters' order: a norm's weight (is_norm(name)) norm_base + 0.1 N(0, 1),
    every bias 0.1 N(0, 1), an embedding (embedding_std(name) not None) N(0, std^2), a matrix
    whose name ends with one of `sharpened` N(0, 2.5^2/fan_in) (larger q/k weights sharpen the
    attention, so the context, not only the current token, decides the next), any other matrix
    N(0, 1/fan_in)."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    for name, p in model.named_parameters():
        std = embedding_std(name)
        if is_norm(name) and name.endswith(".weight"):
            p.copy_(norm_base + 0.1 * torch.randn(p.shape, generator=gen))
        elif name.endswith(".bias"):
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        elif std is not None:
            p.copy_(std * torch.randn(p.shape, generator=gen))
        elif sharpened and name.endswith(sharpened):
            p.copy_(2.5 * torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
        elif p.dim() == 2:
            p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
        else:
            raise RuntimeError(f"no initialisation for {name}")


def load_model(model_dir: str, config_from_dict: Callable, model_class: Callable,
               init_weights: Callable) -> torch.nn.Module:
    """The module an export command wrote to model_dir: its config.json and weights.pt (or, without
    weights.pt, the seeded initialisation)."""
    config = config_from_dict(load_config(model_dir))
    model = model_class(config)
    weights = os.path.join(model_dir, "weights.pt")
    if os.path.exists(weights):
        model.load_state_dict(torch.load(weights))
    else:
        init_weights(model, config.seed)
    return model.eval()


def export_decoder(model: torch.nn.Module, config: dict, out_dir: str, vocab: int, layers: int,
                   kv_heads: int, head_dim: int, position_ids: bool, verbose: bool = False,
                   constant_folding: bool = True, opset: int = 17) -> str:
    """Writes config.json, weights.pt and model.onnx (decoder with past) for `model`, traced at a
    batch of 2 with 3 new tokens after 4 cached ones; returns the ONNX path."""
    os.makedirs(out_dir, exist_ok=True)
    save_config(os.path.join(out_dir, "config.json"), config)
    # Buffers the module builds from its config (constructed_buffers) are not weights.
    rebuilt = getattr(model, "constructed_buffers", ())
    torch.save({k: v for k, v in model.state_dict().items() if k not in rebuilt},
               os.path.join(out_dir, "weights.pt"))
    gen = torch.Generator().manual_seed(1234)
    batch, seq, past = 2, 3, 4  # distinct, so no dimension can be mistaken for another
    args = [torch.randint(0, vocab, (batch, seq), generator=gen),
            torch.ones(batch, past + seq, dtype=torch.int64)]
    if position_ids:
        args.append(torch.arange(past, past + seq).unsqueeze(0).expand(batch, seq).contiguous())
    args.append(example_past(layers, kv_heads, head_dim, batch, past, gen))
    path = os.path.join(out_dir, "model.onnx")
    onnx_export(model, tuple(args), path, layers, position_ids=position_ids, verbose=verbose,
                constant_folding=constant_folding, opset=opset)
    return path


def op_summary(path: str) -> str:
    import collections
    import onnx
    model = onnx.load(path)
    ops = collections.Counter((n.domain or "ai.onnx", n.op_type) for n in model.graph.node)
    parts = [f"{op}" + (f"[{d}]" if d != "ai.onnx" else "") + f" x{c}" for (d, op), c in sorted(ops.items())]
    return f"{len(model.graph.node)} nodes: " + ", ".join(parts)


def optional_int(text: Optional[str]) -> Optional[int]:
    return None if text is None else int(text)


def exporter_main(argv, doc: str, script: str, add_export_args: Callable, config_from_args: Callable,
                  export: Callable, load_model: Callable) -> int:
    """The command line a standalone exporter (gpt_neox.py, phi.py, falcon.py) shares:
    `export --out DIR` with the family's flags (add_export_args(parser); config_from_args(args)
    builds and checks the Config, raising ValueError for a refused combination), written by
    export(config, out, verbose=...), and `reference`, greedy decoding of the module
    load_model(model_dir) returns."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write model.onnx, config.json, weights.pt")
    e.add_argument("--out", required=True)
    add_export_args(e)
    e.add_argument("--opset", type=int, default=17,
                   help="ONNX opset (before 17, torch decomposes LayerNorm into nodes)")
    e.add_argument("--verbose", action="store_true")
    e.add_argument("--print-ops", action="store_true")
    r = sub.add_parser("reference", help="greedy decoding in PyTorch to JSON")
    add_reference_args(r)
    a = p.parse_args(argv)

    if a.command == "export":
        try:
            config = config_from_args(a)
        except ValueError as err:
            p.error(str(err))
        path = export(config, a.out, verbose=a.verbose, opset=a.opset)
        print(f"wrote {path}, config.json, weights.pt")
        if a.print_ops:
            print(op_summary(path))
        return 0

    model = load_model(a.model_dir)
    try:
        # A module whose forward takes no position_ids gives greedy decoding a `step` that does.
        return run_reference(a, getattr(model, "step", model), model.empty_past,
                             model.config.vocab_size,
                             f"torch {torch.__version__} ({script})")
    except (ValueError, RuntimeError) as err:
        print(f"{script} reference: {err}", file=sys.stderr)
        return 1

