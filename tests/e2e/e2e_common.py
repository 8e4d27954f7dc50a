"""Shared pieces of the end-to-end checks: running commands, exporting presets, failing clearly."""

import argparse
import contextlib
import importlib.util
import io
import os
import shlex
import subprocess
import sys
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(REPO, "models")
FORKSERVER = os.path.join(REPO, "tests", "torch_forkserver.py")
# Prompts of the ragged batch: different lengths, every id below the vocabulary of every preset.
PROMPTS = [
    [5, 17, 42, 7, 99, 3],
    [1, 2],
    [200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210],
]


class CheckFailed(Exception):
    pass


def prompt_arg(ids):
    return ",".join(str(i) for i in ids)


def describe(cmd):
    """The command as a shell line, with very long arguments (long prompts) elided."""
    parts = []
    for c in cmd:
        c = str(c)
        if len(c) > 100:
            c = f"{c[:60]}...({len(c)} chars)"
        parts.append(shlex.quote(c))
    return " ".join(parts)


def run(cmd, what, timeout=600, expect_success=True):
    """Runs cmd; returns the CompletedProcess. A failure (when success is expected), a signal or a
    timeout raises CheckFailed with the command and its stderr."""
    cmd = [str(c) for c in cmd]
    print(f"$ {describe(cmd)}", flush=True)
    launched = cmd
    if len(cmd) > 1 and cmd[0] == sys.executable and cmd[1].endswith(".py"):
        # A Python script starts forked from the tests' torch server, its imports already done.
        launched = [sys.executable, FORKSERVER, "run", *cmd[1:]]
    try:
        proc = subprocess.run(launched, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              text=True, errors="replace")
    except subprocess.TimeoutExpired as e:
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise CheckFailed(f"{what}: no result after {timeout} s (hang?)\n  command: {describe(cmd)}\n"
                          f"  stderr:\n{indent(stderr)}")
    except OSError as e:
        raise CheckFailed(f"{what}: cannot start {cmd[0]}: {e}")
    if proc.returncode < 0:
        raise CheckFailed(f"{what}: killed by signal {-proc.returncode}\n  command: {describe(cmd)}\n"
                          f"  stderr:\n{indent(proc.stderr)}")
    if expect_success and proc.returncode != 0:
        raise CheckFailed(f"{what}: exit code {proc.returncode}\n  command: {describe(cmd)}\n"
                          f"  stderr:\n{indent(proc.stderr)}")
    return proc


def call_main(path, argv, what):
    """Runs the Python script at `path` as `python3 path ARGV...` would, but in this process: its
    main(argv) with its output captured; returns (stdout, stderr). Exporters and references import
    torch, a second and a half per process, which the steps of one check then pay once. Only for
    scripts that change no module they share (reference_bf16.py patches models/reference.py's, so
    it runs as a process)."""
    argv = [str(a) for a in argv]
    print(f"$ {describe([path, *argv])}  (in this process)", flush=True)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = _script_module(path).main(argv)
    except SystemExit as e:  # argparse's errors and the scripts' own
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            err.write(f"{e.code}\n")
    except Exception:  # the script's failure is this step's, reported as a process's would be
        code = 1
        err.write(traceback.format_exc())
    if code:
        raise CheckFailed(f"{what}: exit code {code}\n  command: {describe([path, *argv])}\n"
                          f"  stderr:\n{indent(err.getvalue() or out.getvalue())}")
    return out.getvalue(), err.getvalue()


def _script_module(path):
    """The script at `path` as a module, loaded once, its directory on sys.path for its imports."""
    path = os.path.abspath(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = sys.modules.get(name)
    if module is not None and os.path.abspath(getattr(module, "__file__", "") or "") == path:
        return module
    if name in sys.modules:
        raise CheckFailed(f"cannot load {path} as module {name!r}: {sys.modules[name]} has that name")
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def indent(text, prefix="    "):
    text = (text or "").rstrip()
    if not text:
        return prefix + "(empty)"
    return "\n".join(prefix + line for line in text.splitlines())


def export(preset, out_dir, no_constant_folding=False, external_data=False, seed=0, opset=None):
    cmd = [sys.executable, os.path.join(MODELS, "export.py"), "--preset", preset, "--out", out_dir,
           "--seed", str(seed)]
    if opset is not None:
        cmd += ["--opset", str(opset)]
    if no_constant_folding:
        cmd.append("--no-constant-folding")
    if external_data:
        cmd.append("--external-data")
    stdout, _ = call_main(cmd[1], cmd[2:], f"export of preset {preset}")
    print(stdout.strip(), flush=True)
    return os.path.join(out_dir, "model.onnx")


def reference(model_dir, prompts, max_new, out_dir, script=None, extra_args=()):
    """Runs the PyTorch reference (models/reference.py, or `script` taking the same arguments
    plus `extra_args`); returns the paths of its tokens.txt and logits.npy."""
    cmd = [sys.executable, script or os.path.join(MODELS, "reference.py"), *extra_args,
           "--model-dir", model_dir, "--max-new", str(max_new), "--out", out_dir]
    for p in prompts:
        cmd += ["--prompt-ids", prompt_arg(p)]
    if script is None:
        _, stderr = call_main(cmd[1], cmd[2:], "PyTorch reference")
    else:  # another script's reference may patch models/reference.py's module
        stderr = run(cmd, "PyTorch reference").stderr
    print(stderr.strip(), flush=True)
    return os.path.join(out_dir, "tokens.txt"), os.path.join(out_dir, "logits.npy")


def check_hetc_binary(path):
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise CheckFailed(f"hetc binary {path} does not exist or is not executable")


def main_wrapper(fn):
    """Runs fn(); turns CheckFailed into one FAIL message and exit code 1."""
    try:
        fn()
    except CheckFailed as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


def check_main(check, doc=None, node=False):
    """The main of a check script that takes --hetc and --workdir (and with `node`, --node, the
    Node.js that runs ONNX Runtime's tests/e2e/ort/greedy.mjs): runs check(args) with the work
    directory made; returns the exit code."""
    p = argparse.ArgumentParser(description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True)
    p.add_argument("--workdir", required=True)
    if node:
        p.add_argument("--node", help="Node.js that runs tests/e2e/ort/greedy.mjs")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    return main_wrapper(lambda: check(a))
