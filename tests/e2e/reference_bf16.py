#!/usr/bin/python3
"""models/reference.py run in float32 on BF16 operands: what a plan compiled with --weights bf16
computes, so its check can be as strict as the float32 one.

    /usr/bin/python3 tests/e2e/reference_bf16.py [--round-inputs] [--round-kv | --quantize-kv-int8] \
        [--f32-weights | --int8-weights | --int4-weights GROUP [--int4-symmetric]] \
        [--lm-head int8|int4] \
        <models/reference.py arguments>

Every nn.Linear weight of the model is rounded to bf16 (round to nearest even), and with it a tied
embedding table, which is what hetc compile --weights bf16 stores; the model then runs in float32
as usual. With --round-inputs every nn.Linear input is rounded to bf16 too: hetc's AVX-512 BF16
kernel converts activation rows to bf16 and sums the exact products of bf16 pairs in float32
(vdpbf16ps), where the portable kernel for hosts without it keeps float32 activations. With
--round-kv, K after RoPE and V are rounded to bf16 before attention reads them, as a plan with a
BF16 KV cache stores them (the new positions too: the attention reads them from the cache), and
the attention takes its operands as that plan's kernels do (vdpbf16ps on the cache's blocks): the
query rounded to bf16, and each weight exp(score - max) rounded to bf16 before it multiplies its
value row, the weights divided by the sum of the rounded ones. (The kernels subtract a running
max, so a weight may round from another exponent: the same size of error, not the same bits.)
With --quantize-kv-int8 they are quantised instead as a plan with an INT8 KV cache stores them:
each head's row of head_dim values x becomes round_half_even(x / s) * s with s = max|x| / 127
in float32 (a zero row stays zero), and the query and the weights are quantized as the plan's
int8 kernels quantize them for their integer products (int16_query, attention_of_int8_blocks).
--f32-weights leaves the weights in float32, for a plan
compiled with --weights f32: then only the KV cache's operands differ from models/reference.py.
--int8-weights is a plan compiled with --weights int8: each linear of the layers takes its weight
and its input rows quantized as hetc quantizes them (int8_as_hetc; the integer dot products are
exact in the plan), the lm_head bf16 weights (and inputs with --round-inputs). --int4-weights
GROUP is --weights int4 --group-size GROUP: the same with the weights in 4 bits (int4_as_hetc).
Those two run in float64, the rows still quantized from float32 values as hetc quantizes them: a
float32 model puts a row element on the other side of a rounding tie, one int8 step away, as
often as hetc does, and where each does depends on which of torch's CPU kernels ran (its AVX2
and AVX-512 float32 kernels sum in other orders); in float64 the reference is the same on every
host and hetc differs from it only where its own float32 rounding crosses a tie.
With either, --lm-head int8|int4 is hetc compile --lm-head: the lm_head's weight (and a tied
embedding table, the same tensor) and rows quantized as the layers' are (int4 in GROUP's groups).
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
    return tensor.to(torch.bfloat16).to(tensor.dtype)


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


def int8_as_hetc(rows):
    """Symmetric int8 of each row along the last dimension as hetc quantizes linear weights (per
    output column) and activation rows: q = round_half_even(x * (127 / max|x|)), in float32, and
    back as q * (max|x| / 127). A zero row stays zero."""
    dtype, rows = rows.dtype, rows.float()  # hetc rounds in float32
    largest = rows.abs().amax(dim=-1, keepdim=True)
    safe = torch.where(largest > 0, largest, torch.ones_like(largest))
    q = torch.round(rows * (127.0 / safe)).clamp(-127, 127)
    back = q.double() * (largest / 127.0).double()  # exact, as hetc's integer dot times the scale
    return torch.where(largest > 0, back, torch.zeros_like(back)).to(dtype)


def int4_as_hetc(weight, group, symmetric=False):
    """A [N, K] weight in 4 bits as hetc compile --weights int4 stores it, and back: per output row
    and group of `group` k, lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / 15,
    zp = clamp(round(-lo / scale), 0, 15), u = clamp(round(w / scale) + zp, 0, 15), each step in
    float32, rounding half to even; w ~ scale * (u - zp). With `symmetric` (--int4-symmetric),
    scale = max |w| / 7 and zp = 8. A group with scale 0 stays zero."""
    n, k = weight.shape
    padded = (k + group - 1) // group * group
    w = torch.zeros(n, padded, dtype=torch.float32)
    w[:, :k] = weight
    w = w.reshape(n, -1, group)
    valid = torch.zeros(n, padded, dtype=torch.bool)
    valid[:, :k] = True
    valid = valid.reshape(n, -1, group)
    big = torch.finfo(torch.float32).max
    lo = torch.minimum(torch.where(valid, w, torch.full_like(w, big)).amin(dim=-1), torch.zeros(1))
    hi = torch.maximum(torch.where(valid, w, torch.full_like(w, -big)).amax(dim=-1), torch.zeros(1))
    if symmetric:
        scale = torch.maximum(hi, -lo) / 7.0
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        zp = torch.full_like(scale, 8.0)
    else:
        scale = (hi - lo) / 15.0
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        zp = torch.round(-lo / safe).clamp(0, 15)
    u = (torch.round(w / safe.unsqueeze(-1)) + zp.unsqueeze(-1)).clamp(0, 15)
    back = torch.where(scale.unsqueeze(-1) > 0,
                       (u - zp.unsqueeze(-1)).double() * scale.unsqueeze(-1).double(),
                       torch.zeros(w.shape, dtype=torch.float64))
    return back.reshape(n, padded)[:, :k]


def int8_operands(load_model, round_head_inputs, int4_group=None, int4_symmetric=False,
                  lm_head=None):
    """A plan compiled with --weights int8: every linear but the lm_head takes int8 weights (a
    scale per output column) and int8 activation rows (a scale per row); the lm_head takes bf16
    weights (and with them a tied embedding table) and, with round_head_inputs, bf16 rows. With
    int4_group, --weights int4: the weights in 4 bits (int4_as_hetc), the rows in int8 alike. With
    lm_head "int8" or "int4" (--lm-head), the lm_head's weight (and a tied table) and rows are
    quantized as the layers' are. The model runs in float64 (the module's docstring says why)."""
    def load(model_dir):
        model = load_model(model_dir).double()
        with torch.no_grad():
            for module in model.modules():
                if not isinstance(module, torch.nn.Linear):
                    continue
                if module is model.lm_head and lm_head is not None:
                    module.weight.copy_(int8_as_hetc(module.weight) if lm_head == "int8"
                                        else int4_as_hetc(module.weight, int4_group or 32,
                                                          int4_symmetric))
                    module.register_forward_pre_hook(
                        lambda _, inputs: (int8_as_hetc(inputs[0]),) + tuple(inputs[1:]))
                    continue
                if module is model.lm_head:
                    module.weight.copy_(to_bf16_and_back(module.weight))
                    if round_head_inputs:
                        module.register_forward_pre_hook(
                            lambda _, inputs: (to_bf16_and_back(inputs[0]),) + tuple(inputs[1:]))
                    continue
                module.weight.copy_(int8_as_hetc(module.weight) if int4_group is None
                                    else int4_as_hetc(module.weight, int4_group, int4_symmetric))
                module.register_forward_pre_hook(
                    lambda _, inputs: (int8_as_hetc(inputs[0]),) + tuple(inputs[1:]))
        return model
    return load


def int8_and_back(rows):
    """Symmetric int8 of each row along the last dimension, as the runtime's quantizeInt8: scale
    max|x| / 127 and x / scale rounded half to even (torch.round), both in float32."""
    scale = rows.abs().amax(dim=-1, keepdim=True) / 127.0
    quotient = torch.where(scale > 0, rows / scale, torch.zeros_like(rows))
    return torch.round(quotient).clamp(-127, 127) * scale


def store_kv_as(cache_element, query_element=lambda q: q):
    """K leaves apply_rotary_pos_emb and V leaves v_proj as `cache_element` stores each head's
    row of head_dim values; the query leaves it as `query_element`."""
    rotary = llama.apply_rotary_pos_emb

    def rotary_storing_k(q, k, cos, sin, *args, **kwargs):
        q_embed, k_embed = rotary(q, k, cos, sin, *args, **kwargs)
        # [batch, heads or kv_heads, positions, head_dim]
        return query_element(q_embed), cache_element(k_embed)
    llama.apply_rotary_pos_emb = rotary_storing_k

    load_model = reference.load_model

    def load(model_dir):
        model = load_model(model_dir)
        for module in model.modules():
            if hasattr(module, "v_proj") and hasattr(module, "head_dim"):
                def store_rows(_, __, output, head_dim=module.head_dim):
                    rows = output.reshape(*output.shape[:-1], -1, head_dim)
                    return cache_element(rows).reshape(output.shape)
                module.v_proj.register_forward_hook(store_rows)
        return model
    reference.load_model = load


def softmax_of_bf16_weights():
    """The attention's softmax (the model's only one) with each weight exp(score - max) rounded
    to bf16 and divided by the sum of the rounded weights."""
    def softmax(scores, dim=-1, dtype=None):
        scores = scores.to(dtype or scores.dtype)
        weights = to_bf16_and_back(torch.exp(scores - scores.amax(dim=dim, keepdim=True)))
        return weights / weights.sum(dim=dim, keepdim=True)
    torch.nn.functional.softmax = softmax


def power_of_two(exponent):
    """2^exponent in float64, exact for the exponents here."""
    return torch.pow(torch.tensor(2.0, dtype=torch.float64), exponent.to(torch.float64))


def int16_query(q):
    """Each head's query row as a plan's int8 kernels take it (quantizeAttentionQuery): with
    e = floor(log2(max(max|q|, FLT_MIN))), q' = round_half_even(q * 2^(14 - e)) (2^15 kept as
    32767), and the row read back as q' * 2^(e - 14)."""
    largest = q.abs().amax(dim=-1, keepdim=True).clamp(min=torch.finfo(torch.float32).tiny)
    exponent = torch.frexp(largest).exponent - 1
    words = torch.round(q.to(torch.float64) * power_of_two(14 - exponent)).clamp(max=32767)
    return (words * power_of_two(exponent - 14)).to(q.dtype)


