#!/usr/bin/env python3
"""`hetc bench` on the unit tests' tiny plan: the JSON report is one well-formed object with the
documented keys, the profile adds up, the fill is labelled, and impossible options are refused
with one clear line. Nothing here checks how fast anything is."""

import argparse
import json
import os
import subprocess
import sys

REQUIRED = {
    "plan": str, "context": int, "batch": int, "gen": int, "fill": str,
    "fill_description": str, "fill_seconds": float, "decode_seconds": float,
    "tokens_per_s": float, "ms_per_token": float, "bytes_per_token": float,
    "weight_bytes_per_token": int, "kv_bytes_per_token": float, "average_context": float,
    "measured_read_gbs": float, "achieved_read_gbs": float, "roofline_fraction": float,
    "bandwidth_probe": dict, "kernels": list, "weight_dtypes": list, "bounds": dict,
    "threads": int, "pinned_threads": int,
}
PROFILE_REQUIRED = ["steps", "step_ms", "run_ms", "wait_ms", "dispatch_ms", "overhead_fraction",
                    "by_kind", "ops"]
SYNTHETIC = "synthetic KV fill (no prefill computed)"
PROBE = ["--probe-mib", "4"]  # a small probe keeps the test quick; its figure is not checked


def run(hetc, *args):
    return subprocess.run([hetc, "bench", *args], capture_output=True, text=True, timeout=120)


def bench_json(hetc, plan, *args):
    result = run(hetc, plan, "--json", *PROBE, *args)
    if result.returncode != 0:
        sys.exit(f"hetc bench {' '.join(args)} failed: {result.stderr}")
    try:
        return json.loads(result.stdout)  # the whole of stdout is one object
    except json.JSONDecodeError as error:
        sys.exit(f"stdout is not one JSON object ({error}):\n{result.stdout}")


def check(condition, message):
    if not condition:
        sys.exit("FAIL: " + message)


def close(a, b, what):
    check(abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b)), f"{what}: {a} != {b}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hetc", required=True)
    parser.add_argument("--write-plan", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    plan = os.path.join(args.workdir, "tiny.hplan")
    subprocess.run([args.write_plan, plan], check=True)

    # The tiny plan: max_batch 2, max_seq 32, max_step_tokens 8.
    report = bench_json(args.hetc, plan, "--context", "16", "--gen", "4")
    for key, kind in REQUIRED.items():
        check(key in report, f"missing key {key}")
        if kind is float:
            check(isinstance(report[key], (int, float)), f"{key} is not a number")
        else:
            check(isinstance(report[key], kind), f"{key} is not {kind.__name__}")
    check(report["context"] == 16 and report["gen"] == 4 and report["batch"] == 1, "echoed options")
    check(report["fill"] == "prefill", "context 16 is prefilled by default")
    check(report["bounds"] == {"max_batch": 2, "max_seq": 32, "max_step_tokens": 8}, "bounds")
    check(report["kernels"] and all({"op", "kernel", "count"} <= set(k) for k in report["kernels"]),
          "kernels list")
    check(report["tokens_per_s"] > 0 and report["ms_per_token"] > 0, "positive throughput")
    close(report["bytes_per_token"],
          report["weight_bytes_per_token"] + report["kv_bytes_per_token"], "bytes_per_token")
    close(report["average_context"], 16 + (4 + 1) / 2, "average_context")
    close(report["roofline_fraction"],
          report["bytes_per_token"] / (report["ms_per_token"] / 1000)
          / (report["measured_read_gbs"] * 1e9), "roofline_fraction")
    check("profile" not in report, "no profile unless asked")
    check(report["paired_roofline_min"] <= report["paired_roofline_fraction"]
          <= report["paired_roofline_max"], "paired roofline fraction and its range")
    unpaired = bench_json(args.hetc, plan, "--gen", "2", "--no-paired")
    check("paired_roofline_fraction" not in unpaired, "--no-paired")

    profiled = bench_json(args.hetc, plan, "--context", "8", "--batch", "2", "--gen", "3",
                          "--profile", "--threads", "2")
    profile = profiled.get("profile")
    check(isinstance(profile, dict), "--profile adds a profile object")
    for key in PROFILE_REQUIRED:
        check(key in profile, f"missing profile key {key}")
    check(profile["steps"] == 3, "profiled steps")
    check(all(op["run_ms"] + op["wait_ms"] > 0 for op in profile["ops"]), "non-zero counters")
    close(sum(op["run_ms"] for op in profile["ops"]), profile["run_ms"], "sum of op run times")
    close(sum(op["wait_ms"] for op in profile["ops"]), profile["wait_ms"], "sum of op waits")
    close(sum(k["run_ms"] for k in profile["by_kind"]), profile["run_ms"], "sum of kind run times")
    close(profile["run_ms"] + profile["wait_ms"] + profile["dispatch_ms"], profile["step_ms"],
          "run + wait + dispatch = step")
    check(0 <= profile["overhead_fraction"] <= 1, "overhead fraction")

    synthetic = bench_json(args.hetc, plan, "--context", "20", "--gen", "2", "--fill", "synthetic")
    check(synthetic["fill"] == "synthetic", "synthetic fill in JSON")
    check(synthetic["fill_description"] == SYNTHETIC, "synthetic fill labelled in JSON")
    text = run(args.hetc, plan, *PROBE, "--context", "20", "--gen", "2", "--fill", "synthetic",
               "--profile")
    check(text.returncode == 0, f"text report failed: {text.stderr}")
    check(SYNTHETIC in text.stdout, "synthetic fill labelled in text")
    check("roofline" in text.stdout and "profile:" in text.stdout, "text report sections")

    refusals = [
        (["--batch", "3"], "--batch 3 exceeds the plan's --max-batch 2"),
        (["--context", "30", "--gen", "4"],
         "--context 30 + --gen 4 need 34 positions but the plan's --max-seq is 32"),
        (["--gen", "0"], "--gen must be at least 1"),
    ]
    for extra, message in refusals:
        result = run(args.hetc, plan, "--json", *PROBE, *extra)
        check(result.returncode == 1, f"{extra} exits 1 (got {result.returncode})")
        check(result.stdout == "", f"{extra} prints nothing on stdout")
        check(result.stderr == f"hetc: error: {message}\n", f"{extra}: {result.stderr!r}")
    print("hetc bench: JSON, profile, fill labels and refusals as documented")


if __name__ == "__main__":
    main()
