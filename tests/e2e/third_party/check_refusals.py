#!/usr/bin/python3
"""hetc compile on ONNX files other tools wrote that are not decoders hetc runs: each must be
refused with exit 1 and one error line that says what the file is, and leave no plan.

    /usr/bin/python3 tests/e2e/third_party/check_refusals.py --hetc BUILD/bin/hetc --workdir DIR

The files are ONNX Runtime GenAI's own test models (ort-genai-test-stubs/, provenance in this
folder's README): stubs whose outputs are constants, the text decoders and embedding model of
multimodal models, a hybrid of linear attention and attention, an encoder-decoder's decoders and
a paged-cache decoder over packed tokens; and two of ONNX Runtime's transformer tests
(ort-transformers-test-data/): a GPT-2 without its language-model head and Megatron's GPT-2,
whose 4-D attention mask the caller builds. Each expected phrase names the trait the signature
shows, so a refusal that moved downstream of it (a node that happens to fail first) fails here.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from e2e_common import CheckFailed, check_hetc_binary, main_wrapper  # noqa: E402

STUB = "a test stub: its outputs logits ["
STUB_EMBEDDING = "a test stub: its outputs inputs_embeds ["
MULTIMODAL_TEXT = "the text decoder of a multimodal model: it takes inputs_embeds ["
# path under ort-genai-test-stubs/ -> phrases the one error line must hold
GENAI_STUBS = {
    "engine/dummy-decoder/decoder.onnx": [STUB],
    "engine/synthetic-paged/decoder.onnx": [
        "a decoder over a paged KV cache with its tokens packed (cumulative_sequence_lengths"],
    "marian-batch-beams/decoder.onnx": [
        "the decoder of an encoder-decoder model (encoder outputs or cross-attention inputs: "
        "encoder_hidden_states [4, 3, 512] FLOAT", "recurrent (state inputs: rnn_states_prev"],
    "multimodal-decoder-no-input-ids/dummy_text.onnx": [MULTIMODAL_TEXT, "instead of token ids"],
    "multimodal-decoder-with-input-ids/dummy_text.onnx": [MULTIMODAL_TEXT, "beside its token ids"],
    "phi3-v/dummy_text.onnx": [STUB, MULTIMODAL_TEXT + "batch_size, sequence_length, 3072]"],
    "qwen2-5-vl/dummy_text.onnx": [STUB, MULTIMODAL_TEXT],
    "qwen2-5-vl/dummy_embedding.onnx": [
        STUB_EMBEDDING, "the embedding model of a multimodal model: it writes inputs_embeds ["],
    "qwen3-5/dummy_text.onnx": [
        MULTIMODAL_TEXT, "a hybrid of attention and convolution or state-space layers (state "
        "inputs beside its KV cache: past_key_values.0.conv_state"],
    "whisper/dummy_decoder.onnx": [
        STUB, "the decoder of an encoder-decoder model (encoder outputs or cross-attention "
        "inputs: past_key_cross_0"],
}
# path under this folder -> phrases
EXPECTED = {os.path.join("ort-genai-test-stubs", name): phrases
            for name, phrases in GENAI_STUBS.items()}
EXPECTED.update({
    "ort-transformers-test-data/gpt2_past.onnx": [
        "is not a decoder LLM with a KV cache: it looks like a decoder without its language-model "
        "head (it writes last_state [batch_size, seq_len_plus_1, 4] FLOAT, a hidden state, and "
        "no logits", "... (13 in all)"],
    "ort-transformers-test-data/gpt2_megatron.onnx": [
        "is not a decoder hetc runs: it takes its attention mask as attention_mask [batch_size, "
        "1, 64, 64] FLOAT, a mask over query and key positions that the caller builds"],
})


def check(a):
    check_hetc_binary(a.hetc)
    os.makedirs(a.workdir, exist_ok=True)
    failures = []
    for name, phrases in EXPECTED.items():
        path = os.path.join(HERE, name)
        if not os.path.isfile(path):
            raise CheckFailed(f"missing test file {path}")
        plan = os.path.join(a.workdir, name.replace("/", "_") + ".hplan")
        if os.path.exists(plan):
            os.remove(plan)
        proc = subprocess.run([a.hetc, "compile", path, "--target", "host", "-o", plan],
                              capture_output=True, text=True, timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        missing = [p for p in phrases if not lines or p not in lines[0]]
        ok = (proc.returncode == 1 and len(lines) == 1 and not missing and
              "is not a decoder" in lines[0] and not os.path.exists(plan))
        print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {proc.returncode}: {proc.stderr.strip()}")
        if not ok:
            failures.append(name + (f" (missing {missing})" if missing else ""))
    if failures:
        raise CheckFailed(f"not refused with one line saying what the file is: {failures}")
    print(f"PASS: {len(EXPECTED)} files of ONNX Runtime's and ONNX Runtime GenAI's tests that are "
          "not decoders hetc runs are each refused with one line saying what they are")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hetc", required=True)
    p.add_argument("--workdir", required=True)
    a = p.parse_args(argv)
    return main_wrapper(lambda: check(a))


if __name__ == "__main__":
    sys.exit(main())
