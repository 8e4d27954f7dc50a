// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128 max-step-tokens=512" | FileCheck %s
// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=3 max-seq=1000 max-step-tokens=7" | FileCheck %s --check-prefix=BOUNDS
// RUN: hetc-opt %S/Inputs/small_tied.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=2 max-seq=16 max-step-tokens=5" | FileCheck %s --check-prefix=NARROW
// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128 kv-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=4 max-seq=128 kv-dtype=int8" | FileCheck %s --check-prefix=INT8
// RUN: hetc-opt %S/Inputs/small_tied.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=2 max-seq=15 max-step-tokens=5 kv-dtype=int8" \
// RUN:   | FileCheck %s --check-prefix=INT8-PADDED
// RUN: hetc-opt %S/Inputs/small_tied.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=2 max-seq=15 max-step-tokens=5 kv-dtype=bf16" \
// RUN:   | FileCheck %s --check-prefix=BF16-BLOCKS
// RUN: hetc-opt %S/Inputs/small_opt.mlir -hetc-group-sublayers \
// RUN:   -hetc-plan-memory="max-batch=2 max-seq=16 max-step-tokens=5" | FileCheck %s --check-prefix=OPT

// A BF16 KV cache: the same strides in elements, half the bytes (V starts halfway through).
// BF16: hetc.kv_cache = {arena_size = 131072 : i64, dtype = "bf16", head_dim = 16 : i64, head_stride = 2048 : i64, k_offset = 0 : i64, kv_heads = 2 : i64, layer_stride = 16384 : i64, layers = 2 : i64, max_seq = 128 : i64, pos_stride = 16 : i64, slot_stride = 4096 : i64, slots = 4 : i64, v_offset = 65536 : i64}

// An INT8 KV cache: the same strides, a quarter of f32's bytes for K (32 KiB) and V, then one
// float32 scale per (layer, slot, kv_head, pos) row of K (2 x 4 x 2 x 128 = 2048 scales, 8 KiB)
// and of V, in the same order: a head's 128 scales are consecutive.
// INT8: hetc.kv_cache = {arena_size = 81920 : i64, dtype = "int8", head_dim = 16 : i64, head_stride = 2048 : i64, k_offset = 0 : i64, k_scale_offset = 65536 : i64, kv_heads = 2 : i64, layer_stride = 16384 : i64, layers = 2 : i64, max_seq = 128 : i64, pos_stride = 16 : i64, scale_head_stride = 128 : i64, scale_layer_stride = 1024 : i64, scale_slot_stride = 256 : i64, slot_stride = 4096 : i64, slots = 4 : i64, v_offset = 32768 : i64, v_scale_offset = 73728 : i64}

// 128 bytes of K (whole blocks of 16 positions for max_seq 15) and 120 of K scales (one per
// position): every region starts on a 64-byte boundary.
// INT8-PADDED: hetc.kv_cache = {arena_size = 512 : i64, dtype = "int8", head_dim = 4 : i64, head_stride = 64 : i64, k_offset = 0 : i64, k_scale_offset = 256 : i64, kv_heads = 1 : i64, layer_stride = 128 : i64, layers = 1 : i64, max_seq = 15 : i64, pos_stride = 4 : i64, scale_head_stride = 15 : i64, scale_layer_stride = 30 : i64, scale_slot_stride = 15 : i64, slot_stride = 64 : i64, slots = 2 : i64, v_offset = 128 : i64, v_scale_offset = 384 : i64}

// A bf16 stream holds whole blocks of 16 positions too: max_seq 15 takes 16 (head_stride 16 x 4).
// BF16-BLOCKS: hetc.kv_cache = {arena_size = 512 : i64, dtype = "bf16", head_dim = 4 : i64, head_stride = 64 : i64, k_offset = 0 : i64, kv_heads = 1 : i64, layer_stride = 128 : i64, layers = 1 : i64, max_seq = 15 : i64, pos_stride = 4 : i64, slot_stride = 64 : i64, slots = 2 : i64, v_offset = 256 : i64}

