#!/usr/bin/env python3
"""`hetc calibrate` as a user drives it: before it runs, the target 'host' is refused with the
way to make it; after it, the file it wrote is a target every command reads (hetc targets lists
it with a source for every figure, hetc plan --target host plans on it, all on the CPU), its
measured figures are positive, and bad output paths are refused with one line. Measurements only,
never timed: the values are this machine's and are not compared with anything."""

import argparse
import json
import os
import subprocess
import sys


def check(condition, message):
    if not condition:
        sys.exit("FAIL: " + message)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hetc", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    cache = os.path.join(os.path.abspath(args.workdir), "cache")
    host_file = os.path.join(cache, "hetc", "host.json")
    if os.path.exists(host_file):
        os.remove(host_file)
    env = dict(os.environ, XDG_CACHE_HOME=cache)

    def run(*argv):
        return subprocess.run([args.hetc, *argv], capture_output=True, text=True, timeout=300, env=env)

    def refused(result, words):
        lines = result.stderr.strip().splitlines()
        check(result.returncode == 1 and len(lines) == 1 and lines[0].startswith("hetc: error: "),
              f"not one error line (exit {result.returncode}): {result.stderr!r}")
        check(words in lines[0], f"{lines[0]!r} lacks {words!r}")

    plan = ["plan", "--model", "llama-3-8b", "--target", "host", "--batch", "4", "--len", "256",
            "--stage", "decode", "--json"]
    refused(run(*plan), "target 'host' has not been measured: run hetc calibrate first (it writes "
            + host_file)
    refused(run("calibrate", "--quick", "--out", os.path.join(args.workdir, "mine.json")),
            "--out must name a file host.json")

    calibrated = run("calibrate", "--quick", "--threads", "1", "--json")
    check(calibrated.returncode == 0, f"hetc calibrate failed: {calibrated.stderr}")
    report = json.loads(calibrated.stdout)
    check(report["path"] == host_file and os.path.isfile(host_file),
          f"calibrate wrote {report['path']}, expected {host_file}")
    points = report["points"]
    check([p["threads"] for p in points] == [1], f"threads measured: {[p['threads'] for p in points]}")
    for key in ["read_gbs", "decode_weight_gbs", "prefill_tflops"]:
        check(points[0][key] > 0, f"{key} is {points[0][key]}")

    targets = json.loads(run("targets", "--json").stdout)["targets"]
    host = next((t for t in targets if t["name"] == "host"), None)
    check(host is not None and not host["gpu"], f"hetc targets does not list a CPU-only host: {targets}")
    figures = host["figures"]
    for key in ["cpu.amx_bf16_tflops", "ddr.read_gbs", "ddr.capacity_gib", "cpu.cores"]:
        check(float(figures[key]["value"]) > 0, f"{key} = {figures[key]['value']}")
    check("measured by hetc calibrate" in figures["cpu.amx_bf16_tflops"]["source"] and
          "measured by hetc calibrate" in figures["ddr.read_gbs"]["source"], "sources of the measured figures")
    check(float(figures["ddr.read_gbs"]["value"]) == round(points[0]["read_gbs"], 2),
          "ddr.read_gbs is not the measured read bandwidth")
    check("ddr.channels" not in figures, "ddr.channels written though nothing measured it")

    decode = json.loads(run(*plan).stdout)
    check(decode["target"] == "host" and decode["policy"] == [1] * 6 and "gpu" not in decode["memory"],
          f"hetc plan --target host: {decode['target']}, {decode['policy']}, {decode['memory']}")
    check(decode["predicted_ms"] > 0, "no prediction on the calibrated host")
    print(f"OK: calibrated host: {figures['cpu.amx_bf16_tflops']['value']} TFLOPS, "
          f"{figures['ddr.read_gbs']['value']} GB/s; decode of llama-3-8b at 4 x 256 predicted "
          f"{decode['predicted_ms']:.1f} ms")


if __name__ == "__main__":
    main()
