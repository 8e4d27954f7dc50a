#!/usr/bin/python3
"""`hetc bench --compare-torch` on the tiny preset: every point carries PyTorch's time at the same
context, batch and gen, run with the same threads and the dtype of the plan's weights, and the
speedup is their ratio; a model directory that is not the plan's, a Python without torch and a
missing interpreter are each refused with one line. Nothing here checks how fast anything is."""

import argparse
import json
import os
import shutil
import stat
import sys

from e2e_common import CheckFailed, check_hetc_binary, export, main_wrapper, run


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


def close(a, b, what):
    expect(abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b)), f"{what}: {a} != {b}")


def refused(hetc, args, message):
    proc = run([hetc, "bench", *args], "refusal", expect_success=False)
    expect(proc.returncode == 1, f"{args} exits 1 (got {proc.returncode}): {proc.stderr}")
    expect(proc.stdout == "", f"{args} prints nothing on stdout")
    expect(proc.stderr.rstrip("\n").endswith(f"hetc: error: {message}"),
           f"{args}: expected the error {message!r}, got {proc.stderr!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hetc", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    check_hetc_binary(args.hetc)
    os.makedirs(args.workdir, exist_ok=True)
    model_dir = os.path.join(args.workdir, "tiny")
    model = export("tiny", model_dir)
    plan = os.path.join(args.workdir, "tiny.hplan")
    run([args.hetc, "compile", model, "--max-batch", "2", "--max-seq", "64",
         "--max-step-tokens", "16", "-o", plan], "compile")

    gen = 2
    common = ["--probe-mib", "4", "--gen", str(gen), "--threads", "2", "--no-paired"]
    proc = run([args.hetc, "bench", plan, "--json", "--contexts", "0,16,32", "--batches", "1,2",
                "--compare-torch", model_dir, *common], "bench --compare-torch")
    report = json.loads(proc.stdout)
    torch = report.get("torch")
    expect(isinstance(torch, dict), "the report describes the PyTorch reference")
    setup = torch["setup"]
    expect(setup["ready"] is True and setup["torch"].startswith("1."), f"set-up: {setup}")
    # The plan's linear weights are BF16 (the default), so PyTorch runs in bfloat16.
    expect("BF16" in report["weight_dtypes"] and setup["dtype"] == "bfloat16",
           f"PyTorch's dtype follows the plan's weights: {report['weight_dtypes']}, {setup}")
    expect(setup["threads"] == report["threads"] == 2, "the same thread count")
    expect(len(report["points"]) == 6, "six points")
    for point in report["points"]:
        t = point.get("torch")
        what = f"batch {point['batch']} context {point['context']}"
        expect(isinstance(t, dict) and "ms_per_token" in t, f"{what}: PyTorch's time: {t}")
        expect((t["context"], t["batch"], t["gen"]) == (point["context"], point["batch"], gen),
               f"{what}: PyTorch ran the same point: {t}")
        expect(t["ms_per_token"] > 0, f"{what}: a positive time")
        close(t["tokens_per_s"] * t["ms_per_token"] / 1000, point["batch"], what + ": tokens")
        close(t["speedup"], t["ms_per_token"] / point["ms_per_token"], what + ": speedup")
    progress = [l for l in proc.stderr.splitlines() if l.startswith("hetc: bench [")]
    expect(len(progress) == 6 and all("PyTorch" in l and "speedup" in l for l in progress),
           f"progress lines name PyTorch's time: {proc.stderr}")

    # A model directory that is not the one the plan was compiled from.
    other = os.path.join(args.workdir, "other")
    os.makedirs(other, exist_ok=True)
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    config["layers"] += 1
    with open(os.path.join(other, "config.json"), "w") as f:
        json.dump(config, f)
    shutil.copy(os.path.join(model_dir, "weights.pt"), os.path.join(other, "weights.pt"))
    refused(args.hetc, [plan, "--contexts", "0", "--compare-torch", other, *common],
            f"--compare-torch: {other}/config.json has layers = {config['layers']} but the plan "
            f"has {config['layers'] - 1}: not the model the plan was compiled from")

    # A Python that cannot import torch (site-packages off), and no Python at all.
    no_torch = os.path.join(args.workdir, "python-without-torch")
    with open(no_torch, "w") as f:
        f.write(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    os.chmod(no_torch, os.stat(no_torch).st_mode | stat.S_IXUSR)
    refused(args.hetc, [plan, "--contexts", "0", "--compare-torch", model_dir, "--python", no_torch,
                        *common],
            f"--compare-torch: {sys.executable} cannot import torch (No module named 'torch'); "
            "PyTorch is needed for the reference")
    refused(args.hetc, [plan, "--contexts", "0", "--compare-torch", model_dir, "--python",
                        os.path.join(args.workdir, "no-such-python"), *common],
            "--compare-torch: cannot run the Python interpreter "
            f"{os.path.join(args.workdir, 'no-such-python')} (--python): No such file or directory")
    print("hetc bench --compare-torch: PyTorch at every point, same threads and dtype; refusals "
          "as documented")


if __name__ == "__main__":
    sys.exit(main_wrapper(main))
