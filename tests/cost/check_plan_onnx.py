#!/usr/bin/env python3
"""`hetc plan --model model.onnx`: the shape read from an export of models/ equals the config it
was exported from, and the plan is that of the same shape; a file that is not a model is refused
with one line."""

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
    parser.add_argument("--export", required=True, help="models/export.py")
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    for preset in ("tiny", "odd"):
        out = os.path.join(args.workdir, preset)
        subprocess.run([sys.executable, args.export, "--preset", preset, "--out", out],
                       check=True, capture_output=True)
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
        result = subprocess.run([args.hetc, "plan", "--model", os.path.join(out, "model.onnx"),
                                 "--target", "spr-a100", "--stage", "decode", "--batch", "4",
                                 "--len", "64", "--json"], capture_output=True, text=True)
        check(result.returncode == 0, f"{preset}: {result.stderr}")
        plan = json.loads(result.stdout)
        shape = plan["model_shape"]
        expected = {"layers": config["layers"], "hidden": config["hidden"],
                    "heads": config["heads"], "kv_heads": config["kv_heads"],
                    "head_dim": config["head_dim"], "ffn": config["intermediate"],
                    "vocab": config["vocab"], "tied_embeddings": config["tie_embeddings"],
                    "gated_ffn": True}
        for key, value in expected.items():
            check(shape[key] == value, f"{preset}: {key} = {shape[key]}, config says {value}")
        check(plan["model"] == "model" and len(plan["policy"]) == 6, f"{preset}: plan")
        check(sum(g["layers"] for g in plan["layer_groups"]) == config["layers"],
              f"{preset}: every layer planned")

    not_a_model = os.path.join(args.workdir, "not_a_model.onnx")
    with open(not_a_model, "wb") as f:
        f.write(b"\x00garbage")
    result = subprocess.run([args.hetc, "plan", "--model", not_a_model, "--target", "spr-a100"],
                            capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    check(result.returncode == 1 and result.stdout == "" and len(lines) == 1 and
          lines[0].startswith("hetc: error: ") and "not_a_model.onnx" in lines[0],
          f"garbage ONNX: exit {result.returncode}, stderr {result.stderr!r}")
    print("ok")


if __name__ == "__main__":
    main()
