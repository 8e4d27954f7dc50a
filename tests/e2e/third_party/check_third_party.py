#!/usr/bin/python3
"""hetc on an ONNX file this repository did not write (tests/e2e/third_party/, provenance in its
README), against ONNX Runtime on the same file.

    /usr/bin/python3 tests/e2e/third_party/check_third_party.py --hetc BUILD/bin/hetc \\
        --node /usr/bin/node --workdir DIR --model FILE.onnx [--tokenizer DIR] [--tol T]
        [--near-tie GAP] [--max-new N] [--text PROMPT] [--expect-refusal TEXT]
        [--make-weights SCRIPT]

1. ONNX Runtime (tests/e2e/ort/greedy.mjs) decodes the prompts greedily, each alone;
2. hetc compile FILE --weights f32 --max-batch 4 --max-seq 128 (with --tokenizer, packing it), then
   hetc run of the prompts as one ragged batch with --logits-out;
3. compare.py: identical tokens, logits within --tol (a float16 file: a token may differ only
   where ONNX Runtime's own top-2 gap is within --near-tie);
4. with --text, hetc run --prompt TEXT must print text (the packed tokenizer round trip).
With --expect-refusal, hetc compile must instead exit 1 with one error line containing TEXT.
With --search-decoder, FILE is ONNX Runtime's GreedySearch, BeamSearch or Sampling around a
decoder (its convert_generation tool's form): ONNX Runtime's greedy.mjs runs that decoder graph,
written out as a model of its own (init_decoder where there is one, else decoder, with the outer
graph's initializers it reads), while hetc compiles FILE itself; and with --search-ids, ONNX
Runtime's search operator on FILE (tests/e2e/ort/search.mjs, one beam) must pick hetc's ids, up to
the file's eos_token_id.
With --make-weights, the model is copied into the work directory and SCRIPT --model COPY writes its
weights there first: its external data (a file whose weights the public snapshot lacks; see the
README), or perturb_weights.py's distinct values in place of a file's trivial ones.
"""

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "exports"))
from e2e_common import PROMPTS, CheckFailed, check_hetc_binary, main_wrapper, run  # noqa: E402
from check_hetc import compile_command, prompt_flags, run_plan  # noqa: E402

COMPARE = os.path.join(os.path.dirname(HERE), "exports", "compare.py")
ORT_GREEDY = os.path.join(os.path.dirname(HERE), "ort", "greedy.mjs")
ORT_SEARCH = os.path.join(os.path.dirname(HERE), "ort", "search.mjs")


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    plan = os.path.join(a.workdir, "model.hplan")
    if os.path.exists(plan):
        os.remove(plan)
    name = os.path.basename(os.path.dirname(a.model))
    if a.make_weights:
        copy = os.path.join(a.workdir, os.path.basename(a.model))
        shutil.copyfile(a.model, copy)
        run([sys.executable, a.make_weights, "--model", copy], os.path.basename(a.make_weights))
        a.model = copy
    cmd = compile_command(a.hetc, a.model, plan)
    if a.tokenizer:
        cmd += ["--tokenizer", a.tokenizer]
    if a.expect_refusal:
        proc = run(cmd, "hetc compile", expect_success=False)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        if proc.returncode != 1 or len(lines) != 1 or a.expect_refusal not in lines[0]:
            raise CheckFailed(f"hetc compile exited {proc.returncode}; expected 1 and one line "
                              f"containing {a.expect_refusal!r}:\n{proc.stderr}")
        print(f"PASS: {name} refused with: {lines[0]}")
        return
    run(cmd, "hetc compile")
    ort_model = a.model
    if a.search_decoder:
        ort_model = os.path.join(a.workdir, "decoder.onnx")
        eos = lift_search_decoder(a.model, ort_model)
    ort_json = os.path.join(a.workdir, "ort.json")
    run([a.node, ORT_GREEDY, "--model", ort_model, *prompt_flags(), "--max-new", str(a.max_new),
         "--out", ort_json], "ONNX Runtime (greedy.mjs)")
    hetc_json = os.path.join(a.workdir, "hetc.json")
    run_plan(a.hetc, plan, a.max_new, a.workdir, hetc_json)
    if a.search_ids:
        check_search_ids(a, hetc_json, eos)
    proc = run([sys.executable, COMPARE, ort_json, hetc_json, "--tol", str(a.tol), "--near-tie",
                str(a.near_tie)], "compare.py", expect_success=False)
    print(proc.stdout.strip())
    if proc.returncode != 0:
        raise CheckFailed(f"hetc differs from ONNX Runtime:\n{proc.stdout}{proc.stderr}")
    if a.text:
        out = run([a.hetc, "run", plan, "--prompt", a.text, "--max-new", "8"], "hetc run --prompt")
        if not out.stdout.strip():
            raise CheckFailed("hetc run --prompt printed no text")
        print(f"PASS: --prompt {a.text!r} -> {out.stdout.strip()!r}")
    print(f"PASS: {name}: {len(PROMPTS)} sequences x "
          f"{a.max_new} tokens as ONNX Runtime gives them")


