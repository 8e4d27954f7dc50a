#!/usr/bin/python3
"""A Llama decoder in the merged form Hugging Face Optimum writes (`decoder_model_merged.onnx`:
Optimum 1.8 to 1.13's text-generation-with-past export, and the form of many transformers.js
models), on the same seeded weights as hf_llama.py's module.

    /usr/bin/python3 models/exports/optimum_merged.py --out DIR [hf_llama.py's size and variant flags]
    /usr/bin/python3 models/exports/hf_llama.py reference --model-dir DIR --out ref.json ...

Written after optimum.onnx.merge_decoders (graph_transformations.py): two exports of one module,
the decoder without past key/values (`decoder_model.onnx`: input_ids, attention_mask,
position_ids; logits and present.* out) and the decoder with them
(`decoder_with_past_model.onnx`, hf_llama.py's own export), merged into one graph
(`model.onnx`) whose only node is

    If(use_cache_branch, then_branch = the decoder with past, else_branch = the decoder without)

over a new input `use_cache_branch: bool[1]`. The graph's inputs are the decoder-with-past's
plus use_cache_branch, its outputs logits and present.*; the branches take no inputs and read
the graph's inputs and initializers directly. Initializers equal in both exports (same type,
shape and bytes) are stored once under the with-past export's name and the other branch's
nodes renamed to it, as Optimum deduplicates them; the two branches keep the node and value
names torch gave them, the same in both (sibling subgraphs may repeat names). A caller passes
use_cache_branch = false on the first step (empty past) and true after, as Optimum's
ORTModelForCausalLM does.
"""

import argparse
import os
import sys
import warnings

import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import hf_llama  # noqa: E402


def export_without_past(model, config, path):
    """The decoder without past key/values: the module's forward with past_key_values=None."""
    inputs, outputs = common.io_names(config.num_hidden_layers)
    inputs = [n for n in inputs if not n.startswith("past_key_values")]
    axes = {k: v for k, v in common.dynamic_axes(config.num_hidden_layers).items()
            if not k.startswith("past_key_values")}
    for name in outputs:
        if name.startswith("present"):
            axes[name] = {0: "batch", 2: "sequence"}
    axes["attention_mask"] = {0: "batch", 1: "sequence"}
    gen = torch.Generator().manual_seed(1234)
    batch, seq = 2, 3
    args = (torch.randint(0, config.vocab_size, (batch, seq), generator=gen),
            torch.ones(batch, seq, dtype=torch.int64),
            torch.arange(seq).unsqueeze(0).expand(batch, seq).contiguous())
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, input_names=inputs, output_names=outputs,
                          dynamic_axes=axes, opset_version=17, do_constant_folding=True)


def tensor_key(t):
    return (t.data_type, tuple(t.dims), numpy_helper.to_array(t).tobytes())


def merge(decoder, with_past):
    """Optimum's merge_decoders: If(use_cache_branch, with_past, decoder), initializers shared."""
    stored = {tensor_key(t): t.name for t in with_past.graph.initializer}
    taken = {t.name for t in with_past.graph.initializer}
    rename, extra = {}, []
    for t in decoder.graph.initializer:
        same = stored.get(tensor_key(t))
        if same is not None:
            rename[t.name] = same
            continue
        kept = onnx.TensorProto()
        kept.CopyFrom(t)
        if kept.name in taken:
            kept.name = t.name + "_no_past"
            rename[t.name] = kept.name
        taken.add(kept.name)
        extra.append(kept)
    no_past_nodes = []
    for node in decoder.graph.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for i, name in enumerate(copy.input):
            copy.input[i] = rename.get(name, name)
        no_past_nodes.append(copy)
    with_past_branch = helper.make_graph(list(with_past.graph.node), "with_past", [],
                                         list(with_past.graph.output))
    no_past_branch = helper.make_graph(no_past_nodes, "no_past", [], list(decoder.graph.output))
    outputs = [o.name for o in with_past.graph.output]
    if outputs != [o.name for o in decoder.graph.output]:
        raise ValueError("the two exports' outputs differ")
    if_node = helper.make_node("If", ["use_cache_branch"], outputs, name="optimum::if",
                               then_branch=with_past_branch, else_branch=no_past_branch)
    inputs = list(with_past.graph.input) + [
        helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])]
    graph = helper.make_graph([if_node], "merged", inputs, list(with_past.graph.output),
                              list(with_past.graph.initializer) + extra)
    merged = helper.make_model(graph, opset_imports=list(with_past.opset_import))
    merged.ir_version = with_past.ir_version
    return merged


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory")
    hf_llama.add_config_args(p)
    a = p.parse_args(argv)
    try:
        config = hf_llama.config_from_args(a)
    except ValueError as err:
        p.error(str(err))
    merged_path = hf_llama.export(config, a.out)
    with_past_path = os.path.join(a.out, "decoder_with_past_model.onnx")
    os.replace(merged_path, with_past_path)
    model = hf_llama.load_model(a.out)
    no_past_path = os.path.join(a.out, "decoder_model.onnx")
    export_without_past(model, model.config, no_past_path)
    merged = merge(onnx.load(no_past_path), onnx.load(with_past_path))
    onnx.checker.check_model(merged)
    onnx.save(merged, merged_path)
    shared = len(merged.graph.initializer)
    print(f"wrote {merged_path} (If over use_cache_branch, {shared} initializers), "
          f"{os.path.basename(no_past_path)}, {os.path.basename(with_past_path)}, config.json, "
          "weights.pt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
