#!/usr/bin/python3
"""hetc serve against the official OpenAI JavaScript client (the `openai` npm package).

    /usr/bin/python3 tests/e2e/check_serve_openai.py --hetc BUILD/bin/hetc --workdir DIR [--node NODE]

1. exports the tiny preset with check_chat.py's byte-level tokenizer and Qwen2's ChatML template
   and compiles it;
2. starts `hetc serve PLAN --port 0` and runs tests/e2e/serve/openai_client.mjs against it: chat
   and plain completions streamed and not give the same text, finish reason and consistent usage;
   /v1/models lists the model; bad requests raise the client's APIError naming the field;
3. stops the server with SIGTERM: exit code 0.

Skips (exit 77) with the reason when Node.js or the npm package is absent: tools/install-deps.sh
runs `npm ci` in tests/e2e/serve.
"""

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import CheckFailed, check_hetc_binary, main_wrapper, run  # noqa: E402
from serve_common import Server, tiny_chat_plan  # noqa: E402

SKIP = 77
SERVE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve")
CLIENT = os.path.join(SERVE_DIR, "openai_client.mjs")
MAX_TOKENS = 8


def check(a, node):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    plan = tiny_chat_plan(a.hetc, a.workdir, max_batch=2)
    server = Server(a.hetc, plan)
    try:
        models = json.loads(server.request("GET", "/v1/models")[2])
        model = models["data"][0]["id"]
        proc = run([node, CLIENT, "--base-url", f"http://{server.host}:{server.port}/v1", "--model",
                    model, "--max-tokens", str(MAX_TOKENS)], "the openai client",
                   expect_success=False)
        print(proc.stdout.rstrip(), flush=True)
        if proc.returncode != 0:
            raise CheckFailed(f"the openai client against hetc serve: exit code {proc.returncode}\n"
                              f"{proc.stderr.rstrip()}\n  hetc serve's stderr:\n"
                              + "".join(server.stderr_lines[-20:]))
    finally:
        server.stop()
    print("OK: the openai client's checks pass against hetc serve")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hetc", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--node", default=shutil.which("node"))
    a = parser.parse_args()
    if not a.node:
        print("SKIP: Node.js is not installed (tools/install-deps.sh installs it)")
        return SKIP
    if not os.path.isfile(os.path.join(SERVE_DIR, "node_modules", "openai", "package.json")):
        print(f"SKIP: the openai npm package is not installed in {SERVE_DIR} "
              "(tools/install-deps.sh runs npm ci there)")
        return SKIP
    return main_wrapper(lambda: check(a, a.node))


if __name__ == "__main__":
    sys.exit(main())
