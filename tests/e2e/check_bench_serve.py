#!/usr/bin/python3
"""hetc bench-serve end to end: its counts agree with themselves and with the server's /metrics.

    /usr/bin/python3 tests/e2e/check_bench_serve.py --hetc BUILD/bin/hetc --workdir DIR

1. the tiny preset (check_chat.py's tokenizer), 2 slots: `hetc bench-serve PLAN --concurrency 1,2`
   starts hetc serve itself; every request succeeds; each request that ended by length streamed
   exactly max_tokens tokens (all of them did: ok x max_tokens == tokens), one that stopped no
   more; the clients' tokens equal the server's generation-token delta of /metrics, the prompt
   ids sent its prompt-token delta; the table has a row per level;
2. a server that refuses: one slot and one queue place (--max-queue 1) under 8 clients answers
   some requests 429, counted as rejected (not failed), as many as the server's own count;
3. a server that dies mid-run (killed while bench-serve --url streams from it), a URL where
   nothing listens, and bad options: one error line, a non-zero exit.
Times are printed, never checked.
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import CheckFailed, check_hetc_binary, check_main, describe, indent, run  # noqa: E402
from serve_common import Server, tiny_chat_plan  # noqa: E402

MAX_TOKENS = 5
PROMPT_TOKENS = 6
REQUESTS = 3


def load_report(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_level_counts(level, max_tokens, prompt_tokens, logprobs=False):
    """The request counts add up; the token counts agree per request (the stream's usage, the
    chunks' tokens: all of them with logprobs), in total and with the server's /metrics. Returns
    whether every request ended by length."""
    c = level["concurrency"]
    per_request = level["per_request"]
    if len(per_request) != level["requests"] or \
            level["ok"] + level["rejected"] + level["failed"] != level["requests"]:
        raise CheckFailed(f"concurrency {c}: ok {level['ok']} + 429 {level['rejected']} + failed "
                          f"{level['failed']} != {level['requests']} requests "
                          f"({len(per_request)} recorded)")
    total = 0
    all_length = True
    for i, r in enumerate(per_request):
        total += r["tokens"]
        if r["outcome"] != "ok":
            all_length = False
            if r["tokens"] != 0:
                raise CheckFailed(f"concurrency {c}: request {i} was {r['outcome']} after "
                                  f"{r['tokens']} tokens: {r}")
            continue
        if r["usage_completion_tokens"] != r["tokens"] or \
                r["usage_prompt_tokens"] != prompt_tokens:
            raise CheckFailed(f"concurrency {c}: request {i} counted {r['tokens']} tokens, its "
                              f"usage says {r['usage_completion_tokens']} generated for "
                              f"{r['usage_prompt_tokens']} prompt tokens of {prompt_tokens}")
        if not 1 <= r["chunks"] <= r["chunk_tokens"] <= r["tokens"] or \
                (logprobs and r["chunk_tokens"] != r["tokens"]):
            raise CheckFailed(f"concurrency {c}: request {i}: {r['chunks']} chunks carried "
                              f"{r['chunk_tokens']} tokens, usage {r['tokens']}"
                              f"{' (with logprobs)' if logprobs else ''}")
        if r["finish_reason"] == "length":
            if r["tokens"] != max_tokens:
                raise CheckFailed(f"concurrency {c}: request {i} finished by length after "
                                  f"{r['tokens']} tokens, max_tokens {max_tokens}")
        elif r["finish_reason"] == "stop":
            all_length = False
            if not 1 <= r["tokens"] <= max_tokens:
                raise CheckFailed(f"concurrency {c}: request {i} stopped after {r['tokens']} "
                                  f"tokens, max_tokens {max_tokens}")
        else:
            raise CheckFailed(f"concurrency {c}: request {i} ended with finish_reason "
                              f"{r['finish_reason']!r}")
    if total != level["output_tokens"]:
        raise CheckFailed(f"concurrency {c}: output_tokens {level['output_tokens']} != the sum "
                          f"over requests {total}")
    if all_length and level["output_tokens"] != level["ok"] * max_tokens:
        raise CheckFailed(f"concurrency {c}: {level['ok']} requests ended by length, "
                          f"{level['output_tokens']} tokens != {level['ok']} x {max_tokens}")
    server = level["server"]
    if not server["metrics"]:
        raise CheckFailed(f"concurrency {c}: no /metrics counts in the report: {server}")
    if server["generation_tokens"] != level["output_tokens"] or level["tokens_match"] is not True:
        raise CheckFailed(f"concurrency {c}: the clients counted {level['output_tokens']} tokens, "
                          f"the server's /metrics {server['generation_tokens']}")
    if server["prompt_tokens"] != (level["ok"] + level["failed"]) * prompt_tokens or \
            level["prompt_tokens_sent"] != level["requests"] * prompt_tokens:
        raise CheckFailed(f"concurrency {c}: {level['prompt_tokens_sent']} prompt ids sent in "
                          f"{level['requests']} requests of {prompt_tokens}, the server fed "
                          f"{server['prompt_tokens']}")
    if level["usage_prompt_tokens"] != level["ok"] * prompt_tokens:
        raise CheckFailed(f"concurrency {c}: the usage of {level['ok']} ok requests counts "
                          f"{level['usage_prompt_tokens']} prompt tokens, not {prompt_tokens} each")
    if server["requests_rejected"] != level["rejected"]:
        raise CheckFailed(f"concurrency {c}: {level['rejected']} requests answered 429, the "
                          f"server counted {server['requests_rejected']} rejected")
    return all_length


def expect_one_error_line(proc, needle, what):
    err = proc.stderr.strip()
    if proc.returncode == 0 or proc.returncode < 0:
        raise CheckFailed(f"{what}: exit code {proc.returncode}, expected an error exit\n"
                          f"  stderr:\n{indent(err)}")
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("hetc: error: ") or needle not in lines[0]:
        raise CheckFailed(f"{what}: expected one error line naming {needle!r}, got:\n{indent(err)}")
    print(f"{what}: {lines[0]}", flush=True)


def check_sweep(a, plan):
    report_path = os.path.join(a.workdir, "sweep.json")
    proc = run([a.hetc, "bench-serve", plan, "--concurrency", "1,2", "--requests", REQUESTS,
                "--prompt-tokens", PROMPT_TOKENS, "--max-tokens", MAX_TOKENS, "--seed", 3,
                "--json", report_path], "hetc bench-serve PLAN")
    print(proc.stdout.rstrip(), flush=True)
    report = load_report(report_path)
    levels = report["levels"]
    if [l["concurrency"] for l in levels] != [1, 2] or \
            any(l["requests"] != REQUESTS for l in levels):
        raise CheckFailed(f"the report's levels are {[(l['concurrency'], l['requests']) for l in levels]}, "
                          f"expected concurrency 1 and 2 with {REQUESTS} requests each")
    if not report["server"]["started"] or report["max_tokens"] != MAX_TOKENS or \
            report["prompt_tokens"] != PROMPT_TOKENS:
        raise CheckFailed(f"the report's settings: {report['server']}, max_tokens "
                          f"{report['max_tokens']}, prompt_tokens {report['prompt_tokens']}")
    all_length = True
    for level in levels:
        if level["ok"] != REQUESTS:
            raise CheckFailed(f"concurrency {level['concurrency']}: {level['ok']} of {REQUESTS} "
                              f"requests ok: {level['per_request']}")
        all_length &= check_level_counts(level, MAX_TOKENS, PROMPT_TOKENS)
    if not all_length:
        print("some requests stopped before max_tokens; ok x max_tokens == tokens was not checked")
    rows = [line for line in proc.stdout.splitlines() if line.split()[:1] in (["1"], ["2"])]
    if len(rows) != 2:
        raise CheckFailed(f"expected a table row per level on stdout:\n{proc.stdout}")
    print("the sweep's counts agree with each other and with /metrics", flush=True)

    # With logprobs each chunk says how many tokens it carries: they add up to the usage.
    report_path = os.path.join(a.workdir, "logprobs.json")
    proc = run([a.hetc, "bench-serve", plan, "--concurrency", "2", "--requests", 4,
                "--prompt-tokens", PROMPT_TOKENS, "--max-tokens", MAX_TOKENS, "--logprobs",
                "--json", report_path], "hetc bench-serve PLAN --logprobs")
    print(proc.stdout.rstrip(), flush=True)
    level = load_report(report_path)["levels"][0]
    if level["ok"] != 4:
        raise CheckFailed(f"--logprobs: {level['ok']} of 4 requests ok: {level['per_request']}")
    check_level_counts(level, MAX_TOKENS, PROMPT_TOKENS, logprobs=True)
    print("--logprobs: each chunk's tokens add up to the usage", flush=True)


def check_refusals(a, single_slot_plan):
    report_path = os.path.join(a.workdir, "refused.json")
    # Room for two requests (the slot and one queue place); 8 clients start at once, each
    # request lasting 64 tokens: most of the first 8 are answered 429 at once.
    proc = run([a.hetc, "bench-serve", single_slot_plan, "--max-queue", 1, "--concurrency", 8,
                "--requests", 16, "--prompt-tokens", PROMPT_TOKENS, "--max-tokens", 64,
                "--json", report_path], "hetc bench-serve PLAN --max-queue 1")
    print(proc.stdout.rstrip(), flush=True)
    level = load_report(report_path)["levels"][0]
    check_level_counts(level, 64, PROMPT_TOKENS)
    if level["failed"] != 0 or level["ok"] == 0 or level["rejected"] == 0:
        raise CheckFailed(f"one slot, one queue place, 8 clients: ok {level['ok']}, 429 "
                          f"{level['rejected']}, failed {level['failed']}; expected some ok, some "
                          f"429 and no failure")
    print(f"one slot, one queue place: {level['ok']} ok, {level['rejected']} answered 429",
          flush=True)


def check_server_dies(a, plan):
    server = Server(a.hetc, plan)
    cmd = [a.hetc, "bench-serve", "--url", f"http://{server.host}:{server.port}", "--concurrency",
           "2", "--requests", "100000", "--prompt-tokens", PROMPT_TOKENS, "--vocab", 256,
           "--max-tokens", "64"]
    cmd = [str(c) for c in cmd]
    print(f"$ {describe(cmd)}", flush=True)
    bench = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The header is printed once the server answered /v1/models; the requests follow.
        header = ""
        while "conc" not in header:
            line = bench.stdout.readline()
            if not line:
                break
            header += line
        time.sleep(0.5)
        if bench.poll() is not None:
            raise CheckFailed(f"hetc bench-serve ended before its server was killed: exit "
                              f"{bench.returncode}\n{bench.stderr.read()}")
        server.proc.kill()
        server.proc.wait()
        try:
            out, err = bench.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            raise CheckFailed("hetc bench-serve did not end within 120 s of its server dying")
    finally:
        for proc in (bench, server.proc):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    expect_one_error_line(subprocess.CompletedProcess(cmd, bench.returncode, out, err),
                          "stopped answering", "a server killed mid-run")


def check_bad_input(a, plan):
    # A port nothing listens on: port 1 is privileged and unused here.
    expect_one_error_line(run([a.hetc, "bench-serve", "--url", "http://127.0.0.1:1"],
                              "bench-serve --url nowhere", expect_success=False),
                          "cannot reach the server at http://127.0.0.1:1", "a URL where nothing listens")
    expect_one_error_line(run([a.hetc, "bench-serve", plan, "--concurrency", "1,0"],
                              "bench-serve --concurrency 1,0", expect_success=False),
                          "--concurrency '1,0'", "--concurrency 1,0")
    expect_one_error_line(run([a.hetc, "bench-serve"], "bench-serve without a server",
                              expect_success=False),
                          "give a PLAN", "neither a plan nor --url")
    missing = os.path.join(a.workdir, "missing.hplan")
    expect_one_error_line(run([a.hetc, "bench-serve", missing], "bench-serve MISSING",
                              expect_success=False),
                          missing, "a plan that does not exist")


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    plan = tiny_chat_plan(a.hetc, a.workdir, max_batch=2)
    check_bad_input(a, plan)
    check_sweep(a, plan)
    check_refusals(a, tiny_chat_plan(a.hetc, a.workdir, max_batch=1))
    check_server_dies(a, plan)
    print("OK: hetc bench-serve")


def main():
    return check_main(check, __doc__)


if __name__ == "__main__":
    sys.exit(main())
