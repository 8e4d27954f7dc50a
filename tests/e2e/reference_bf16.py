#!/usr/bin/python3
"""models/reference.py run in float32 on BF16 operands: what a plan compiled with --weights bf16
computes, so its check can be as strict as the float32 one.

    /usr/bin/python3 tests/e2e/reference_bf16.py [--round-inputs] [--round-kv] \
        <models/reference.py arguments>

Every nn.Linear weight of the model is rounded to bf16 (round to nearest even), and with it a tied
embedding table, which is what hetc compile --weights bf16 stores; the model then runs in float32
as usual. With --round-inputs every nn.Linear input is rounded to bf16 too: hetc's AVX-512 BF16
kernel converts activation rows to bf16 and sums the exact products of bf16 pairs in float32
(vdpbf16ps), where the portable kernel for hosts without it keeps float32 activations. With
--round-kv, K after RoPE and V are rounded to bf16 before attention reads them, as a plan with a
BF16 KV cache stores them (the new positions too: the attention reads them from the cache).
The model definition, the generation loop and the outputs are models/reference.py's own.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "models"))
import llama  # noqa: E402
import reference  # noqa: E402


def to_bf16_and_back(tensor):
    return tensor.to(torch.bfloat16).to(torch.float32)


def bf16_operands(load_model, round_inputs):
    def load(model_dir):
        model = load_model(model_dir)
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.weight.copy_(to_bf16_and_back(module.weight))
                    if round_inputs:
                        module.register_forward_pre_hook(
                            lambda _, inputs: (to_bf16_and_back(inputs[0]),) + tuple(inputs[1:]))
        return model
    return load


def round_kv_to_bf16():
    """K leaves apply_rotary_pos_emb and V leaves v_proj rounded to bf16."""
    rotary = llama.apply_rotary_pos_emb

    def rotary_rounding_k(q, k, cos, sin, *args, **kwargs):
        q_embed, k_embed = rotary(q, k, cos, sin, *args, **kwargs)
        return q_embed, to_bf16_and_back(k_embed)
    llama.apply_rotary_pos_emb = rotary_rounding_k

    load_model = reference.load_model

    def load(model_dir):
        model = load_model(model_dir)
        for name, module in model.named_modules():
            if name.endswith("v_proj"):
                module.register_forward_hook(lambda _, __, output: to_bf16_and_back(output))
        return model
    reference.load_model = load


def take_flag(argv, flag):
    present = flag in argv
    if present:
        argv.remove(flag)
    return present


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    round_inputs = take_flag(argv, "--round-inputs")
    if take_flag(argv, "--round-kv"):
        round_kv_to_bf16()
        # The full recompute computes K and V in other batch shapes: a float32 difference of an
        # ulp can cross a bf16 rounding step and move an element by one bf16 step (2^-8
        # relative), which shows in the logits at about 1e-3 of their largest magnitude.
        reference.SELF_CHECK_TOLERANCE = 5e-3
    reference.load_model = bf16_operands(reference.load_model, round_inputs)
    return reference.main(argv)


if __name__ == "__main__":
    sys.exit(main())
