// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128" -hetc-assign-devices=target=spr-h100 \
// RUN:   | FileCheck %s --check-prefix=H100
// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128" -hetc-assign-devices \
// RUN:   | FileCheck %s --check-prefix=HOST
// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128" -hetc-assign-devices=target=spr-cpu \
// RUN:   | FileCheck %s --check-prefix=CPU
// RUN: hetc-opt %S/Inputs/wide_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=600 max-seq=512 max-step-tokens=1024" \
// RUN:   -hetc-assign-devices="target=spr-a100 resident-layers=false" \
// RUN:   | FileCheck %s --check-prefix=A100-STREAMED
// RUN: hetc-opt %S/Inputs/wide_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=600 max-seq=512 max-step-tokens=1024" \
// RUN:   -hetc-assign-devices="target=spr-h100 resident-layers=false" \
// RUN:   | FileCheck %s --check-prefix=H100-STREAMED
// RUN: hetc-opt %S/Inputs/wide_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=600 max-seq=512 max-step-tokens=1024" \
// RUN:   -hetc-assign-devices="target=spr-a100" | FileCheck %s --check-prefix=A100-RESIDENT
// RUN: hetc-opt %S/Inputs/small_opt.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=16" -hetc-assign-devices=target=spr-h100 \
// RUN:   | FileCheck %s --check-prefix=OPT

// The tiny model on SPR-H100: both layers fit in GPU memory (LIA Optimization-1). Decode at 4
// sequences of 128 positions keeps attention on the CPU, where the KV cache is (DDR); prefill of
// one 128-token prompt runs every sublayer on the GPU. The policy table holds the resident
// layers' policy at each length: for decode, on the GPU up to L = 2, then on the CPU.
// H100-LABEL: module attributes
// H100-SAME: hetc.device_plan = {activation_tier = "ddr",
// H100-SAME: decode = {batch = 4 : i64, groups = [{first_layer = 0 : i64, {{[^]]*}}layers = 2 : i64, name = "gpu-resident", policy = "(0,1,1,0,0,0)"}], len = 128 : i64,
// H100-SAME: reason = "decode on spr-h100 at B=4, L=128: layers 0-1 resident on the GPU run partial CPU (0,1,1,0,0,0); predicted {{.*}} ms for the 2 layers (serial timing, LIA Eq. 1-9); at L=128: B 1-4 partial CPU (0,1,1,0,0,0)"
// H100-SAME: table = [{len = 1 : i64, ranges = [{first_batch = 1 : i64, last_batch = 4 : i64, policies = ["(0,0,0,0,0,0)"]}]}, {len = 2 : i64, ranges = [{first_batch = 1 : i64, last_batch = 4 : i64, policies = ["(0,0,0,0,0,0)"]}]}, {len = 4 : i64, ranges = [{first_batch = 1 : i64, last_batch = 4 : i64, policies = ["(0,1,1,0,0,0)"]}]}
// H100-SAME: {len = 128 : i64, ranges = [{first_batch = 1 : i64, last_batch = 4 : i64, policies = ["(0,1,1,0,0,0)"]}]}]}
// H100-SAME: gpu = "NVIDIA H100 80GB PCIe", kv_tier = "ddr", placement = "ddr",
// H100-SAME: prefill = {batch = 1 : i64, groups = [{{[^]]*}}name = "gpu-resident", policy = "(0,0,0,0,0,0)"}], len = 128 : i64,
// H100-SAME: resident_layers = 2 : i64, target = "spr-h100",
// H100-SAME: tier_reason = "weights, KV cache and activations in DDR (placement auto); all 2 layers keep their weights in GPU memory (LIA Optimization-1); decode at B=4, L=128 needs GPU {{.*}}", timing = "serial", weight_tier = "ddr"}
// The embedding table stays in host memory, the layers' weights are kept on the GPU, and so is
// RoPE's inv_freq, which the resident layers read.
// H100: hetc.weight "model.embed_tokens.weight" {hetc.tier = "ddr"}
// H100: hetc.constant {{.*}} {hetc.tier = "gpu"}
// H100: hetc.embedding {{.*}}hetc.device = {decode = "cpu", prefill = "cpu"}}
// H100: hetc.weight "model.layers.0.input_layernorm.weight" {hetc.tier = "gpu"}
// H100: hetc.weight "model.layers.0.mlp.down_proj.weight" {hetc.tier = "gpu", transposed}
// Each op takes the device of the sublayer it computes; attention (QK and SV) splits by stage.
// H100: hetc.rms_norm {{.*}}hetc.cost_sublayer = "qkv", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100-COUNT-3: hetc.linear {{.*}}hetc.cost_sublayer = "qkv", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100-COUNT-2: hetc.rope {{.*}}hetc.cost_sublayer = "qkv", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100: hetc.attention {{.*}}hetc.cost_sublayer = "qk_sv", hetc.device = {decode = "cpu", prefill = "gpu"}, hetc.layer = 0
// H100: hetc.linear {{.*}}hetc.cost_sublayer = "out", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100: hetc.add {{.*}}hetc.cost_sublayer = "out", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100: hetc.rms_norm {{.*}}hetc.cost_sublayer = "fc1", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100-COUNT-2: hetc.linear {{.*}}hetc.cost_sublayer = "fc1", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100: hetc.swiglu {{.*}}hetc.cost_sublayer = "fc1", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100: hetc.linear {{.*}}hetc.cost_sublayer = "fc2", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100: hetc.add {{.*}}hetc.cost_sublayer = "fc2", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100: hetc.attention {{.*}}hetc.cost_sublayer = "qk_sv", hetc.device = {decode = "cpu", prefill = "gpu"}, hetc.layer = 1
// The final norm and lm_head, which the cost model does not time, stay on the CPU, their weights
// in DDR.
// H100: hetc.weight "model.norm.weight" {hetc.tier = "ddr"}
// H100: hetc.weight "lm_head.weight" {hetc.tier = "ddr", transposed}
// H100: hetc.rms_norm {{.*}}hetc.device = {decode = "cpu", prefill = "cpu"}}
// H100: hetc.lm_head {{.*}}hetc.device = {decode = "cpu", prefill = "cpu"}}

