#!/usr/bin/env python3
"""`hetc bench` on the unit tests' tiny plan: the JSON report is one well-formed object with the
documented keys, the profile adds up, the fill is labelled, and impossible options are refused
with one clear line. A sweep's points, skips, per-batch fits and SVG plot agree with each other and
with the plan. Nothing here checks how fast anything is."""

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

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


def close(a, b, what, tolerance=1e-6):
    check(abs(a - b) <= tolerance * max(1.0, abs(a), abs(b)), f"{what}: {a} != {b}")


def dtype_bytes(name):
    return {"F32": 4, "BF16": 2}[name]


def least_squares(points):
    """e, a of t = e + (p+1)/2 * a over (p, t) pairs minimising the squared relative residuals
    (weights 1/t^2), written out independently of hetc."""
    xs = [(p + 1) / 2 for p, _ in points]
    ts = [t for _, t in points]
    ws = [1 / t ** 2 for t in ts]
    sw = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs)) / sw
    mt = sum(w * t for w, t in zip(ws, ts)) / sw
    a = (sum(w * (x - mx) * (t - mt) for w, x, t in zip(ws, xs, ts)) /
         sum(w * (x - mx) ** 2 for w, x in zip(ws, xs)))
    return mt - a * mx, a


SVG = "{http://www.w3.org/2000/svg}"


