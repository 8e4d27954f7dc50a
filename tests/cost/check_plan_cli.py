#!/usr/bin/env python3
"""`hetc plan` and `hetc targets` as a user drives them: the JSON is one object with the documented
keys and LIA's policies, the sweep's ranges cover every batch, measured operator times run the
split search, and bad input is refused with one clear line."""

import argparse
import json
import os
import subprocess
import sys


# The shipped targets only: a calibrated host (hetc calibrate) lives in the user's cache, which
# these checks point at an empty directory.
ENV = dict(os.environ)


def run(hetc, *args):
    return subprocess.run([hetc, *args], capture_output=True, text=True, timeout=120, env=ENV)


def check(condition, message):
    if not condition:
        sys.exit("FAIL: " + message)


def json_of(hetc, *args):
    result = run(hetc, *args)
    check(result.returncode == 0, f"hetc {' '.join(args)} failed: {result.stderr}")
    try:
        return json.loads(result.stdout)  # the whole of stdout is one object
    except json.JSONDecodeError as error:
        sys.exit(f"FAIL: stdout is not one JSON object ({error}):\n{result.stdout}")


def refuses(hetc, args, expected):
    result = run(hetc, *args)
    check(result.returncode == 1, f"hetc {' '.join(args)}: exit {result.returncode}, expected 1")
    check(result.stdout == "", f"hetc {' '.join(args)}: wrote to stdout: {result.stdout}")
    lines = result.stderr.strip().splitlines()
    check(len(lines) == 1 and lines[0].startswith("hetc: error: "),
          f"hetc {' '.join(args)}: not one error line: {result.stderr!r}")
    check(expected in lines[0], f"hetc {' '.join(args)}: {lines[0]!r} lacks {expected!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hetc", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    hetc = args.hetc
    os.makedirs(args.workdir, exist_ok=True)
    ENV["XDG_CACHE_HOME"] = os.path.join(os.path.abspath(args.workdir), "empty-cache")

    # Targets: every figure has a source.
    targets = json_of(hetc, "targets", "--json")["targets"]
    names = sorted(t["name"] for t in targets)
    check(names == ["gnr-a100", "gnr-cpu", "gnr-h100", "spr-a100", "spr-cpu", "spr-h100"],
          f"targets {names}")
    for target in targets:
        for key, figure in target["figures"].items():
            check(figure["source"], f"{target['name']} {key} has no source")
    check(not next(t for t in targets if t["name"] == "spr-cpu")["gpu"], "spr-cpu has no GPU")
    listing = run(hetc, "targets")
    check(listing.returncode == 0 and "spr-a100" in listing.stdout, "targets listing")
    one = run(hetc, "targets", "spr-a100")
    check("cpu.cores" in one.stdout and "LIA Table 2" in one.stdout, "one target with sources")

    # One stage: LIA's partial offloading for OPT-175B decode at B = 900 on SPR-A100.
    base = ["plan", "--model", "opt-175b", "--target", "spr-a100"]
    decode = json_of(hetc, *base, "--batch", "900", "--len", "512", "--stage", "decode", "--json")
    check(decode["stage"] == "decode", "stage")
    check(decode["policy"] == [0, 1, 1, 0, 0, 0], f"decode policy {decode['policy']}")
    check(decode["predicted_ms"] > 0 and decode["timing"] == "serial", "predicted_ms, timing")
    check(abs(decode["predicted_ms"] - decode["serial_ms"]) <= 1e-9 * decode["predicted_ms"],
          "serial timing predicts the serial time")
    check(abs(decode["cpu_ms"] + decode["gpu_ms"] + decode["pcie_ms"] - decode["serial_ms"])
          <= 1e-6 * decode["serial_ms"], "CPU + GPU + PCIe make the serial time")
    check(len(decode["runners_up"]) == 4 and
          all(r["predicted_ms"] >= decode["predicted_ms"] for r in decode["runners_up"]),
          "runners-up are slower")
    check(set(decode["memory"]) == {"gpu", "ddr", "cxl"}, "memory tiers")
    check(sum(g["layers"] for g in decode["layer_groups"]) == 96, "every layer in a group")
    split = decode["operator_split"]
    check(split["best"]["latency_ms"] <= split["gpu_only"]["latency_ms"], "split search")

    prefill = json_of(hetc, *base, "--batch", "1", "--len", "32", "--stage", "prefill", "--json")
    check(prefill["policy"] == [1, 1, 1, 1, 1, 1], f"short prefill {prefill['policy']}")
    check("operator_split" not in prefill, "no operator split in prefill")

    overlapped = json_of(hetc, *base, "--batch", "900", "--len", "512", "--stage", "decode",
                         "--timing", "overlapped", "--json")
    check(overlapped["timing"] == "overlapped" and
          abs(overlapped["predicted_ms"] - overlapped["overlapped_ms"]) <= 1e-9 *
          overlapped["predicted_ms"], "overlapped timing")

    both = json_of(hetc, *base, "--batch", "64", "--len", "256", "--json")
    check([s["stage"] for s in both["stages"]] == ["prefill", "decode"], "both stages")

    cpu_only = json_of(hetc, "plan", "--model", "llama-3-8b", "--target", "spr-cpu",
                       "--stage", "decode", "--json")
    check(cpu_only["policy"] == [1] * 6 and cpu_only["runners_up"] == [], "CPU-only target")
    check("gpu" not in cpu_only["memory"], "no GPU memory on a CPU-only target")

    text = run(hetc, *base, "--batch", "900", "--len", "512")
    check(text.returncode == 0 and "runners-up" in text.stdout and "memory" in text.stdout
          and "p_i = 1 runs sublayer i on the CPU" in text.stdout, "text report")

    # The sweep: ranges of each row cover 1..max-batch without gaps.
    sweep = json_of(hetc, *base, "--sweep", "--stage", "decode", "--max-batch", "1024", "--json")
    table = sweep["tables"][0]
    check(table["stage"] == "decode" and table["max_batch"] == 1024, "sweep table")
    for row in table["rows"]:
        expected_first = 1
        for r in row["ranges"]:
            check(r["first_batch"] == expected_first, f"len {row['len']}: gap at {expected_first}")
            expected_first = r["last_batch"] + 1
        check(expected_first == 1025, f"len {row['len']}: ranges end at {expected_first - 1}")
        check(row["ranges"][0]["policy"] == [1] * 6, "small batches on the CPU")
    sweep_text = run(hetc, *base, "--sweep", "--max-batch", "64")
    check("exact ranges" in sweep_text.stdout and "C = (1,1,1,1,1,1)" in sweep_text.stdout,
          "sweep text")

    # Measured operator times: Park & Egger's Fig. 6(a).
    fig6a = os.path.join(args.data, "park_egger_opt30b_fig6a.csv")
    measured = json_of(hetc, "plan", "--op-times", fig6a, "--json")
    check(abs(measured["best"]["latency_ms"] - 47.546) < 1e-6, "Fig. 6(a) best split")
    check(abs(measured["gpu_only"]["latency_ms"] - 81.258) < 1e-6, "Fig. 6(a) GPU only")

    # Bad input: one line each.
    bad_target = os.path.join(args.workdir, "bad.json")
    with open(bad_target, "w") as f:
        f.write('{"name": "bad", "description": "x", "cpu": {}}')
    bad_times = os.path.join(args.workdir, "bad.csv")
    with open(bad_times, "w") as f:
        f.write("op,h2d_ms\n")
    refuses(hetc, ["plan", "--model", "gpt-5", "--target", "spr-a100"], "unknown model 'gpt-5'")
    refuses(hetc, ["plan", "--model", "opt-30b", "--target", "tpu"], "unknown target 'tpu'")
    refuses(hetc, ["plan", "--model", "opt-30b"], "plan needs --target")
    refuses(hetc, ["plan", "--target", "spr-a100"], "plan needs --model")
    refuses(hetc, [*base, "--batch", "0"], "--batch must be at least 1")
    refuses(hetc, [*base, "--len", "0"], "--len must be at least 1")
    refuses(hetc, [*base, "--stage", "both"], "--stage")
    refuses(hetc, ["plan", "--model", "opt-30b", "--target", bad_target], "cpu.model: missing")
    refuses(hetc, ["plan", "--model", "opt-30b", "--target", "spr-cpu", "--placement", "helm"],
            "placement helm needs a GPU")
    refuses(hetc, ["plan", "--op-times", bad_times], "expected the header")
    refuses(hetc, ["plan", "--op-times", fig6a, "--batches", "0"], "--batches must be at least 1")
    refuses(hetc, ["targets", "tpu"], "unknown target 'tpu'")
    print("ok")


if __name__ == "__main__":
    main()