def attention_of_int8_blocks():
    """The attention's weights and values as a plan's int8 block kernels combine them (Attention.h):
    the sum that divides adds the weights w = exp(score - max) as they are, while the weights that
    multiply the value rows are quantized per block of 16 KV positions: x = w * s_v, s_v the row's
    V scale, e = floor(log2(max(max of the block's x, 2^-112))), u = round_half_even(x *
    2^(14 - e)) (2^15 kept as 32767), and the block adds u * 2^(e - 14) times each row's int8
    elements. V reaches the product here dequantised (q * s_v), so the weight it takes is
    u * 2^(e - 14) / s_v; s_v comes back as max|row| / 127, since a quantised row's largest
    element is 127 * s_v. The softmax keeps its unrounded weights for the product that follows it
    (the model's only one after the softmax; q @ k^T comes before). The plan's weights are taken
    from a running max, which scales a block's x and its largest alike: the same size of error,
    not the same bits."""
    unrounded = []

    def softmax(scores, dim=-1, dtype=None):
        scores = scores.to(dtype or scores.dtype)
        weights = torch.exp(scores - scores.amax(dim=dim, keepdim=True))
        total = weights.sum(dim=dim, keepdim=True)
        unrounded.append((weights, total))
        return weights / total
    torch.nn.functional.softmax = softmax

    matmul = torch.matmul

    def weighted_values(a, b):
        if not unrounded:
            return matmul(a, b)
        weights, total = unrounded.pop()
        scale = (b.abs().amax(dim=-1) / 127).unsqueeze(-2)  # [..., 1, kv positions]
        kept = scale > 0
        scaled = weights * scale  # [..., query positions, kv positions]
        positions = scaled.shape[-1]
        padding = -positions % 16
        blocks = torch.nn.functional.pad(scaled, (0, padding)).unflatten(-1, (-1, 16))
        largest = blocks.amax(dim=-1, keepdim=True).clamp(min=2.0 ** -112)
        exponent = torch.frexp(largest).exponent - 1
        words = torch.round(blocks.to(torch.float64) * power_of_two(14 - exponent)).clamp(
            max=32767)
        quantized = (words * power_of_two(exponent - 14)).flatten(-2)[..., :positions]
        divisor = torch.where(kept, scale, torch.ones_like(scale)).to(torch.float64)
        taken = torch.where(kept, quantized / divisor, torch.zeros_like(quantized))
        return matmul(taken.to(b.dtype) / total, b)
    torch.matmul = weighted_values


