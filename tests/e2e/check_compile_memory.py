#!/usr/bin/python3
"""Compiling a model holds about one weight at a time, not all of them.

    check_compile_memory.py --hetc BUILD/bin/hetc --workdir DIR

Two random Llama-shaped exports with external data (models/exports/large_random.py, the GenAI
builder's graph): a small one, whose compile measures what hetc needs whatever the weights, and
one of 500 MB whose largest tensor (the embedding table and the lm_head) is 131 MB. The larger
one's peak resident memory, as the kernel counts it for the compile process (mapped pages of the
external data included), must stay within the small one's plus 2.5 times its largest tensor: the
tensor being read and the segment being made from it (a float32 lm_head transposed: both whole),
and a quarter for the allocator's and the page tables' slack. Holding every weight (packed, or
the whole mapping) takes 600 to 750 MB, so a compile that does fails here; the limit the plan's
users are promised, 2 GB plus the largest tensor, is far above both. Each plan is then loaded,
which checks every segment's checksum, and run for two tokens in bf16 and float32.
"""

import os
import subprocess
import sys

from e2e_common import CheckFailed, MODELS, check_hetc_binary, check_main, describe, run

GENERATOR = os.path.join(MODELS, "exports", "large_random.py")
SMALL = ["--layers", "2", "--hidden", "256", "--intermediate", "512", "--heads", "4",
         "--kv-heads", "2", "--vocab", "1000", "--max-positions", "256"]
LARGE = ["--layers", "4", "--hidden", "1024", "--intermediate", "4096", "--heads", "16",
         "--kv-heads", "4", "--vocab", "32000", "--max-positions", "256"]
LARGEST_TENSOR = 32000 * 1024 * 4


def peak_rss(cmd, what):
    """Runs cmd and returns its peak resident set in bytes (the child's own, from wait4)."""
    print(f"$ {describe(cmd)}", flush=True)
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise CheckFailed(f"{what}: exit code {proc.returncode}\n  command: {describe(cmd)}\n"
                          f"  stderr:\n{stderr}")
    return usage.ru_maxrss * 1024


def export(args, out):
    run([sys.executable, GENERATOR, "--out", out] + args, "large_random.py")
    return os.path.join(out, "model.onnx")


def check(a):
    check_hetc_binary(a.hetc)
    small = export(SMALL, os.path.join(a.workdir, "small"))
    large = export(LARGE, os.path.join(a.workdir, "large"))
    weights = os.path.getsize(os.path.join(a.workdir, "large", "model.onnx.data"))
    for dtype in ("bf16", "f32"):
        base = peak_rss([a.hetc, "compile", small, "--weights", dtype, "--max-seq", "64", "-o",
                         os.path.join(a.workdir, f"small_{dtype}.hplan")], "hetc compile (small)")
        plan = os.path.join(a.workdir, f"large_{dtype}.hplan")
        peak = peak_rss([a.hetc, "compile", large, "--weights", dtype, "--max-seq", "64", "-o",
                         plan], "hetc compile (large)")
        limit = base + 3 * LARGEST_TENSOR // 2
        mib = lambda n: f"{n / 2**20:.0f} MiB"
        print(f"--weights {dtype}: compiling {mib(weights)} of weights peaked at {mib(peak)} "
              f"(the small export's compile {mib(base)}, limit {mib(limit)})")
        if peak > limit:
            raise CheckFailed(f"--weights {dtype}: compiling {mib(weights)} of weights peaked at "
                              f"{mib(peak)}, over {mib(limit)} (the small export's {mib(base)} + "
                              f"2.5 times the largest tensor's {mib(LARGEST_TENSOR)}): the "
                              f"compiler holds more than the weight it is writing")
        out = run([a.hetc, "run", plan, "--prompt-ids", "1,2,3", "--max-new", "2"], "hetc run")
        if len(out.stdout.split()) < 2:
            raise CheckFailed(f"hetc run printed no ids: {out.stdout!r}")
    for name in ("small", "large"):
        os.remove(os.path.join(a.workdir, name, "model.onnx.data"))
    for dtype in ("bf16", "f32"):
        os.remove(os.path.join(a.workdir, f"large_{dtype}.hplan"))


if __name__ == "__main__":
    sys.exit(check_main(check, __doc__))