def check_sweep(hetc, plan, workdir):
    kv = json.loads(subprocess.run([hetc, "inspect", plan, "--json"], capture_output=True,
                                   text=True, check=True).stdout)["kv_cache"]
    kv_per_position = 2 * kv["layers"] * kv["kv_heads"] * kv["head_dim"] * dtype_bytes(kv["dtype"])
    svg_path = os.path.join(workdir, "sweep.svg")
    gen = 4
    result = run(hetc, plan, "--json", *PROBE, "--contexts", "16,0,40,8", "--batches", "1,2,3",
                 "--gen", str(gen), "--threads", "2", "--plot", svg_path)
    check(result.returncode == 0, f"sweep failed: {result.stderr}")
    report = json.loads(result.stdout)
    for key in ["plan", "gen", "fill", "fill_descriptions", "kernels", "weight_dtypes", "kv_dtype",
                "bounds", "threads", "bandwidth", "latency_model", "points", "skipped", "fits"]:
        check(key in report, f"sweep: missing key {key}")
    check(report["kv_dtype"] == kv["dtype"], "kv_dtype is the plan's")

    # Progress: one line per point on stderr, after one line per skipped point.
    progress = [l for l in result.stderr.splitlines() if l.startswith("hetc: bench [")]
    skips = [l for l in result.stderr.splitlines() if l.startswith("hetc: bench: skipping")]
    check(len(progress) == 6 and all(f"/6]" in l and "ms/token" in l for l in progress),
          f"one progress line per point: {result.stderr}")
    check(len(skips) == 6, f"one line per skipped point: {result.stderr}")
    check("skipping batch 1, context 40: --context 40 + --gen 4 need 44 positions but the plan's "
          "--max-seq is 32" in result.stderr, "the reason for skipping context 40")
    check("skipping batch 3, context 0: --batch 3 exceeds the plan's --max-batch 2"
          in result.stderr, "the reason for skipping batch 3")
    check(sorted((s["batch"], s["context"]) for s in report["skipped"])
          == [(1, 40), (2, 40), (3, 0), (3, 8), (3, 16), (3, 40)], "skipped points in JSON")

    points = report["points"]
    check([(p["batch"], p["context"]) for p in points]
          == [(1, 0), (1, 8), (1, 16), (2, 0), (2, 8), (2, 16)], "points in batch-major order")
    for p in points:
        what = f"point batch {p['batch']} context {p['context']}"
        check(p["gen"] == gen, what + ": gen")
        close(p["average_context"], p["context"] + (gen + 1) / 2, what + ": average_context")
        close(p["p"], 2 * p["context"] + gen, what + ": p")
        close(p["kv_bytes_per_token"], kv_per_position * p["average_context"] * p["batch"],
              what + ": KV bytes from the plan's dtype")
        close(p["bytes_per_token"], p["weight_bytes_per_token"] + p["kv_bytes_per_token"],
              what + ": bytes")
        close(p["tokens_per_s"] * p["ms_per_token"] / 1000, p["batch"], what + ": tokens per step")
        close(p["achieved_read_gbs"], p["bytes_per_token"] / (p["ms_per_token"] / 1000) / 1e9,
              what + ": achieved GB/s")
        close(p["roofline_fraction"], p["achieved_read_gbs"] / p["measured_read_gbs"],
              what + ": roofline fraction")
        split = p["split"]
        close(split["fixed_ms"] + split["attention_ms"], p["ms_per_token"], what + ": split")
        check(split["attention_ms"] > 0 and split["fixed_ms"] > 0, what + ": both parts measured")
        close(split["attention_share"], split["attention_ms"] / p["ms_per_token"], what + ": share")
        close(split["attention_kv_gbs"],
              p["kv_bytes_per_token"] / (split["attention_ms"] / 1000) / 1e9, what + ": KV GB/s")
        close(split["attention_roofline_fraction"],
              split["attention_kv_gbs"] / p["measured_read_gbs"], what + ": attention fraction")
        close(split["fixed_weight_gbs"],
              p["weight_bytes_per_token"] / (split["fixed_ms"] / 1000) / 1e9, what + ": fixed GB/s")
        check(p["fill"] == "prefill", what + ": auto prefills short contexts")
        check("profile" not in p, what + ": no profile unless asked")
    measured = sorted(p["measured_read_gbs"] for p in points)
    close(report["bandwidth"]["max_gbs"], measured[-1], "bandwidth max")
    close(report["bandwidth"]["min_gbs"], measured[0], "bandwidth min")

    fits = report["fits"]
    check([f["batch"] for f in fits] == [1, 2], "one fit per batch")
    for fit in fits:
        mine = [(p["p"], p["ms_per_token"]) for p in points if p["batch"] == fit["batch"]]
        check(fit["points"] == len(mine) == len(fit["residuals"]), "fit point count")
        e, a = least_squares(mine)
        close(fit["e_ms"], e, f"batch {fit['batch']}: e", 1e-6)
        close(fit["a_ms_per_position"] * 1e3, a * 1e3, f"batch {fit['batch']}: a", 1e-5)
        worst = 0.0
        for (p, t), r in zip(mine, fit["residuals"]):
            fitted = fit["e_ms"] + (p + 1) / 2 * fit["a_ms_per_position"]
            close(r["measured_ms"], t, "residual's measured time")
            close(r["fitted_ms"], fitted, "residual's fitted time")
            close(r["relative_residual"], (t - fitted) / t, "relative residual")
            worst = max(worst, abs(r["relative_residual"]))
        close(fit["max_abs_relative_residual"], worst, "max relative residual")

    # The plot: well-formed SVG, one series per batch, one marker per point, one fitted line.
    root = ElementTree.parse(svg_path).getroot()
    check(root.tag == SVG + "svg", "the plot is an SVG document")
    series = [g for g in root.iter(SVG + "g") if g.get("class") == "series"]
    check(len(series) == 2, f"two series in the plot, got {len(series)}")
    for g in series:
        markers = [c for c in g.iter(SVG + "circle") if c.get("class") == "measured"]
        lines = [l for l in g.iter(SVG + "polyline") if l.get("class") == "fit"]
        check(len(markers) == 3 and len(lines) == 1, "three markers and a fitted line per series")
    texts = {t.get("class"): "".join(t.itertext()) for t in root.iter(SVG + "text")}
    check(os.path.basename(plan) in texts.get("title", ""), "the title names the plan")
    check(f"{report['bandwidth']['max_gbs']:.1f} GB/s" in texts.get("subtitle", ""),
          "the subtitle gives the measured bandwidth")
    ticks = [t for t in root.iter(SVG + "text") if t.get("class") == "tick"]
    check(len(ticks) >= 6, "axes have tick labels")

    # One context: no fit, said so; the plot still has the markers.
    single = run(hetc, plan, "--json", *PROBE, "--contexts", "8", "--batches", "1,2", "--gen", "2",
                 "--plot", svg_path)
    check(single.returncode == 0, f"one-context sweep failed: {single.stderr}")
    single_fits = json.loads(single.stdout)["fits"]
    check(all(f["error"] == "the latency fit needs at least two points, got 1"
              for f in single_fits) and len(single_fits) == 2, f"no fit from one point: {single_fits}")
    root = ElementTree.parse(svg_path).getroot()
    check(len([c for c in root.iter(SVG + "circle") if c.get("class") == "measured"]) == 2
          and not [l for l in root.iter(SVG + "polyline") if l.get("class") == "fit"],
          "markers and no fitted line without a fit")

    # Rounds: every point runs in each round and keeps its fastest run.
    rounds = run(hetc, plan, "--json", *PROBE, "--contexts", "0,8", "--gen", "2", "--rounds", "3")
    check(rounds.returncode == 0, f"sweep in rounds failed: {rounds.stderr}")
    rounds_report = json.loads(rounds.stdout)
    check(rounds_report["rounds"]["count"] == 3, f"rounds: {rounds_report['rounds']}")
    check(rounds.stderr.count("hetc: bench [") == 6, f"one progress line per run:\n{rounds.stderr}")
    for p in rounds_report["points"]:
        check(len(p["round_ms_per_token"]) == 3, f"three rounds of a point: {p['round_ms_per_token']}")
        close(p["ms_per_token"], min(p["round_ms_per_token"]), "a point keeps its fastest round")

    text = run(hetc, plan, *PROBE, "--contexts", "0,8", "--gen", "2")
    check(text.returncode == 0, f"text sweep failed: {text.stderr}")
    check("latency model t = e + (p+1)/2 * a" in text.stdout and "attn-GB/s" in text.stdout,
          "text sweep report sections")

    refusals = [
        (["--context", "8", "--contexts", "0,8"], "--context and --contexts: give one of them"),
        (["--batch", "1", "--batches", "1,2"], "--batch and --batches: give one of them"),
        (["--contexts", "30,40"], "no point of the sweep can run: --context 30 + --gen 16 need 46 "
         "positions but the plan's --max-seq is 32; --context 40 + --gen 16 need 56 positions but "
         "the plan's --max-seq is 32"),
        (["--contexts", "0,4k"], "--contexts '0,4k': '4k' is not a non-negative integer"),
        (["--contexts", "0", "--rounds", "0"], "--rounds: Value 0 not in range 1 to 100"),
        (["--contexts", "0,,8"], "--contexts '0,,8': an empty item"),
        (["--batches", "0,1"], "--batch must be at least 1"),
        (["--contexts", "0", "--plot", os.path.join(workdir, "missing", "x.svg")],
         f"cannot write --plot {os.path.join(workdir, 'missing', 'x.svg')}: No such file or "
         "directory"),
        (["--contexts", "0", "--compare-torch", workdir, "--python", "/nonexistent/python3"],
         "--compare-torch: cannot run the Python interpreter /nonexistent/python3 (--python): No "
         "such file or directory"),
        (["--contexts", "0", "--compare-torch", workdir, "--torch-script", "/nonexistent.py"],
         "--compare-torch: the PyTorch benchmark script /nonexistent.py does not exist "
         "(--torch-script names it)"),
        (["--contexts", "0", "--compare-torch", os.path.join(workdir, "nothing")],
         f"--compare-torch: {os.path.join(workdir, 'nothing')} is not a directory (the model "
         "directory models/export.py wrote)"),
    ]
    for extra, message in refusals:
        result = run(hetc, plan, "--json", *PROBE, *extra)
        check(result.returncode == 1, f"{extra} exits 1 (got {result.returncode})")
        check(result.stdout == "", f"{extra} prints nothing on stdout")
        check(result.stderr == f"hetc: error: {message}\n", f"{extra}: {result.stderr!r}")


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
    check("split" in report and "p" in report, "a single point reports its split and p too")
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
    check_sweep(args.hetc, plan, args.workdir)
    print("hetc bench: JSON, profile, fill labels, sweep, fits, plot and refusals as documented")


if __name__ == "__main__":
    main()
