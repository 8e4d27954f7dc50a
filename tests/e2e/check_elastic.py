#!/usr/bin/python3
"""Elastic batching end to end: sequences that join and leave a running batch against PyTorch.

    /usr/bin/python3 tests/e2e/check_elastic.py --hetc BUILD/bin/hetc --preset tiny --workdir DIR

1. exports the preset (seed 0) and compiles a float32 plan with 2 slots and 8 tokens per step
   (--max-batch 2 --max-seq 64 --max-step-tokens 8 --weights f32);
2. hetc run --prompt-ids P_i --arrive-at-step S_i (five prompts, more than the slots) --max-new N
   --logits-out --verbose: the schedule has a sequence prefill in a step where another decodes,
   sequences wait for a slot, slots taken again after their sequence left, and an idle gap;
   the --verbose lines must show all of that, or the schedule tests nothing;
3. models/reference.py runs each prompt alone, greedy; hetc's ids must be identical and every
   logits row within the float32 tolerance of check_against_torch.py (1e-4 of max |torch row|).
"""

import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_against_torch import compare, parse_token_lines  # noqa: E402
from e2e_common import (PROMPTS, CheckFailed, check_hetc_binary, export, indent,  # noqa: E402
                        main_wrapper, prompt_arg, reference, run)

# PROMPTS plus two; prompt i arrives at ARRIVALS[i]. With 2 slots and 8 new ids each: prompt 1
# prefills beside prompt 0's decodes, prompts 2 and 3 wait for those slots, prompt 4 comes after
# the batch has gone idle.
SCHEDULE_PROMPTS = PROMPTS + [[9, 8, 7, 6], [33]]
ARRIVALS = [0, 2, 3, 4, 60]
MAX_NEW = 8
SEQUENCE_LINE = re.compile(r"hetc: sequence (\d+): slot (\d+), arrived at step (\d+), "
                           r"joined at step (\d+), finished at step (\d+)")
STEPS_LINE = re.compile(r"hetc: (\d+) steps \((\d+) with prefill and decode together\)")


def check_schedule(stderr):
    """The --verbose lines of the run: every sequence's slot and steps, and the batch's steps."""
    sequences = {}
    for m in SEQUENCE_LINE.finditer(stderr):
        sequences[int(m.group(1))] = tuple(int(g) for g in m.groups()[1:])
    steps = STEPS_LINE.search(stderr)
    if len(sequences) != len(SCHEDULE_PROMPTS) or not steps:
        raise CheckFailed(f"hetc run --verbose did not describe the schedule:\n{indent(stderr)}")
    for i, (slot, arrived, joined, finished) in sorted(sequences.items()):
        print(f"sequence {i}: slot {slot}, arrived {arrived}, joined {joined}, finished {finished}")
        if arrived != ARRIVALS[i] or joined < arrived or finished < joined:
            raise CheckFailed(f"sequence {i}: inconsistent steps (arrived {arrived}, joined {joined}, "
                              f"finished {finished}; --arrive-at-step {ARRIVALS[i]})")
    slots = [s[0] for s in sequences.values()]
    waited = [i for i, s in sequences.items() if s[2] > s[1]]
    mixed = int(steps.group(2))
    print(f"{steps.group(1)} steps, {mixed} with prefill and decode together; waited: {waited}")
    if mixed == 0:
        raise CheckFailed("no step held one sequence's prompt beside another's decode")
    if not waited:
        raise CheckFailed("no sequence waited for a slot")
    if len(set(slots)) == len(slots):
        raise CheckFailed("no slot was taken again after its sequence left")


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = export(a.preset, a.workdir, seed=0)
    plan = os.path.join(a.workdir, "model.hplan")
    run([a.hetc, "compile", onnx_path, "--target", "host", "--max-batch", "2", "--max-seq", "64",
         "--max-step-tokens", "8", "--weights", "f32", "-o", plan], "hetc compile")

    logits_path = os.path.join(a.workdir, "hetc_logits.npy")
    if os.path.exists(logits_path):
        os.remove(logits_path)
    cmd = [a.hetc, "run", plan, "--max-new", str(MAX_NEW), "--logits-out", logits_path, "--verbose"]
    for prompt, step in zip(SCHEDULE_PROMPTS, ARRIVALS):
        cmd += ["--prompt-ids", prompt_arg(prompt), "--arrive-at-step", str(step)]
    proc = run(cmd, "hetc run --arrive-at-step", timeout=a.timeout)
    check_schedule(proc.stderr)
    hetc_tokens = parse_token_lines(proc.stdout, "hetc run output", len(SCHEDULE_PROMPTS), MAX_NEW)
    try:
        hetc_logits = np.load(logits_path)
    except Exception as e:  # a missing or malformed .npy is a failure of the run
        raise CheckFailed(f"cannot read {logits_path}: {e}")

    tokens_txt, torch_logits_path = reference(a.workdir, SCHEDULE_PROMPTS, MAX_NEW,
                                              os.path.join(a.workdir, "torch"))
    with open(tokens_txt) as f:
        torch_tokens = parse_token_lines(f.read(), "torch tokens.txt", len(SCHEDULE_PROMPTS), MAX_NEW)
    torch_logits = np.load(torch_logits_path)
    err = compare(torch_tokens, torch_logits, hetc_tokens, hetc_logits, a.tolerance)
    print(f"PASS: preset {a.preset}: {len(SCHEDULE_PROMPTS)} sequences joining and leaving 2 slots, "
          f"{MAX_NEW} ids each identical to PyTorch run alone, worst logits error {err:.3e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True, help="path to the hetc binary")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--workdir", required=True)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--timeout", type=int, default=600, help="seconds allowed for each hetc command")
    a = p.parse_args(argv)
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
