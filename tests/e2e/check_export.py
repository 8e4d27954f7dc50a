#!/usr/bin/python3
"""The models/ side of the end-to-end checks, without hetc.

    /usr/bin/python3 tests/e2e/check_export.py --workdir DIR [--preset tiny --preset odd ...]

For each preset and each export form (constant folding on, off, and external data): exports,
checks the graph's inputs and outputs (names, dtypes, symbolic dimensions), runs the ONNX file
with models/onnx_eval.py against PyTorch at shapes other than the traced ones, and runs the
reference (whose self-check compares the KV-cache path with a full recompute).
"""

import argparse
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import MODELS, PROMPTS, CheckFailed, export, main_wrapper, reference  # noqa: E402

sys.path.insert(0, MODELS)
from llama import PRESETS  # noqa: E402
import onnx_eval  # noqa: E402

FORMS = {
    "folded": dict(no_constant_folding=False, external_data=False),
    "unfolded": dict(no_constant_folding=True, external_data=False),
    "external": dict(no_constant_folding=False, external_data=True),
}


def dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def check_interface(path, config, external):
    model = onnx.load(path, load_external_data=False)
    g = model.graph
    init = {t.name for t in g.initializer}
    inputs = {i.name: i for i in g.input if i.name not in init}
    outputs = {o.name: o for o in g.output}
    i64, f32 = onnx.TensorProto.INT64, onnx.TensorProto.FLOAT
    expected_in = {"input_ids": (i64, ["batch", "sequence"]),
                   "attention_mask": (i64, ["batch", "total_sequence"]),
                   "position_ids": (i64, ["batch", "sequence"])}
    expected_out = {"logits": (f32, ["batch", "sequence", config.vocab])}
    for i in range(config.layers):
        for kind in ("key", "value"):
            expected_in[f"past_key_values.{i}.{kind}"] = (f32, ["batch", config.kv_heads, "past_sequence", config.head_dim])
            expected_out[f"present.{i}.{kind}"] = (f32, ["batch", config.kv_heads, "total_sequence", config.head_dim])
    for what, got, expected in (("input", inputs, expected_in), ("output", outputs, expected_out)):
        if list(got) != list(expected):
            raise CheckFailed(f"{path}: {what}s are {list(got)}, expected {list(expected)}")
        for name, (dtype, shape) in expected.items():
            vi = got[name]
            if vi.type.tensor_type.elem_type != dtype or dims(vi) != shape:
                raise CheckFailed(f"{path}: {what} {name} is {vi.type.tensor_type.elem_type} {dims(vi)}, "
                                  f"expected {dtype} {shape}")
    has_external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in g.initializer)
    if has_external != external:
        raise CheckFailed(f"{path}: external data {'present' if has_external else 'absent'}, "
                          f"expected {'present' if external else 'absent'}")
    if external:
        locations = {e.value for t in g.initializer for e in t.external_data if e.key == "location"}
        if locations != {"model.onnx.data"}:
            raise CheckFailed(f"{path}: external data locations {sorted(locations)}, expected model.onnx.data")


def check(a):
    for preset in a.preset:
        config = PRESETS[preset]
        tokens = {}
        for form, opts in FORMS.items():
            out = os.path.join(a.workdir, f"{preset}-{form}")
            path = export(preset, out, **opts)
            check_interface(path, config, opts["external_data"])
            try:
                err = onnx_eval.verify_against_torch(out)
            except AssertionError as e:
                raise CheckFailed(f"{path} disagrees with PyTorch: {e}")
            print(f"ok   {preset} {form}: interface as expected; ONNX graph matches PyTorch "
                  f"(worst {err:.2e})", flush=True)
            tokens_txt, logits_npy = reference(out, PROMPTS, a.max_new, os.path.join(out, "torch"))
            with open(tokens_txt) as f:
                tokens[form] = f.read()
            logits = np.load(logits_npy)
            if logits.shape != (len(PROMPTS), a.max_new, config.vocab) or logits.dtype != np.float32:
                raise CheckFailed(f"{logits_npy}: {logits.dtype} {list(logits.shape)}, expected float32 "
                                  f"{[len(PROMPTS), a.max_new, config.vocab]}")
            distinct = len(set(tokens[form].split()))
            if distinct < a.max_new // 2:
                raise CheckFailed(f"{preset}: greedy decoding produced only {distinct} distinct ids; "
                                  f"the seeded weights are too flat to test anything")
        if len(set(tokens.values())) != 1:
            raise CheckFailed(f"{preset}: the export forms give different reference tokens (same seed)")
    print(f"PASS: presets {', '.join(a.preset)} export, evaluate and decode consistently", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", required=True)
    p.add_argument("--preset", action="append", choices=sorted(PRESETS))
    p.add_argument("--max-new", type=int, default=32)
    a = p.parse_args(argv)
    a.preset = a.preset or ["tiny", "odd"]
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
