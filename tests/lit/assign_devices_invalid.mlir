// Options hetc-assign-devices refuses, each error naming what is wrong:
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers -hetc-plan-memory \
// RUN:   -hetc-assign-devices=target=nosuch 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers -hetc-plan-memory \
// RUN:   -hetc-assign-devices=target=%S/Inputs/no-such-target.json 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TARGET-FILE
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers -hetc-plan-memory \
// RUN:   -hetc-assign-devices="target=spr-h100 placement=nowhere" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PLACEMENT
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers -hetc-plan-memory \
// RUN:   -hetc-assign-devices="target=spr-h100 timing=eventually" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TIMING
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers -hetc-plan-memory \
// RUN:   -hetc-assign-devices="target=spr-cpu placement=helm" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=HELM
// RUN: not hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers \
// RUN:   -hetc-assign-devices=target=spr-h100 2>&1 | FileCheck %s --check-prefix=BOUNDS
// TARGET: error: hetc-assign-devices: unknown target 'nosuch' (known targets: gnr-a100, gnr-cpu, gnr-h100, spr-a100, spr-cpu, spr-h100; or a path to a .json target file)
// TARGET-FILE: error: hetc-assign-devices: cannot read target file {{.*}}no-such-target.json
// PLACEMENT: error: hetc-assign-devices: placement 'nowhere' is not one of auto, ddr, cxl, helm, all-cpu
// TIMING: error: hetc-assign-devices: timing 'eventually' is neither serial nor overlapped
// HELM: error: hetc-assign-devices: placement helm needs a GPU; spr-cpu has none
// BOUNDS: error: hetc-assign-devices needs the module's hetc.bounds attribute; run hetc-plan-memory first

// Then IR it cannot place:
// RUN: hetc-opt %s -split-input-file -verify-diagnostics -hetc-assign-devices=target=spr-a100

// The model's dimensions must all be there.
// expected-error @+1 {{the module's hetc.model has no positive 32-bit 'intermediate'}}
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 8 : i64, max_step_tokens = 4 : i64}, hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main() {
    return
  }
}

// -----

// An op in a layer the model does not have.
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 8 : i64, max_step_tokens = 4 : i64}, hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<?x?xi64>, %g: tensor<8xf32>) -> tensor<?x?x8xf32> {
    %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{'hetc.rms_norm' op is in layer 3 but hetc.model has 1 layers}}
    %n = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32, hetc.layer = 3 : i64, hetc.sublayer = {index = 6 : i64, kind = "attention"}} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    return %n : tensor<?x?x8xf32>
  }
}

// -----

// An op of a layer must say which sublayer it is in.
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 8 : i64, max_step_tokens = 4 : i64}, hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<?x?xi64>, %g: tensor<8xf32>) -> tensor<?x?x8xf32> {
    %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{'hetc.rms_norm' op has a hetc.layer but no hetc.sublayer kind; run hetc-group-sublayers first}}
    %n = hetc.rms_norm %h, %g {epsilon = 1.0e-05 : f32, hetc.layer = 0 : i64} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    return %n : tensor<?x?x8xf32>
  }
}

// -----

// A swiglu has no place among the cost model's attention sublayers.
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 8 : i64, max_step_tokens = 4 : i64}, hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
    %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{'hetc.swiglu' op cannot be placed: the cost model has no sublayer for it in an attention sublayer}}
    %s = hetc.swiglu %h, %h {hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %s : tensor<?x?x8xf32>
  }
}

// -----

// Sublayers are attention or feed-forward.
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 8 : i64, max_step_tokens = 4 : i64}, hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
    %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{'hetc.add' op has hetc.sublayer kind 'mixture'; expected attention or feed_forward}}
    %s = hetc.add %h, %h {hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "mixture"}} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %s : tensor<?x?x8xf32>
  }
}

// -----

// And say where in the plan's sublayer list they are.
module attributes {hetc.bounds = {max_batch = 1 : i64, max_seq = 8 : i64, max_step_tokens = 4 : i64}, hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 16 : i64}} {
  func.func @main(%table: tensor<16x8xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
    %h = hetc.embedding %table, %ids : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{'hetc.add' op has hetc.sublayer with no non-negative 'index'}}
    %s = hetc.add %h, %h {hetc.layer = 0 : i64, hetc.sublayer = {index = -1 : i64, kind = "attention"}} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %s : tensor<?x?x8xf32>
  }
}