// The host (the default target): this machine's CPU alone, nothing to predict.
// HOST: hetc.device_plan = {activation_tier = "ddr", decode = {batch = 4 : i64, groups = [{first_layer = 0 : i64, layer_ms = 0.000000e+00 : f64, layers = 2 : i64, name = "cpu-only", policy = "(1,1,1,1,1,1)"}], len = 128 : i64, predicted_ms = 0.000000e+00 : f64,
// HOST-SAME: reason = "decode on host at B=4, L=128: layers 0-1 on this machine's CPU run all CPU (1,1,1,1,1,1) (a CPU-only target: nothing to choose, no cost model run)", table = [{len = 1 : i64, ranges = [{first_batch = 1 : i64, last_batch = 4 : i64, policies = ["(1,1,1,1,1,1)"]}]}]}
// HOST-SAME: gpu = "", kv_tier = "ddr"
// HOST-SAME: target = "host"
// HOST-NOT: "gpu"
// HOST: hetc.weight "model.embed_tokens.weight" {hetc.tier = "ddr"}
// HOST-NOT: "gpu"
// HOST: hetc.attention {{.*}}hetc.cost_sublayer = "qk_sv", hetc.device = {decode = "cpu", prefill = "cpu"}
// HOST-NOT: "gpu"

// A CPU-only target file: the cost model runs (and predicts), and every sublayer is on the CPU.
// CPU: decode = {batch = 4 : i64, groups = [{{[^]]*}}name = "streamed", policy = "(1,1,1,1,1,1)"}]
// CPU-SAME: reason = "decode on spr-cpu at B=4, L=128: layers 0-1 in DDR run all CPU (1,1,1,1,1,1); predicted
// CPU-SAME: gpu = ""
// CPU-SAME: tier_reason = "weights, KV cache and activations in DDR (placement auto); spr-cpu has no GPU;
// CPU-NOT: "gpu"
// CPU: hetc.linear {{.*}}hetc.cost_sublayer = "qkv", hetc.device = {decode = "cpu", prefill = "cpu"}
// CPU-NOT: "gpu"

