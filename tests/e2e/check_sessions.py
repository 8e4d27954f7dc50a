#!/usr/bin/python3
"""Sessions end to end: a dialogue of several hetc runs sharing one --session file against
PyTorch, and bad session files refused.

    /usr/bin/python3 tests/e2e/check_sessions.py --hetc BUILD/bin/hetc --preset tiny \\
        --other-preset odd --workdir DIR

1. exports the preset and the other preset (seed 0) and compiles float32 plans of both
   (--max-batch 2 --max-seq 128 --weights f32), and one of the preset with --max-seq 16;
2. three rounds of hetc run PLAN --session FILE --prompt-ids R_r --max-new N --logits-out
   --verbose. Round r must give PyTorch's greedy continuation of the whole history (every
   earlier prompt and generated id, then R_r; models/reference.py's greedy() on that prompt):
   identical ids, logits within 1e-4 of max |torch row|. --verbose must show that only the ids
   the cache does not hold were prefilled (R_r, plus the last id generated in round r-1), and
   hetc session show FILE the whole history;
3. each bad file below makes hetc run exit 1 with one line "hetc: error: ..." naming the
   problem, and leaves the file as it was:
     the session cut to half                              truncated
     its magic flipped                                    not a hetc session file
     a byte of its KV cache flipped                       checksum
     a session of the other model                         another model
     the session with a plan of --max-seq 16              --max-seq
   and --session with two --prompt-ids is refused the same way.
"""

import argparse
import os
import re
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_against_torch import compare, parse_token_lines  # noqa: E402
from e2e_common import (MODELS, CheckFailed, check_hetc_binary, describe, export, indent,  # noqa: E402
                        main_wrapper, prompt_arg, run)

sys.path.insert(0, MODELS)
import torch  # noqa: E402
from llama import load_model  # noqa: E402
from reference import greedy  # noqa: E402

ROUNDS = [[5, 17, 42, 7, 99, 3], [1, 2], [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210]]
MAX_NEW = 8
SHORT_MAX_SEQ = 16
PREFILLED = re.compile(r"(\d+) prompt ids prefilled")
SHOW_IDS = re.compile(r"^\s*ids:(.*)$", re.M)
SHOW_POSITIONS = re.compile(r"KV cache: (\d+) positions")


def compile_plan(a, onnx_path, plan, max_seq):
    run([a.hetc, "compile", onnx_path, "--target", "host", "--max-batch", "2", "--max-seq",
         str(max_seq), "--weights", "f32", "-o", plan], "hetc compile", timeout=a.timeout)


def session_round(a, plan, session, prompt, logits_path):
    """One hetc run --session; returns its ids, logits and how many ids it prefilled."""
    if os.path.exists(logits_path):
        os.remove(logits_path)
    proc = run([a.hetc, "run", plan, "--session", session, "--prompt-ids", prompt_arg(prompt),
                "--max-new", str(MAX_NEW), "--logits-out", logits_path, "--verbose"],
               "hetc run --session", timeout=a.timeout)
    tokens = parse_token_lines(proc.stdout, "hetc run --session output", 1, MAX_NEW)
    prefilled = PREFILLED.search(proc.stderr)
    if not prefilled:
        raise CheckFailed(f"hetc run --verbose does not say how many ids it prefilled:\n"
                          f"{indent(proc.stderr)}")
    try:
        logits = np.load(logits_path)
    except Exception as e:  # a missing or malformed .npy is a failure of the run
        raise CheckFailed(f"cannot read {logits_path}: {e}")
    return tokens, logits, int(prefilled.group(1))


def check_dialogue(a, model_dir, plan, session):
    """Three rounds against PyTorch on the whole history; returns the history."""
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    model = load_model(model_dir)
    history = []
    for r, prompt in enumerate(ROUNDS):
        tokens, logits, prefilled = session_round(a, plan, session, prompt,
                                                  os.path.join(a.workdir, f"round{r}_logits.npy"))
        want_tokens, want_logits = greedy(model, history + prompt, MAX_NEW)
        err = compare([want_tokens], want_logits[None], tokens, logits, a.tolerance)
        # Round 0 prefills its prompt; later rounds the last id of the round before (generated,
        # never fed) and their prompt, nothing of the history before.
        expected = len(prompt) + (1 if r > 0 else 0)
        print(f"round {r}: history {len(history)} ids + prompt {len(prompt)}: prefilled {prefilled} "
              f"ids (expected {expected}), identical ids, worst logits error {err:.3e}")
        if prefilled != expected:
            raise CheckFailed(f"round {r} prefilled {prefilled} ids; {expected} are not in the "
                              f"session's cache (the history was recomputed?)")
        history += prompt + tokens[0]

    proc = run([a.hetc, "session", "show", session], "hetc session show")
    ids = SHOW_IDS.search(proc.stdout)
    positions = SHOW_POSITIONS.search(proc.stdout)
    if not ids or not positions:
        raise CheckFailed(f"hetc session show printed no ids or positions:\n{indent(proc.stdout)}")
    if [int(t) for t in ids.group(1).split()] != history:
        raise CheckFailed(f"hetc session show: ids {ids.group(1).strip()}, expected "
                          f"{' '.join(map(str, history))}")
    if int(positions.group(1)) != len(history) - 1:
        raise CheckFailed(f"hetc session show: {positions.group(1)} positions, expected "
                          f"{len(history) - 1} (every id but the last generated)")
    return history


