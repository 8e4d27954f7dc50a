#!/usr/bin/python3
"""Exports a seeded Llama preset to ONNX (decoder with past), plus config.json and weights.pt.

    /usr/bin/python3 models/export.py --preset tiny --out DIR [--seed 0] [--no-constant-folding]
                                      [--opset 17] [--external-data] [--set FIELD=VALUE]
                                      [--print-ops]

Writes DIR/model.onnx (and DIR/model.onnx.data when the weights are stored as ONNX external
data: always for models over 2 GB, or when --external-data forces it), DIR/config.json and
DIR/weights.pt (the state_dict, so that reference.py rebuilds the exact model without ONNX).
"""

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
import warnings

import onnx
from onnx import numpy_helper
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama import PRESETS, LlamaConfig, build_model  # noqa: E402

EXTERNAL_DATA_NAME = "model.onnx.data"
# Tensors smaller than this stay inline in model.onnx even in external-data form (onnx's default).
EXTERNAL_DATA_THRESHOLD = 1024
EXTERNAL_DATA_ALIGNMENT = 64


def io_names(config: LlamaConfig):
    inputs = ["input_ids", "attention_mask", "position_ids"]
    outputs = ["logits"]
    for i in range(config.layers):
        inputs += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outputs += [f"present.{i}.key", f"present.{i}.value"]
    return inputs, outputs


def dynamic_axes(config: LlamaConfig):
    axes = {
        "input_ids": {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "total_sequence"},
        "position_ids": {0: "batch", 1: "sequence"},
        "logits": {0: "batch", 1: "sequence"},
    }
    for i in range(config.layers):
        for kind in ("key", "value"):
            axes[f"past_key_values.{i}.{kind}"] = {0: "batch", 2: "past_sequence"}
            axes[f"present.{i}.{kind}"] = {0: "batch", 2: "total_sequence"}
    return axes


def example_inputs(config: LlamaConfig, batch=2, seq=3, past=4):
    """Distinct batch, sequence and past lengths, so no dimension can be mistaken for another."""
    gen = torch.Generator().manual_seed(1234)
    input_ids = torch.randint(0, config.vocab, (batch, seq), generator=gen, dtype=torch.int64)
    attention_mask = torch.ones(batch, past + seq, dtype=torch.int64)
    position_ids = torch.arange(past, past + seq, dtype=torch.int64).unsqueeze(0).expand(batch, seq).contiguous()
    shape = (batch, config.kv_heads, past, config.head_dim)
    past_key_values = tuple((torch.randn(shape, generator=gen), torch.randn(shape, generator=gen))
                            for _ in range(config.layers))
    return input_ids, attention_mask, position_ids, past_key_values


def tensor_bytes(t: onnx.TensorProto) -> int:
    n = 1
    for d in t.dims:
        n *= d
    return n * onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type].itemsize