// The tiny model in ten buffers: two for the residual stream (an add never writes the buffer it
// reads), three 64-wide, two 32-wide (k, v) and three 176-wide scratch buffers, and the logits.
// Rows are max-step-tokens (max-batch for the logits); row strides are 64-byte multiples.
// CHECK-LABEL: module attributes
// CHECK-SAME: hetc.activation_arena_size = 1740800 : i64
// CHECK-SAME: hetc.bounds = {max_batch = 4 : i64, max_seq = 128 : i64, max_step_tokens = 512 : i64}
// CHECK-SAME: hetc.buffers = [
// CHECK-SAME: {cols = 64 : i64, name = "hidden.0", offset = 0 : i64, role = "hidden", row_stride = 256 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 64 : i64, name = "scratch.0", offset = 131072 : i64, role = "scratch", row_stride = 256 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 64 : i64, name = "scratch.1", offset = 262144 : i64, role = "scratch", row_stride = 256 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 32 : i64, name = "scratch.2", offset = 393216 : i64, role = "scratch", row_stride = 128 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 32 : i64, name = "scratch.3", offset = 458752 : i64, role = "scratch", row_stride = 128 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 64 : i64, name = "hidden.1", offset = 524288 : i64, role = "hidden", row_stride = 256 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 176 : i64, name = "scratch.4", offset = 655360 : i64, role = "scratch", row_stride = 704 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 176 : i64, name = "scratch.5", offset = 1015808 : i64, role = "scratch", row_stride = 704 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 176 : i64, name = "scratch.6", offset = 1376256 : i64, role = "scratch", row_stride = 704 : i64, rows = 512 : i64},
// CHECK-SAME: {cols = 256 : i64, name = "logits", offset = 1736704 : i64, role = "logits", row_stride = 1024 : i64, rows = 4 : i64}]
// K and V each hold (layer, slot, kv_head) streams of max_seq positions of head_dim elements.
// CHECK-SAME: hetc.kv_cache = {arena_size = 262144 : i64, dtype = "f32", head_dim = 16 : i64, head_stride = 2048 : i64, k_offset = 0 : i64, kv_heads = 2 : i64, layer_stride = 16384 : i64, layers = 2 : i64, max_seq = 128 : i64, pos_stride = 16 : i64, slot_stride = 4096 : i64, slots = 4 : i64, v_offset = 131072 : i64}

// The embedding reads no activation (token ids are a step input).
// CHECK: hetc.embedding {{.*}}hetc.buffers_in = array<i64>, hetc.buffers_out = array<i64: [[H0:[0-9]+]]>

// Layer 0 takes buffers; rope rotates q and k in place; attention reads q, k, v.
// CHECK: hetc.rms_norm {{.*}}hetc.buffers_in = array<i64: [[H0]]>, hetc.buffers_out = array<i64: [[N1:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N1]]>, hetc.buffers_out = array<i64: [[Q:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N1]]>, hetc.buffers_out = array<i64: [[K:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N1]]>, hetc.buffers_out = array<i64: [[V:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.rope {{.*}}hetc.buffers_in = array<i64: [[Q]]>, hetc.buffers_out = array<i64: [[Q]]>{{.*}}hetc.layer = 0
// CHECK: hetc.rope {{.*}}hetc.buffers_in = array<i64: [[K]]>, hetc.buffers_out = array<i64: [[K]]>{{.*}}hetc.layer = 0
// CHECK: hetc.attention {{.*}}hetc.buffers_in = array<i64: [[Q]], [[K]], [[V]]>, hetc.buffers_out = array<i64: [[O:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[O]]>, hetc.buffers_out = array<i64: [[P:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.add {{.*}}hetc.buffers_in = array<i64: [[H0]], [[P]]>, hetc.buffers_out = array<i64: [[H1:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.rms_norm {{.*}}hetc.buffers_in = array<i64: [[H1]]>, hetc.buffers_out = array<i64: [[N2:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N2]]>, hetc.buffers_out = array<i64: [[G:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N2]]>, hetc.buffers_out = array<i64: [[U:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.swiglu {{.*}}hetc.buffers_in = array<i64: [[G]], [[U]]>, hetc.buffers_out = array<i64: [[S:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[S]]>, hetc.buffers_out = array<i64: [[D:[0-9]+]]>{{.*}}hetc.layer = 0
// CHECK: hetc.add {{.*}}hetc.buffers_in = array<i64: [[H1]], [[D]]>, hetc.buffers_out = array<i64: [[H0]]>{{.*}}hetc.layer = 0

