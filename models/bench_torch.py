#!/usr/bin/python3
"""PyTorch's decode step, timed at given contexts: the reference `hetc bench --compare-torch` runs
beside its own points, in the same run.

    /usr/bin/python3 models/bench_torch.py --model-dir DIR --threads 2 --dtype bf16 \\
        --contexts 0,4096 --batches 1,2 --gen 8      # one JSON line per point
    /usr/bin/python3 models/bench_torch.py --model-dir DIR --threads 2 --serve
        # reads "CONTEXT BATCH GEN" lines on stdin and answers each with one JSON line

The first line on stdout describes the set-up ({"ready": true, "torch": ..., "dtype": ...}) or
says why there is none ({"error": "..."}, exit code 1). A point's line holds its context, batch
and gen with "ms_per_token", or "skipped" (the reason) when its KV cache would not fit in memory,
or "error".

At each point the model's past key/values (per layer [batch, kv_heads, context, head_dim]) are
filled with random values (nothing is prefilled), one untimed step runs at the context, then
`gen` greedy steps from the context are timed, token selection included, each feeding back the
argmax and growing the past as the model's own past/present interface does (torch.cat per layer).
The model, its activations and the KV cache are all in --dtype: bf16 (torch.bfloat16) or f32.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MEMORY_KEPT_FREE = 0.1


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fail(message):
    say({"error": message})
    sys.exit(1)


def available_memory():
    """MemAvailable in bytes, or None where /proc/meminfo does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def parse_expect(text):
    """"layers=16,kv_heads=8" -> {"layers": 16, "kv_heads": 8}."""
    expected = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        expected[name.strip()] = int(value)
    return expected


class DecodeTimer:
    def __init__(self, torch, model, dtype, seed):
        self.torch = torch
        self.model = model
        self.dtype = dtype
        self.config = model.config
        self.generator = torch.Generator().manual_seed(seed)

    def kv_bytes(self, context, batch):
        c = self.config
        element = 2 if self.dtype == self.torch.bfloat16 else 4
        return batch * c.layers * 2 * c.kv_heads * context * c.head_dim * element

    def point(self, context, batch, gen):
        torch = self.torch
        result = {"context": context, "batch": batch, "gen": gen}
        # The past and the grown present of one step live together: twice the KV cache.
        needed = 2 * self.kv_bytes(context + gen + 1, batch)
        available = available_memory()
        if available is not None and needed > available * (1 - MEMORY_KEPT_FREE):
            result["skipped"] = (f"the PyTorch KV cache (past and present) needs "
                                 f"{needed / 2**30:.2f} GiB but {available / 2**30:.2f} GiB is "
                                 f"available, of which 10% is kept free")
            return result
        c = self.config
        fill_start = time.perf_counter()
        shape = (batch, c.kv_heads, context, c.head_dim)
        past = tuple((torch.randn(shape, generator=self.generator).to(self.dtype),
                      torch.randn(shape, generator=self.generator).to(self.dtype))
                     for _ in range(c.layers))
        tokens = torch.randint(0, c.vocab, (batch, 1), generator=self.generator)
        result["fill_seconds"] = time.perf_counter() - fill_start

        def step(past, tokens, position):
            mask = torch.ones(batch, position + 1, dtype=torch.int64)
            positions = torch.full((batch, 1), position, dtype=torch.int64)
            logits, present = self.model(tokens, mask, positions, past)
            return present, torch.argmax(logits[:, -1, :], dim=-1, keepdim=True)

        with torch.no_grad():
            step(past, tokens, context)  # warm-up; its grown past is dropped
            start = time.perf_counter()
            for k in range(gen):
                past, tokens = step(past, tokens, context + k)
            seconds = time.perf_counter() - start
        result["decode_seconds"] = seconds
        result["ms_per_token"] = seconds * 1e3 / gen
        result["tokens_per_s"] = batch * gen / seconds
        return result


def parse_list(text, what):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: comma-separated integers expected, got {text!r}")
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"{what}: non-negative integers expected, got {text!r}")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's choice)")
    parser.add_argument("--dtype", choices=["bf16", "f32"], default="f32")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--expect", default="",
                        help="config fields the model must have, as name=value,...")
    parser.add_argument("--serve", action="store_true",
                        help="answer 'CONTEXT BATCH GEN' lines read from stdin")
    parser.add_argument("--contexts", type=lambda t: parse_list(t, "--contexts"), default=[0])
    parser.add_argument("--batches", type=lambda t: parse_list(t, "--batches"), default=[1])
    parser.add_argument("--gen", type=int, default=16)
    args = parser.parse_args()

    try:
        import torch
    except ImportError as error:
        fail(f"{sys.executable} cannot import torch ({error}); PyTorch is needed for the "
             f"reference")
    sys.path.insert(0, HERE)
    from llama import LlamaConfig, load_model  # noqa: E402

    config_path = os.path.join(args.model_dir, "config.json")
    weights_path = os.path.join(args.model_dir, "weights.pt")
    for path in (config_path, weights_path):
        if not os.path.isfile(path):
            fail(f"{path} does not exist (the model directory models/export.py wrote is expected)")
    try:
        config = LlamaConfig.load(config_path)
    except (OSError, ValueError, TypeError) as error:
        fail(f"cannot read {config_path}: {error}")
    for name, value in parse_expect(args.expect).items():
        if getattr(config, name, None) != value:
            fail(f"{config_path} has {name} = {getattr(config, name, None)} but the plan has "
                 f"{value}: not the model the plan was compiled from")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = load_model(args.model_dir).to(dtype)
    timer = DecodeTimer(torch, model, dtype, args.seed)
    say({"ready": True, "torch": torch.__version__, "dtype": str(dtype).replace("torch.", ""),
         "threads": torch.get_num_threads(), "parameters": config.parameter_count(),
         "kv_cache": "past key/values grown by torch.cat each step, random values"})

    if args.serve:
        for line in sys.stdin:
            fields = line.split()
            if not fields:
                continue
            try:
                context, batch, gen = (int(f) for f in fields)
            except ValueError:
                say({"error": f"expected 'CONTEXT BATCH GEN', got {line.strip()!r}"})
                continue
            try:
                say(timer.point(context, batch, gen))
            except (RuntimeError, MemoryError) as error:
                say({"context": context, "batch": batch, "gen": gen, "error": str(error)})
        return
    for batch in sorted(set(args.batches)):
        for context in sorted(set(args.contexts)):
            say(timer.point(context, batch, args.gen))


if __name__ == "__main__":
    main()