def summarize(path: str) -> str:
    model = onnx.load(path, load_external_data=False)
    g = model.graph
    nbytes = sum(tensor_bytes(t) for t in g.initializer)
    external = sum(1 for t in g.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    return (f"{path}: opset {model.opset_import[0].version}, {len(g.node)} nodes, "
            f"{len(g.initializer)} initializers ({external} external), {nbytes} bytes of weights")


def op_histogram(path: str):
    model = onnx.load(path, load_external_data=False)
    return collections.Counter(n.op_type for n in model.graph.node)


_TENSOR_DATA_FIELDS = ("raw_data", "float_data", "int32_data", "string_data", "int64_data",
                       "double_data", "uint64_data")


def write_with_external_data(src_onnx: str, dst_onnx: str) -> None:
    """Rewrites src_onnx (weights inline, or in per-tensor files next to it as torch.onnx.export
    writes them for models over 2 GB) as dst_onnx plus one EXTERNAL_DATA_NAME file next to it.

    Tensors are streamed one at a time, so memory stays at one tensor whatever the model size.
    Tensors under EXTERNAL_DATA_THRESHOLD bytes stay inline; each external tensor starts on a
    EXTERNAL_DATA_ALIGNMENT-byte boundary of the data file.
    """
    src_dir = os.path.dirname(os.path.abspath(src_onnx))
    proto = onnx.load(src_onnx, load_external_data=False)
    data_path = os.path.join(os.path.dirname(os.path.abspath(dst_onnx)), EXTERNAL_DATA_NAME)
    with open(data_path, "wb") as out:
        for t in proto.graph.initializer:
            nbytes = tensor_bytes(t)
            if t.data_location == onnx.TensorProto.EXTERNAL:
                info = {e.key: e.value for e in t.external_data}
                source = (os.path.join(src_dir, info["location"]), int(info.get("offset", 0)),
                          int(info.get("length", nbytes)))
            elif nbytes >= EXTERNAL_DATA_THRESHOLD:
                source = numpy_helper.to_array(t).tobytes()  # little-endian, as raw_data is
            else:
                continue
            pad = -out.tell() % EXTERNAL_DATA_ALIGNMENT
            out.write(b"\0" * pad)
            offset = out.tell()
            if isinstance(source, bytes):
                out.write(source)
            else:
                path, start, length = source
                with open(path, "rb") as f:
                    f.seek(start)
                    remaining = length
                    while remaining:
                        chunk = f.read(min(remaining, 64 << 20))
                        if not chunk:
                            raise RuntimeError(f"{path}: external data of {t.name} ends early")
                        out.write(chunk)
                        remaining -= len(chunk)
            length = out.tell() - offset
            if length != nbytes:
                raise RuntimeError(f"tensor {t.name}: wrote {length} bytes, expected {nbytes}")
            for field in _TENSOR_DATA_FIELDS:
                t.ClearField(field)
            del t.external_data[:]
            for key, value in (("location", EXTERNAL_DATA_NAME), ("offset", str(offset)),
                               ("length", str(length))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            t.data_location = onnx.TensorProto.EXTERNAL
    with open(dst_onnx, "wb") as f:
        f.write(proto.SerializeToString())


def export(config: LlamaConfig, out_dir: str, seed: int = 0, constant_folding: bool = True,
           opset: int = 17, external_data: bool = False, quiet: bool = True) -> str:
    os.makedirs(out_dir, exist_ok=True)
    onnx_path = os.path.join(out_dir, "model.onnx")
    data_path = os.path.join(out_dir, EXTERNAL_DATA_NAME)
    for stale in (onnx_path, data_path):
        if os.path.exists(stale):
            os.remove(stale)

    model = build_model(config, seed)
    config.save(os.path.join(out_dir, "config.json"))
    torch.save(model.state_dict(), os.path.join(out_dir, "weights.pt"))

    inputs, outputs = io_names(config)
    args = example_inputs(config)
    # The exporter decides on its own to write one file per tensor when the model exceeds the
    # protobuf limit; export into a scratch directory and consolidate from there.
    scratch = tempfile.mkdtemp(prefix="export-", dir=out_dir)
    try:
        scratch_onnx = os.path.join(scratch, "model.onnx")
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore")
            with torch.no_grad():
                torch.onnx.export(
                    model, args, scratch_onnx,
                    input_names=inputs, output_names=outputs, dynamic_axes=dynamic_axes(config),
                    opset_version=opset, do_constant_folding=constant_folding,
                    export_params=True)
        del model
        torch_wrote_external = len(os.listdir(scratch)) > 1
        if external_data or torch_wrote_external:
            write_with_external_data(scratch_onnx, onnx_path)
        else:
            shutil.move(scratch_onnx, onnx_path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    # Path-based check: works for external data and for models over 2 GB.
    onnx.checker.check_model(onnx_path)
    return onnx_path


def override(config: LlamaConfig, assignments) -> LlamaConfig:
    """The preset with FIELD=VALUE assignments applied (values parsed as the field's type)."""
    fields = config.to_dict()
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or key not in fields:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE with FIELD one of {sorted(fields)}")
        kind = type(fields[key])
        if kind is bool:
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"--set {item!r}: {key} takes true or false")
            fields[key] = value.lower() in ("true", "1")
        else:
            fields[key] = kind(value)
    return LlamaConfig.from_dict(fields)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", required=True, choices=sorted(PRESETS))
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-constant-folding", action="store_true",
                   help="export with do_constant_folding=False")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--external-data", action="store_true",
                   help=f"store weights in {EXTERNAL_DATA_NAME} even when the model is under 2 GB")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a field of the preset, e.g. --set layers=8 (any size, same seeding)")
    p.add_argument("--print-ops", action="store_true", help="print the ONNX op types with counts")
    p.add_argument("--verbose", action="store_true", help="show the exporter's warnings")
    a = p.parse_args(argv)

    try:
        config = override(PRESETS[a.preset], a.set)
    except ValueError as e:
        p.error(str(e))
    t0 = time.time()
    path = export(config, a.out, seed=a.seed, constant_folding=not a.no_constant_folding,
                  opset=a.opset, external_data=a.external_data, quiet=not a.verbose)
    print(f"{summarize(path)}; preset {a.preset}, seed {a.seed}, "
          f"constant folding {'off' if a.no_constant_folding else 'on'}, {time.time() - t0:.1f} s")
    if a.print_ops:
        for op, n in sorted(op_histogram(path).items()):
            print(f"  {op:<16} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
