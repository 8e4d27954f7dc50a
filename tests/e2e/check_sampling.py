#!/usr/bin/python3
"""Sampling and stop strings through hetc run, end to end.

    /usr/bin/python3 tests/e2e/check_sampling.py --hetc BUILD/bin/hetc --workdir DIR

1. the tiny preset with check_text.py's byte-level tokenizer packed;
2. --temperature with --seed: the same seed repeats the ids, another seed draws others, a
   sequence draws the same beside another prompt as alone, --top-k 1 is greedy, and without
   --seed the seed printed on stderr repeats the run;
3. --stop TEXT on a text prompt: the printed text is the greedy text cut right before the stop
   string, which spans a token boundary; with --prompt-ids the ids end with the one that
   completed it;
4. refusals, one line each: parameters out of range, --stop on a plan without a tokenizer.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_text import expect_refusal, hetc_bytes, write_tokenizer  # noqa: E402
from e2e_common import CheckFailed, check_hetc_binary, check_main, export, run  # noqa: E402

MAX_NEW = 16
PROMPT = "Hello, the world!"


def ids_of(a, args, what):
    return [[int(x) for x in line.split()]
            for line in run([a.hetc, "run", *args], what).stdout.splitlines()]


def check_sampling(a, plan):
    ids = run([a.hetc, "tokenize", plan, "--text", PROMPT], "hetc tokenize").stdout.strip()
    base = ["--prompt-ids", ids, "--max-new", str(MAX_NEW)]
    sample = ["--temperature", "1.3", "--top-p", "0.95", "--repetition-penalty", "1.1"]
    greedy = ids_of(a, [plan, *base], "greedy")
    first = ids_of(a, [plan, *base, *sample, "--seed", "5"], "seed 5")
    if ids_of(a, [plan, *base, *sample, "--seed", "5"], "seed 5 again") != first:
        raise CheckFailed("the same --seed gave other ids")
    if ids_of(a, [plan, *base, *sample, "--seed", "6"], "seed 6") == first:
        raise CheckFailed("--seed 5 and --seed 6 gave the same ids")
    if first == greedy:
        raise CheckFailed(f"--temperature 1.3 gave the greedy ids {greedy}")
    both = ids_of(a, [plan, "--prompt-ids", "7,8,9", *base, *sample, "--seed", "5"], "a batch")
    if both[1] != first[0]:
        raise CheckFailed(f"beside another prompt the sequence drew {both[1]}, alone {first[0]}")
    if ids_of(a, [plan, *base, "--temperature", "0.7", "--top-k", "1", "--seed", "9"],
              "top-k 1") != greedy:
        raise CheckFailed("--top-k 1 is not greedy")
    proc = run([a.hetc, "run", plan, *base, *sample], "no seed")
    found = re.search(r"hetc: sampling with --seed (\d+)", proc.stderr)
    if not found:
        raise CheckFailed(f"without --seed, no seed on stderr:\n{proc.stderr}")
    again = run([a.hetc, "run", plan, *base, *sample, "--seed", found.group(1)], "printed seed")
    if again.stdout != proc.stdout:
        raise CheckFailed("the seed printed on stderr does not repeat the run")
    print(f"sampling: seeds repeat and differ, batch independent, top-k 1 greedy: {first[0]}")


def check_stop(a, plan):
    ids = run([a.hetc, "tokenize", plan, "--text", PROMPT], "hetc tokenize").stdout.strip()
    generated = ids_of(a, [plan, "--prompt-ids", ids, "--max-new", str(MAX_NEW)], "greedy")[0]
    code, out, err = hetc_bytes(a, ["run", plan, "--prompt", PROMPT, "--max-new", str(MAX_NEW)])
    full = out.decode("utf-8")[:-1]
    # Token boundaries in the text: where the text of each prefix of the ids ends.
    boundaries = []
    for n in range(1, len(generated)):
        prefix = run([a.hetc, "tokenize", plan, "--ids", ",".join(map(str, generated[:n]))],
                     "tokenize --ids").stdout[:-1]
        if full.startswith(prefix) and 2 <= len(prefix) <= len(full) - 2:
            boundaries.append((len(prefix), n))
    # A stop string of two characters each side of a boundary, printable, near the middle.
    boundaries.sort(key=lambda boundary: abs(boundary[0] - len(full) // 2))
    for end, n in boundaries:
        stop = full[end - 2:end + 2]
        if full.find(stop) == end - 2 and stop.isprintable() and "\ufffd" not in stop:
            break
    else:
        print(f"skipped the stop string check: no usable token boundary in {full!r}")
        return
    code, out, err = hetc_bytes(a, ["run", plan, "--prompt", PROMPT, "--max-new", str(MAX_NEW),
                                    "--stop", stop, "--stop", "never printed"])
    if code != 0 or out.decode("utf-8") != full[:end - 2] + "\n":
        raise CheckFailed(f"--stop {stop!r}: printed {out!r}, expected {full[:end - 2]!r}\n{err}")
    # With ids: they end with the one whose text completed the stop string.
    stopped = ids_of(a, [plan, "--prompt-ids", ids, "--max-new", str(MAX_NEW), "--stop", stop],
                     "--stop with --prompt-ids")[0]
    if stopped != generated[:len(stopped)] or not n < len(stopped) <= len(generated):
        raise CheckFailed(f"--stop {stop!r} with --prompt-ids gave {stopped}, greedy {generated}")
    print(f"--stop {stop!r} across ids {n - 1} and {n}: {full[:end - 2]!r} of {full!r}")


def check(a):
    check_hetc_binary(a.hetc)
    model_dir = os.path.join(a.workdir, "tiny")
    onnx = export("tiny", model_dir)
    compile_args = ["--target", "host", "--max-batch", "2", "--max-seq", "128", "--weights", "f32"]
    plan_ids = os.path.join(a.workdir, "ids.hplan")
    for name in ("tokenizer.json", "generation_config.json"):
        if os.path.exists(os.path.join(model_dir, name)):
            os.remove(os.path.join(model_dir, name))
    run([a.hetc, "compile", onnx, *compile_args, "-o", plan_ids], "hetc compile without tokenizer")
    write_tokenizer(model_dir)
    plan = os.path.join(a.workdir, "text.hplan")
    run([a.hetc, "compile", onnx, *compile_args, "-o", plan], "hetc compile with tokenizer")

    check_sampling(a, plan)
    check_stop(a, plan)
    expect_refusal(a, ["run", plan, "--prompt-ids", "1,2", "--top-p", "1.5"],
                   "--top-p 1.5: must be in (0, 1]")
    expect_refusal(a, ["run", plan, "--prompt-ids", "1,2", "--temperature", "-1"],
                   "--temperature -1: must be >= 0")
    expect_refusal(a, ["run", plan, "--prompt-ids", "1,2", "--min-p", "2"],
                   "--min-p 2: must be in [0, 1]")
    expect_refusal(a, ["run", plan, "--prompt-ids", "1,2", "--stop", ""], "--stop")
    expect_refusal(a, ["run", plan_ids, "--prompt-ids", "1,2", "--stop", "x"], "packs no tokenizer")
    print("PASS")


def main():
    return check_main(check)


if __name__ == "__main__":
    sys.exit(main())
