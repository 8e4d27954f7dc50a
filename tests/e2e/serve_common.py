"""Starting and talking to `hetc serve` from the end-to-end checks (standard library only)."""

import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import threading
import time

from e2e_common import CheckFailed, describe

LISTENING = re.compile(r"listening on (https?)://([0-9.]+):(\d+)")


class Server:
    """`hetc serve PLAN --port 0 ARGS...`, started and stopped (SIGTERM, exit 0 expected)."""

    def __init__(self, hetc, plan, *args, cafile=None):
        self.cafile = cafile  # the certificate an https server is checked against
        cmd = [hetc, "serve", plan, "--port", "0", *map(str, args)]
        print(f"$ {describe(cmd)} &", flush=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, errors="replace")
        self.stderr_lines = []
        deadline = time.time() + 120
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise CheckFailed(f"hetc serve exited before listening (code {self.proc.wait()}):\n"
                                  + "".join(self.stderr_lines))
            self.stderr_lines.append(line)
            found = LISTENING.search(line)
            if found:
                self.scheme, self.host, self.port = (found.group(1), found.group(2),
                                                     int(found.group(3)))
                break
            if time.time() > deadline:
                raise CheckFailed("hetc serve did not say it was listening within 120 s")
        # Keep draining stderr so the server never blocks on a full pipe.
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        print(f"  {line.strip()}", flush=True)

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def connection(self, timeout=120):
        if self.scheme == "https":
            # The server's certificate verified against itself (self.cafile): a test certificate.
            context = ssl.create_default_context(cafile=self.cafile)
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, timeout=120):
        """Returns (status, headers, body bytes)."""
        conn = self.connection(timeout)
        try:
            data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
            conn.request(method, path, body=data,
                         headers={"Content-Type": "application/json"} if data else {})
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def post_json(self, path, body, expect=200):
        status, headers, data = self.request("POST", path, body)
        if status != expect:
            raise CheckFailed(f"POST {path} {json.dumps(body)[:200]}: HTTP {status}, expected "
                              f"{expect}: {data[:500]!r}")
        return json.loads(data)

    def stream(self, path, body):
        """A streamed request: the parsed `data:` events up to [DONE] (exclusive) and whether
        [DONE] came."""
        conn = self.connection()
        try:
            conn.request("POST", path, body=json.dumps(dict(body, stream=True)),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise CheckFailed(f"stream {path}: HTTP {resp.status}: {resp.read()[:500]!r}")
            if not resp.getheader("Content-Type", "").startswith("text/event-stream"):
                raise CheckFailed(f"stream {path}: Content-Type {resp.getheader('Content-Type')}")
            return parse_events(resp.read().decode())
        finally:
            conn.close()

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        if status != 200:
            raise CheckFailed(f"GET /metrics: HTTP {status}")
        values = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise CheckFailed("no VmRSS for the server")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise CheckFailed("hetc serve did not stop within 60 s of SIGTERM")
        self._drain.join(timeout=5)
        if code != 0:
            raise CheckFailed(f"hetc serve exited {code} after SIGTERM:\n"
                              + "".join(self.stderr_lines[-20:]))
        print("  hetc serve stopped (exit 0)", flush=True)


def parse_events(text):
    """Server-sent events: (list of parsed data objects, whether [DONE] ended them)."""
    events, done = [], False
    for block in text.split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        if not data:
            continue  # a comment (": waiting") or an empty block
        payload = "\n".join(data)
        if payload == "[DONE]":
            done = True
            continue
        if done:
            raise CheckFailed(f"an event after [DONE]: {payload[:200]}")
        events.append(json.loads(payload))
    return events, done


def stream_text(events, chat):
    """The text of a streamed choice 0 and its finish_reason."""
    text, finish = "", None
    for event in events:
        if "error" in event:
            raise CheckFailed(f"error event: {event}")
        for choice in event.get("choices", []):
            if chat:
                text += choice["delta"].get("content") or ""
            else:
                text += choice["text"]
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    return text, finish


def tiny_chat_plan(hetc, workdir, max_batch):
    """The tiny preset (exported into workdir/tiny once) with check_chat.py's byte-level tokenizer
    and Qwen2's ChatML template, compiled with `max_batch` slots (float32 weights, max-seq 256);
    returns the plan's path."""
    from check_chat import write_chat_tokenizer
    from e2e_common import export, run
    model_dir = os.path.join(workdir, "tiny")
    onnx = os.path.join(model_dir, "model.onnx")
    if not os.path.isfile(onnx):
        export("tiny", model_dir)
        write_chat_tokenizer(model_dir)
    plan = os.path.join(workdir, f"tiny-{max_batch}.hplan")
    run([hetc, "compile", onnx, "--target", "host", "--max-batch", str(max_batch), "--max-seq",
         "256", "--weights", "f32", "--tokenizer", model_dir, "-o", plan], "hetc compile")
    return plan