// OPT-175B's widths with every layer streamed (no Optimization-1), 600 sequences of 512
// positions: on SPR-A100 decode stays on the CPU below B ~ 850 (LIA 7.1), so here entirely;
// prefill of one 512-token prompt too (the switch is near B x L ~ 850).
// A100-STREAMED: decode = {batch = 600 : i64, groups = [{{[^]]*}}name = "streamed", policy = "(1,1,1,1,1,1)"}], len = 512 : i64
// A100-STREAMED-SAME: at L=512: B 1-600 all CPU (1,1,1,1,1,1)"
// A100-STREAMED-SAME: prefill = {batch = 1 : i64, groups = [{{[^]]*}}name = "streamed", policy = "(1,1,1,1,1,1)"}], len = 512 : i64
// A100-STREAMED-SAME: at L=512: B 1 all CPU (1,1,1,1,1,1), B 2-600 all GPU (0,0,0,0,0,0)"
// A100-STREAMED-SAME: tier_reason = "weights, KV cache and activations in DDR (placement auto); no layer resident in GPU memory (Optimization-1 off); weights stream over PCIe
// A100-STREAMED: hetc.weight "model.layers.0.self_attn.q_proj.weight" {hetc.tier = "ddr", transposed}
// A100-STREAMED: hetc.linear {{.*}}hetc.cost_sublayer = "qkv", hetc.device = {decode = "cpu", prefill = "cpu"}, hetc.layer = 0
// A100-STREAMED: hetc.attention {{.*}}hetc.device = {decode = "cpu", prefill = "cpu"}, hetc.layer = 0
// A100-STREAMED: hetc.linear {{.*}}hetc.cost_sublayer = "fc2", hetc.device = {decode = "cpu", prefill = "cpu"}, hetc.layer = 0

// The same on SPR-H100: its decode switch is at B = 358 (the README's table), so 600 sequences
// run LIA's partial CPU offloading, projections and feed-forward on the GPU, attention on the CPU;
// prefill takes the GPU from the first prompt.
// H100-STREAMED: decode = {batch = 600 : i64, groups = [{{[^]]*}}name = "streamed", policy = "(0,1,1,0,0,0)"}], len = 512 : i64
// H100-STREAMED-SAME: reason = "decode on spr-h100 at B=600, L=512: layers 0-1 streamed from DDR run partial CPU (0,1,1,0,0,0); predicted {{.*}}; at L=512: B 1-355 all CPU (1,1,1,1,1,1), B 356-357 (1,1,1,0,0,0), B 358-600 partial CPU (0,1,1,0,0,0)"
// H100-STREAMED-SAME: prefill = {batch = 1 : i64, groups = [{{[^]]*}}name = "streamed", policy = "(0,0,0,0,0,0)"}]
// H100-STREAMED: hetc.weight "model.layers.0.self_attn.q_proj.weight" {hetc.tier = "ddr", transposed}
// H100-STREAMED: hetc.rms_norm {{.*}}hetc.cost_sublayer = "qkv", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100-STREAMED: hetc.attention {{.*}}hetc.cost_sublayer = "qk_sv", hetc.device = {decode = "cpu", prefill = "gpu"}, hetc.layer = 0
// H100-STREAMED: hetc.linear {{.*}}hetc.cost_sublayer = "out", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0
// H100-STREAMED: hetc.linear {{.*}}hetc.cost_sublayer = "fc2", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 0

// With Optimization-1 the two wide layers (9 GiB of weights) fit in the A100's memory: resident,
// their projections on the GPU at 600 sequences, attention beside the KV cache in DDR.
// A100-RESIDENT: decode = {batch = 600 : i64, groups = [{{[^]]*}}name = "gpu-resident", policy = "(0,1,1,0,0,0)"}]
// A100-RESIDENT-SAME: resident_layers = 2 : i64
// A100-RESIDENT: hetc.weight "model.layers.1.mlp.up_proj.weight" {hetc.tier = "gpu", transposed}
// A100-RESIDENT: hetc.linear {{.*}}hetc.cost_sublayer = "fc1", hetc.device = {decode = "gpu", prefill = "gpu"}, hetc.layer = 1

// An OPT-style feed-forward: the layer norm, fc1 and the activation are FC1, fc2 (reading the
// activation) and the residual add FC2; the attention sublayer's layer norm is QKV.
// OPT: hetc.layer_norm {{.*}}hetc.cost_sublayer = "qkv"
// OPT: hetc.attention {{.*}}hetc.cost_sublayer = "qk_sv"
// OPT: hetc.layer_norm {{.*}}hetc.cost_sublayer = "fc1"
// OPT: hetc.linear {{.*}}hetc.cost_sublayer = "fc1"
// OPT: hetc.activation {{.*}}hetc.cost_sublayer = "fc1"
// OPT: hetc.linear {{.*}}hetc.cost_sublayer = "fc2"
// OPT: hetc.add {{.*}}hetc.cost_sublayer = "fc2"