def take_flag(argv, flag):
    present = flag in argv
    if present:
        argv.remove(flag)
    return present


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    round_inputs = take_flag(argv, "--round-inputs")
    f32_weights = take_flag(argv, "--f32-weights")
    int8_weights = take_flag(argv, "--int8-weights")
    int4_symmetric = take_flag(argv, "--int4-symmetric")
    int4_group = None
    lm_head = None
    if "--lm-head" in argv:
        at = argv.index("--lm-head")
        lm_head = argv[at + 1]
        del argv[at:at + 2]
    if "--int4-weights" in argv:
        at = argv.index("--int4-weights")
        int4_group = int(argv[at + 1])
        del argv[at:at + 2]
    if take_flag(argv, "--round-kv"):
        store_kv_as(to_bf16_and_back, to_bf16_and_back)
        softmax_of_bf16_weights()
        # The full recompute computes K and V in other batch shapes: a float32 difference of an
        # ulp can cross a bf16 rounding step and move an element by one bf16 step (2^-8
        # relative), which shows in the logits at about 1e-3 of their largest magnitude.
        reference.SELF_CHECK_TOLERANCE = 5e-3
    elif take_flag(argv, "--quantize-kv-int8"):
        # The int8 blocks are attended with integer products: the query in int16 per head row.
        store_kv_as(int8_and_back, int16_query)
        attention_of_int8_blocks()
        # Likewise, but one int8 step is 2^-8 of the row's largest element, not of the element.
        reference.SELF_CHECK_TOLERANCE = 2e-2
    if int8_weights or int4_group:
        torch.set_default_dtype(torch.float64)
        reference.load_model = int8_operands(reference.load_model, round_inputs, int4_group,
                                             int4_symmetric, lm_head)
    elif not f32_weights:
        reference.load_model = bf16_operands(reference.load_model, round_inputs)
    return reference.main(argv)


if __name__ == "__main__":
    sys.exit(main())