// Layer 1 runs in exactly layer 0's buffers: activations are shared by all decoder layers.
// CHECK: hetc.rms_norm {{.*}}hetc.buffers_in = array<i64: [[H0]]>, hetc.buffers_out = array<i64: [[N1]]>{{.*}}hetc.layer = 1
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N1]]>, hetc.buffers_out = array<i64: [[Q]]>{{.*}}hetc.layer = 1
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N1]]>, hetc.buffers_out = array<i64: [[K]]>{{.*}}hetc.layer = 1
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N1]]>, hetc.buffers_out = array<i64: [[V]]>{{.*}}hetc.layer = 1
// CHECK: hetc.rope {{.*}}hetc.buffers_in = array<i64: [[Q]]>, hetc.buffers_out = array<i64: [[Q]]>{{.*}}hetc.layer = 1
// CHECK: hetc.rope {{.*}}hetc.buffers_in = array<i64: [[K]]>, hetc.buffers_out = array<i64: [[K]]>{{.*}}hetc.layer = 1
// CHECK: hetc.attention {{.*}}hetc.buffers_in = array<i64: [[Q]], [[K]], [[V]]>, hetc.buffers_out = array<i64: [[O]]>{{.*}}hetc.layer = 1
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[O]]>, hetc.buffers_out = array<i64: [[P]]>{{.*}}hetc.layer = 1
// CHECK: hetc.add {{.*}}hetc.buffers_in = array<i64: [[H0]], [[P]]>, hetc.buffers_out = array<i64: [[H1]]>{{.*}}hetc.layer = 1
// CHECK: hetc.rms_norm {{.*}}hetc.buffers_in = array<i64: [[H1]]>, hetc.buffers_out = array<i64: [[N2]]>{{.*}}hetc.layer = 1
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N2]]>, hetc.buffers_out = array<i64: [[G]]>{{.*}}hetc.layer = 1
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[N2]]>, hetc.buffers_out = array<i64: [[U]]>{{.*}}hetc.layer = 1
// CHECK: hetc.swiglu {{.*}}hetc.buffers_in = array<i64: [[G]], [[U]]>, hetc.buffers_out = array<i64: [[S]]>{{.*}}hetc.layer = 1
// CHECK: hetc.linear {{.*}}hetc.buffers_in = array<i64: [[S]]>, hetc.buffers_out = array<i64: [[D]]>{{.*}}hetc.layer = 1
// CHECK: hetc.add {{.*}}hetc.buffers_in = array<i64: [[H1]], [[D]]>, hetc.buffers_out = array<i64: [[H0]]>{{.*}}hetc.layer = 1

// lm_head writes the logits buffer (index 9), one row per sequence.
// CHECK: hetc.rms_norm {{.*}}hetc.buffers_in = array<i64: [[H0]]>, hetc.buffers_out = array<i64: [[NF:[0-9]+]]>}
// CHECK: hetc.lm_head {{.*}}hetc.buffers_in = array<i64: [[NF]]>, hetc.buffers_out = array<i64: 9>

// Other bounds: rows follow max-step-tokens and max-batch; the KV strides follow max-seq.
// BOUNDS: hetc.activation_arena_size = 26816 : i64
// BOUNDS-SAME: {cols = 64 : i64, name = "hidden.0", offset = 0 : i64, role = "hidden", row_stride = 256 : i64, rows = 7 : i64}
// BOUNDS-SAME: {cols = 176 : i64, name = "scratch.6", offset = 18816 : i64, role = "scratch", row_stride = 704 : i64, rows = 7 : i64}
// BOUNDS-SAME: {cols = 256 : i64, name = "logits", offset = 23744 : i64, role = "logits", row_stride = 1024 : i64, rows = 3 : i64}
// BOUNDS-SAME: hetc.kv_cache = {arena_size = 1536000 : i64, dtype = "f32", head_dim = 16 : i64, head_stride = 16000 : i64, k_offset = 0 : i64, kv_heads = 2 : i64, layer_stride = 96000 : i64, layers = 2 : i64, max_seq = 1000 : i64, pos_stride = 16 : i64, slot_stride = 32000 : i64, slots = 3 : i64, v_offset = 768000 : i64}

// Narrow rows are padded to a 64-byte stride, so every row starts on a cache line.
// NARROW: hetc.activation_arena_size = 3008 : i64
// NARROW-SAME: {cols = 8 : i64, name = "hidden.0", offset = 0 : i64, role = "hidden", row_stride = 64 : i64, rows = 5 : i64}
// NARROW-SAME: {cols = 4 : i64, name = "scratch.1", offset = 640 : i64, role = "scratch", row_stride = 64 : i64, rows = 5 : i64}
// NARROW-SAME: {cols = 12 : i64, name = "scratch.4", offset = 1920 : i64, role = "scratch", row_stride = 64 : i64, rows = 5 : i64}
// NARROW-SAME: {cols = 16 : i64, name = "logits", offset = 2880 : i64, role = "logits", row_stride = 64 : i64, rows = 2 : i64}
// NARROW-SAME: hetc.kv_cache = {arena_size = 1024 : i64, dtype = "f32", head_dim = 4 : i64, head_stride = 64 : i64, k_offset = 0 : i64, kv_heads = 1 : i64, layer_stride = 128 : i64, layers = 1 : i64, max_seq = 16 : i64, pos_stride = 4 : i64, slot_stride = 64 : i64, slots = 2 : i64, v_offset = 512 : i64}

// Learned positions for 16 tokens (18 rows at offset 2) allow max-seq 16 (17 is refused, see
// plan_memory_invalid.mlir); the layer norm and the activation get scratch buffers as rms_norm
// and swiglu do.
// OPT: hetc.bounds = {max_batch = 2 : i64, max_seq = 16 : i64, max_step_tokens = 5 : i64}
// OPT: hetc.layer_norm {{.*}}hetc.buffers_in = array<i64: 0>, hetc.buffers_out = array<i64: 1>
// OPT: hetc.activation {{.*}}hetc.buffers_out