def lift_search_decoder(model, out):
    """Writes the decoder graph of ONNX Runtime's search operator in `model` to `out` as a model
    of its own; returns the operator's eos_token_id (None where it has none)."""
    import onnx
    m = onnx.load(model)
    if len(m.graph.node) != 1 or m.graph.node[0].op_type not in ("GreedySearch", "BeamSearch",
                                                                 "Sampling"):
        raise CheckFailed(f"{model} is not one search operator around a decoder")
    search = m.graph.node[0]
    graphs = {a.name: a.g for a in search.attribute if a.type == onnx.AttributeProto.GRAPH}
    eos = next((a.i for a in search.attribute if a.name == "eos_token_id"), None)
    decoder = graphs.get("init_decoder") or graphs["decoder"]
    read = {name for node in decoder.node for name in node.input}
    own = {t.name for t in decoder.initializer}
    decoder.initializer.extend(t for t in m.graph.initializer if t.name in read and t.name not in own)
    opsets = list(m.opset_import)
    if not any(o.domain == "com.microsoft" for o in opsets):
        opsets.append(onnx.helper.make_opsetid("com.microsoft", 1))
    lifted = onnx.helper.make_model(decoder, opset_imports=opsets)
    lifted.ir_version = m.ir_version
    onnx.save(lifted, out)
    return eos


def check_search_ids(a, hetc_json, eos):
    """ONNX Runtime's search operator on the file picks hetc's ids, up to its end of sequence."""
    search_json = os.path.join(a.workdir, "ort_search.json")
    run([a.node, ORT_SEARCH, "--model", a.model, *prompt_flags(), "--max-new", str(a.max_new),
         "--out", search_json], "ONNX Runtime's search operator (search.mjs)")
    with open(search_json) as f:
        searched = json.load(f)["sequences"]
    with open(hetc_json) as f:
        ours = json.load(f)["tokens"]
    for i, (theirs, mine) in enumerate(zip(searched, ours)):
        if eos is not None and eos in theirs:
            theirs = theirs[:theirs.index(eos) + 1]
        if mine[:len(theirs)] != theirs:
            raise CheckFailed(f"prompt {i}: ONNX Runtime's search picks {theirs}, hetc {mine}")
        print(f"prompt {i}: ONNX Runtime's search operator picks hetc's {len(theirs)} ids")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hetc", required=True)
    p.add_argument("--node", required=True, help="Node.js that runs tests/e2e/ort/greedy.mjs")
    p.add_argument("--workdir", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tokenizer")
    p.add_argument("--max-new", type=int, default=16)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--near-tie", type=float, default=0.0)
    p.add_argument("--text")
    p.add_argument("--expect-refusal", metavar="TEXT")
    p.add_argument("--make-weights", metavar="SCRIPT")
    p.add_argument("--search-decoder", action="store_true")
    p.add_argument("--search-ids", action="store_true")
    return main_wrapper(lambda: check(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
