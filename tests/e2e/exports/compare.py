#!/usr/bin/python3
"""Compares two greedy-decoding results in the JSON layout of common.py / greedy.mjs.

    /usr/bin/python3 tests/e2e/exports/compare.py REFERENCE.json CANDIDATE.json [--tol 1e-4]
                                                   [--near-tie GAP] [--json]

Tokens must be equal token for token for every prompt. Logits are compared at the steps up to and
including the first token that differs (later rows were computed from different histories). Prints
the max |logit difference| overall and per prompt, also relative to the largest |logit|; exits 1
when tokens differ or the max difference exceeds --tol.

With --near-tie GAP (float16 exports), a token may differ at a step where the reference's own
top-2 logits are within GAP of each other (its float16 rounding decided the pick): that step is
reported as a near tie and the prompt's comparison ends there, passing. Any other difference
fails.
"""

import argparse
import json
import sys

import numpy as np


def load(path):
    with open(path) as f:
        doc = json.load(f)
    for key in ("prompts", "max_new", "tokens", "logits"):
        if key not in doc:
            raise ValueError(f"{path}: no {key!r} field")
    return doc


def top2_gap(row):
    row = np.asarray(row, dtype=np.float64)
    top = np.sort(row[np.isfinite(row)])[-2:]
    return float(top[1] - top[0]) if top.size == 2 else float("inf")


def compare(ref, cand, near_tie=0.0):
    if ref["prompts"] != cand["prompts"]:
        raise ValueError(f"different prompts: {ref['prompts']} vs {cand['prompts']}")
    if ref["max_new"] != cand["max_new"]:
        raise ValueError(f"different max_new: {ref['max_new']} vs {cand['max_new']}")
    for doc, what in ((ref, "reference"), (cand, "candidate")):
        if len(doc["tokens"]) != len(doc["prompts"]) or len(doc["logits"]) != len(doc["prompts"]):
            raise ValueError(f"the {what} has {len(doc['tokens'])} token lists and "
                             f"{len(doc['logits'])} logits lists for {len(doc['prompts'])} prompts")
        for i, tokens in enumerate(doc["tokens"]):
            if len(tokens) != doc["max_new"] or len(doc["logits"][i]) != doc["max_new"]:
                raise ValueError(f"the {what}'s prompt {i} has {len(tokens)} tokens and "
                                 f"{len(doc['logits'][i])} logits rows, expected {doc['max_new']}")
    per_prompt = []
    for i, (rt, ct, rl, cl) in enumerate(zip(ref["tokens"], cand["tokens"], ref["logits"], cand["logits"])):
        rl = np.asarray(rl, dtype=np.float32)
        cl = np.asarray(cl, dtype=np.float32)
        if rl.shape != cl.shape:
            raise ValueError(f"prompt {i}: logits of shape {rl.shape} vs {cl.shape}")
        first_diff = next((t for t, (a, b) in enumerate(zip(rt, ct)) if a != b), None)
        gap = top2_gap(rl[first_diff]) if first_diff is not None else None
        tie = first_diff is not None and gap <= near_tie
        upto = len(rt) if first_diff is None else first_diff + 1
        diff = np.abs(rl[:upto].astype(np.float64) - cl[:upto].astype(np.float64))
        scale = float(np.max(np.abs(rl[:upto])))
        per_prompt.append({
            "prompt": i,
            "tokens_equal": first_diff is None or tie,
            "first_diff_step": first_diff,
            "near_tie_gap": gap if tie else None,
            "max_abs_diff": float(np.nanmax(diff)) if np.all(np.isfinite(diff)) else float("nan"),
            "max_abs_logit": scale,
        })
    worst = max((p["max_abs_diff"] for p in per_prompt), key=lambda v: (np.isnan(v), v))
    scale = max(p["max_abs_logit"] for p in per_prompt)
    return {
        "tokens_equal": all(p["tokens_equal"] for p in per_prompt),
        "max_abs_diff": worst,
        "max_rel_diff": worst / scale if scale else worst,
        "prompts": per_prompt,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference")
    p.add_argument("candidate")
    p.add_argument("--tol", type=float, default=1e-4, help="max |logit difference| allowed")
    p.add_argument("--near-tie", type=float, default=0.0, metavar="GAP",
                   help="a differing token is a near tie where the reference's top-2 gap <= GAP")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    a = p.parse_args(argv)
    try:
        result = compare(load(a.reference), load(a.candidate), a.near_tie)
    except (OSError, ValueError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    ok = result["tokens_equal"] and result["max_abs_diff"] <= a.tol
    if a.json:
        print(json.dumps(result))
    else:
        for pp in result["prompts"]:
            if pp["near_tie_gap"] is not None:
                state = (f"near tie at step {pp['first_diff_step']} (the reference's top-2 gap "
                         f"{pp['near_tie_gap']:.3g} <= {a.near_tie:g}), tokens equal before it")
            elif pp["tokens_equal"]:
                state = "tokens equal"
            else:
                state = f"tokens differ from step {pp['first_diff_step']}"
            print(f"prompt {pp['prompt']}: {state}; max |dlogit| {pp['max_abs_diff']:.3g} "
                  f"(max |logit| {pp['max_abs_logit']:.3g})")
        print(f"{'PASS' if ok else 'FAIL'}: tokens {'equal' if result['tokens_equal'] else 'DIFFER'}, "
              f"max |dlogit| {result['max_abs_diff']:.3g} (relative {result['max_rel_diff']:.3g}), "
              f"tolerance {a.tol:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