def expect_one_line_error(name, cmd, words, session=None):
    """hetc exits 1 with one line "hetc: error: ..." mentioning one of `words`, and leaves the
    session file (when given) as it was."""
    before = open(session, "rb").read() if session else None
    proc = run(cmd, name, timeout=120, expect_success=False)
    lines = proc.stderr.splitlines()
    if proc.returncode != 1 or len(lines) != 1 or not lines[0].startswith("hetc: error: "):
        raise CheckFailed(f"{name}: exit code {proc.returncode}, expected 1 with one line "
                          f"'hetc: error: ...'\n  command: {describe(cmd)}\n  stderr:\n"
                          f"{indent(proc.stderr)}")
    if not any(w in lines[0] for w in words):
        raise CheckFailed(f"{name}: the message does not mention {' or '.join(map(repr, words))}: "
                          f"{lines[0]}")
    if proc.stdout:
        raise CheckFailed(f"{name}: printed ids although it failed:\n{indent(proc.stdout)}")
    if session and open(session, "rb").read() != before:
        raise CheckFailed(f"{name}: the failed run changed {session}")
    print(f"ok   {name}: {lines[0]}")


def bad_copy(session, path, change):
    data = bytearray(open(session, "rb").read())
    data = change(data)
    with open(path, "wb") as f:
        f.write(data)
    return path


def flip(data, where):
    data[where] ^= 0x01
    return data


def check_bad_files(a, plan, short_plan, session, other_session):
    def run_cmd(plan_path, session_path):
        return [a.hetc, "run", plan_path, "--session", session_path, "--prompt-ids", "4,5",
                "--max-new", "2"]

    cut = bad_copy(session, os.path.join(a.workdir, "cut.session"), lambda d: d[:len(d) // 2])
    expect_one_line_error("truncated session", run_cmd(plan, cut), ["truncated"], cut)
    magic = bad_copy(session, os.path.join(a.workdir, "magic.session"), lambda d: flip(d, 0))
    expect_one_line_error("flipped magic", run_cmd(plan, magic), ["not a hetc session file"], magic)
    kv = bad_copy(session, os.path.join(a.workdir, "kv.session"), lambda d: flip(d, len(d) - 3))
    expect_one_line_error("flipped KV byte", run_cmd(plan, kv), ["checksum"], kv)
    expect_one_line_error("another model's session", run_cmd(plan, other_session),
                          ["another model"], other_session)
    expect_one_line_error(f"session longer than --max-seq {SHORT_MAX_SEQ}",
                          run_cmd(short_plan, session), [f"--max-seq is {SHORT_MAX_SEQ}"], session)
    expect_one_line_error("--session with two prompts",
                          [a.hetc, "run", plan, "--session", session, "--prompt-ids", "1",
                           "--prompt-ids", "2"], ["one --prompt-ids"], session)


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    model_dir = os.path.join(a.workdir, a.preset)
    other_dir = os.path.join(a.workdir, "other-" + a.other_preset)
    onnx_path = export(a.preset, model_dir, seed=0)
    other_onnx = export(a.other_preset, other_dir, seed=0)
    plan = os.path.join(a.workdir, "model.hplan")
    short_plan = os.path.join(a.workdir, "short.hplan")
    other_plan = os.path.join(a.workdir, "other.hplan")
    compile_plan(a, onnx_path, plan, 128)
    compile_plan(a, onnx_path, short_plan, SHORT_MAX_SEQ)
    compile_plan(a, other_onnx, other_plan, 128)

    session = os.path.join(a.workdir, "dialogue.session")
    other_session = os.path.join(a.workdir, "other.session")
    for path in (session, other_session):
        if os.path.exists(path):
            os.remove(path)
    history = check_dialogue(a, model_dir, plan, session)
    session_round(a, other_plan, other_session, ROUNDS[0], os.path.join(a.workdir, "other.npy"))
    leftovers = [f for f in os.listdir(a.workdir) if ".session.tmp" in f]
    if leftovers:
        raise CheckFailed(f"temporary files left next to the sessions: {leftovers}")
    check_bad_files(a, plan, short_plan, session, other_session)
    print(f"PASS: preset {a.preset}: a {len(ROUNDS)}-round dialogue through one session file "
          f"({len(history)} ids) equals PyTorch on the whole history without recomputing it; "
          f"bad session files refused")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True, help="path to the hetc binary")
    p.add_argument("--preset", default="tiny")
    p.add_argument("--other-preset", default="odd", help="the model whose session must be refused")
    p.add_argument("--workdir", required=True)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--timeout", type=int, default=600, help="seconds allowed for each hetc command")
    a = p.parse_args(argv)
    if a.preset == a.other_preset:
        p.error("--other-preset must differ from --preset")
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
