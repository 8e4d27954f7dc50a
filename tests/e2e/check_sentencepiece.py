#!/usr/bin/python3
"""SentencePiece tokenizer.model files through hetc compile --tokenizer, end to end.

    /usr/bin/python3 tests/e2e/check_sentencepiece.py --hetc BUILD/bin/hetc --workdir DIR

1. trains two models with Debian's spm_train on a small multilingual corpus: BPE with byte
   fallback and identity normalization (Llama 2's kind) and Unigram with identity normalization;
2. exports the tiny preset with a vocabulary of 1000 and compiles it with --tokenizer x.model:
   hetc says it packs sentencepiece:x.model, and hetc tokenize --text gives BOS then exactly the
   ids spm_encode --output_format=id gives, for texts of many scripts, emoji, digits, runs of
   spaces and characters the corpus never had; hetc tokenize --ids gives the text back;
3. finds tokenizer.model in a --tokenizer DIR and beside the model (no --tokenizer), prefers
   tokenizer.json when both are there (and says so), and follows tokenizer_config.json's
   add_bos_token false;
4. refuses, in one line each: a malformed .model, a truncated one, and a model trained with
   spm_train's default normalization (nmt_nfkc, a character map), naming the normalizer.
"""

import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import CheckFailed, check_hetc_binary, check_main, run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ελληνικά: η γρήγορη καφέ αλεπού πηδάει.",
    "日本語のテキストです。東京は大きい都市です。",
    "中文文本测试，你好世界。",
    "한국어 텍스트를 시험합니다.",
    "العربية نص تجريبي للاختبار",
    "हिन्दी पाठ का परीक्षण",
    "Numbers: 12345 67890 3.14159 100%",
    "Emoji 😀 🎉 👍 are fun",
    "def square(x):    return x * x  # code",
    "for (int i = 0; i < n; ++i) { total += values[i]; }",
    "Runs   of    spaces     here",
]
TEXTS = [
    "Hello, the world!",
    "  two leading spaces and a run   of three",
    "Straße Łódź 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🦀🧬 Ꙭ",  # characters the corpus never had
    "mixed 日本 and Русский in one line 2024",
    "code: std::vector<int> v{1, 2, 3};",
]
VOCAB = 1000


def train(workdir, name, flags):
    corpus = os.path.join(workdir, "corpus.txt")
    if not os.path.exists(corpus):
        # The sentences, then lines of their words in a seeded random order.
        words = [w for s in SENTENCES for w in s.split()]
        rng = random.Random(7)
        with open(corpus, "w", encoding="utf-8") as f:
            for sentence in SENTENCES:
                f.write(sentence + "\n")
            for _ in range(3000):
                f.write(" ".join(rng.choice(words) for _ in range(rng.randint(3, 10))) + "\n")
    prefix = os.path.join(workdir, name)
    run(["spm_train", f"--input={corpus}", f"--model_prefix={prefix}", "--num_threads=1",
         "--minloglevel=2", *flags], f"spm_train {name}")
    return prefix + ".model"


def spm_ids(model, text):
    proc = subprocess.run(["spm_encode", f"--model={model}", "--output_format=id"],
                          input=text + "\n", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=60)
    if proc.returncode != 0:
        raise CheckFailed(f"spm_encode {model}: exit {proc.returncode}\n{proc.stderr}")
    return [int(x) for x in proc.stdout.split()]


def compile_plan(a, onnx, plan, tokenizer_args):
    proc = run([a.hetc, "compile", onnx, "--target", "host", "--max-batch", "1", "--max-seq", "64",
                "--weights", "f32", *tokenizer_args, "-o", plan], "hetc compile")
    return [line for line in proc.stderr.splitlines() if "packing the tokenizer" in line]


def tokenize(a, plan, text):
    return [int(x) for x in run([a.hetc, "tokenize", plan, "--text", text],
                                "hetc tokenize --text").stdout.strip().split(",")]


def expect_packing(lines, needle):
    if len(lines) != 1 or needle not in lines[0]:
        raise CheckFailed(f"expected hetc compile to say it packs {needle!r}, got {lines}")
    print(lines[0])


def check_ids(a, plan, model, bos, lossless):
    for text in TEXTS:
        expected = ([bos] if bos is not None else []) + spm_ids(model, text)
        got = tokenize(a, plan, text)
        if got != expected:
            raise CheckFailed(f"{plan}: {text!r} gives {got}; spm_encode gives {expected}")
        back = run([a.hetc, "tokenize", plan, "--ids", ",".join(map(str, got))],
                   "hetc tokenize --ids").stdout
        # Byte fallback with spaces kept as they are gives every text back.
        if lossless and back != text + "\n":
            raise CheckFailed(f"{plan}: {text!r} decodes back to {back!r}")
    print(f"{os.path.basename(plan)}: the ids of {len(TEXTS)} texts are spm_encode's")


