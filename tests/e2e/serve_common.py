"""`hetc serve PLAN --port 0` for the serving checks: started, its listening line read, stopped."""

import os
import re
import signal
import subprocess
import threading

from e2e_common import CheckFailed, describe, indent

LISTENING = re.compile(r"^hetc serve: listening on (http://\S+) \(model (.+), (\d+) slots, queue (\d+)\)")


class Server:
    """A running hetc serve; `url`, `model`, `slots`, `queue` from its listening line."""

    def __init__(self, hetc, plan, *options, timeout=300):
        self.cmd = [str(hetc), "serve", str(plan), "--port", "0", *map(str, options)]
        print(f"$ {describe(self.cmd)} &", flush=True)
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        self.lines = []
        self.listening = threading.Event()
        self.match = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.listening.wait(timeout) or self.match is None:
            running = self.proc.poll() is None
            self.kill()
            why = (f"printed no listening line within {timeout} s" if running else
                   f"exited with code {self.proc.returncode} before listening")
            raise CheckFailed(f"hetc serve {why}\n  command: {describe(self.cmd)}\n  stderr:\n{indent(self.stderr())}")
        self.url = self.match.group(1)
        self.model = self.match.group(2)
        self.slots = int(self.match.group(3))
        self.queue = int(self.match.group(4))
        print(f"hetc serve: {self.url}, model {self.model}, {self.slots} slots, queue {self.queue}",
              flush=True)

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if self.match is None:
                self.match = LISTENING.match(line)
                if self.match:
                    self.listening.set()
        self.listening.set()

    def stderr(self):
        return "\n".join(self.lines)

    def stop(self, timeout=60):
        """SIGTERM; the server must exit with code 0 within `timeout` seconds."""
        if self.proc.poll() is not None:
            raise CheckFailed(f"hetc serve had already exited with code {self.proc.returncode}\n"
                              f"  stderr:\n{indent(self.stderr())}")
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise CheckFailed(f"hetc serve did not stop within {timeout} s of SIGTERM\n"
                              f"  stderr:\n{indent(self.stderr())}")
        self.reader.join(10)
        if code != 0:
            raise CheckFailed(f"hetc serve exited with code {code} on SIGTERM, expected 0\n"
                              f"  stderr:\n{indent(self.stderr())}")
        print("hetc serve stopped on SIGTERM with exit code 0", flush=True)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        return False


def plan_with_chat_template(hetc, workdir, max_batch=2):
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