def expect_refusal(a, args, needle):
    proc = subprocess.run([a.hetc, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, errors="replace", timeout=600)
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 1 or len(lines) != 1 or not lines[0].startswith("hetc: error: ") or \
            needle not in proc.stderr:
        raise CheckFailed(f"hetc {' '.join(args)}: expected one error line containing "
                          f"{needle!r}, got exit {proc.returncode} and stderr:\n{proc.stderr}")
    print(f"refused as expected: {lines[0]}")


def check(a):
    check_hetc_binary(a.hetc)
    for tool in ("spm_train", "spm_encode"):
        if not shutil.which(tool):
            raise CheckFailed(f"{tool} is not installed (Debian package sentencepiece; "
                              "tools/install-deps.sh installs it)")
    os.makedirs(a.workdir, exist_ok=True)
    spm_dir = os.path.join(a.workdir, "spm")
    os.makedirs(spm_dir, exist_ok=True)
    bpe = train(spm_dir, "bpe", ["--model_type=bpe", "--vocab_size=700", "--byte_fallback=true",
                                 "--normalization_rule_name=identity",
                                 "--remove_extra_whitespaces=false", "--character_coverage=0.999"])
    unigram = train(spm_dir, "unigram", ["--model_type=unigram", "--vocab_size=300",
                                         "--hard_vocab_limit=false",
                                         "--normalization_rule_name=identity"])
    nfkc = train(spm_dir, "nfkc", ["--model_type=unigram", "--vocab_size=300",
                                   "--hard_vocab_limit=false"])

    model_dir = os.path.join(a.workdir, "tiny")
    proc = run([sys.executable, os.path.join(ROOT, "models", "export.py"), "--preset", "tiny",
                "--set", f"vocab={VOCAB}", "--out", model_dir], f"export of tiny with {VOCAB} ids")
    print(proc.stdout.strip())
    onnx = os.path.join(model_dir, "model.onnx")

    # --tokenizer FILE.model, both kinds: BOS (id 1, the model's <s>) then spm_encode's ids.
    for model in (bpe, unigram):
        plan = os.path.join(a.workdir, os.path.basename(model) + ".hplan")
        expect_packing(compile_plan(a, onnx, plan, ["--tokenizer", model]), "sentencepiece:" + model)
        check_ids(a, plan, model, bos=1, lossless=model == bpe)

    # A directory holding tokenizer.model; tokenizer_config.json's add_bos_token false.
    tok_dir = os.path.join(a.workdir, "tokdir")
    os.makedirs(tok_dir, exist_ok=True)
    shutil.copy(bpe, os.path.join(tok_dir, "tokenizer.model"))
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
        f.write('{"add_bos_token": false}')
    plan = os.path.join(a.workdir, "dir.hplan")
    expect_packing(compile_plan(a, onnx, plan, ["--tokenizer", tok_dir]),
                   "sentencepiece:" + os.path.join(tok_dir, "tokenizer.model"))
    check_ids(a, plan, bpe, bos=None, lossless=True)

    # Beside the model, no --tokenizer; then a tokenizer.json beside it too, which wins.
    beside = os.path.join(model_dir, "tokenizer.model")
    shutil.copy(unigram, beside)
    plan = os.path.join(a.workdir, "beside.hplan")
    expect_packing(compile_plan(a, onnx, plan, []), "sentencepiece:" + beside)
    check_ids(a, plan, unigram, bos=1, lossless=False)
    converted = run([os.path.join(os.path.dirname(a.hetc), "hetc-sentencepiece"), bpe],
                    "hetc-sentencepiece").stdout
    with open(os.path.join(model_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.loads(converted)["tokenizer_json"])
    expect_packing(compile_plan(a, onnx, plan, []),
                   os.path.join(model_dir, "tokenizer.json") + " (not the tokenizer.model")
    check_ids(a, plan, bpe, bos=1, lossless=True)
    os.remove(beside)
    os.remove(os.path.join(model_dir, "tokenizer.json"))

    # Refusals.
    out = os.path.join(a.workdir, "refused.hplan")
    garbage = os.path.join(a.workdir, "garbage.model")
    with open(garbage, "wb") as f:
        f.write(b"\x0a\xff\xff\xff\xff\x0f this is not a SentencePiece model")
    expect_refusal(a, ["compile", onnx, "--tokenizer", garbage, "-o", out],
                   "libsentencepiece cannot load it")
    truncated = os.path.join(a.workdir, "truncated.model")
    with open(bpe, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[: os.path.getsize(bpe) // 2])
    expect_refusal(a, ["compile", onnx, "--tokenizer", truncated, "-o", out],
                   "libsentencepiece cannot load it")
    expect_refusal(a, ["compile", onnx, "--tokenizer", nfkc, "-o", out], "normalizer 'nmt_nfkc'")
    if os.path.exists(out):
        raise CheckFailed(f"a refused compile wrote {out}")
    print("sentencepiece: all checks passed")


def main():
    return check_main(check, __doc__)


if __name__ == "__main__":
    sys.exit(main())
