// RUN: hetc-opt %S/Inputs/tiny_llama.mlir -hetc-group-sublayers | FileCheck %s --check-prefix=TINY
// RUN: hetc-opt %S/Inputs/small_tied.mlir -hetc-group-sublayers | FileCheck %s
// RUN: hetc-opt %S/Inputs/small_opt.mlir -hetc-group-sublayers | FileCheck %s --check-prefix=OPT
// RUN: hetc-opt %S/Inputs/small_parallel.mlir -hetc-group-sublayers | FileCheck %s --check-prefix=PARALLEL
// RUN: hetc-opt %S/Inputs/small_sandwich.mlir -hetc-group-sublayers | FileCheck %s --check-prefix=SANDWICH
// RUN: hetc-opt %S/Inputs/small_embedding_norm.mlir -hetc-group-sublayers | FileCheck %s --check-prefix=EMBNORM

// The tiny model: two layers of an attention and a feed-forward sublayer each.
// TINY: module attributes {hetc.model = {architecture = "llama", head_dim = 16 : i64, heads = 4 : i64, hidden = 64 : i64, intermediate = 176 : i64, kv_heads = 2 : i64, layers = 2 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = false, vocab = 256 : i64}}
// The embedding, the final norm and lm_head are outside the layers: no layer, no sublayer.
// TINY: hetc.embedding %{{.*}}, %{{.*}} :
// TINY: hetc.rms_norm {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// TINY-COUNT-3: hetc.linear {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// TINY-COUNT-2: hetc.rope {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// TINY: hetc.attention {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// TINY: hetc.linear {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// TINY: hetc.add {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// TINY: hetc.rms_norm {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// TINY-COUNT-2: hetc.linear {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// TINY: hetc.swiglu {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// TINY: hetc.linear {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// TINY: hetc.add {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// TINY: hetc.rms_norm {{.*}}hetc.layer = 1 : i64, hetc.sublayer = {index = 2 : i64, kind = "attention"}
// TINY: hetc.attention {{.*}}hetc.layer = 1 : i64, hetc.sublayer = {index = 2 : i64, kind = "attention"}
// TINY: hetc.add {{.*}}hetc.layer = 1 : i64, hetc.sublayer = {index = 2 : i64, kind = "attention"}
// TINY: hetc.swiglu {{.*}}hetc.layer = 1 : i64, hetc.sublayer = {index = 3 : i64, kind = "feed_forward"}
// TINY: hetc.add {{.*}}hetc.layer = 1 : i64, hetc.sublayer = {index = 3 : i64, kind = "feed_forward"}
// TINY: hetc.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32} :
// TINY: hetc.lm_head %{{.*}}, %{{.*}} :

// Grouping follows the dataflow, not names or op order (see Inputs/small_tied.mlir), and sees
// that lm_head reads the embedding table transposed.
// CHECK: hetc.model = {architecture = "llama", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 1 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = true, vocab = 16 : i64}
// CHECK-COUNT-9: {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// CHECK-COUNT-6: {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// CHECK: hetc.lm_head %{{.*}}, %{{.*}} :

// An OPT-style model: layer norms, and a feed-forward of fc1, the activation and fc2 whose width
// is the activation's; the architecture is "opt" and the first norm's epsilon is rms_eps.
// OPT: hetc.model = {architecture = "opt", head_dim = 4 : i64, heads = 2 : i64, hidden = 8 : i64, intermediate = 12 : i64, kv_heads = 2 : i64, layers = 1 : i64, rms_eps = 9.99999974E-6 : f32, tied_embeddings = true, vocab = 16 : i64}
// OPT: hetc.embedding %{{.*}}, %{{.*}}, %{{.*}} {position_offset = 2 : i64} :
// OPT: hetc.layer_norm {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// OPT-COUNT-3: hetc.linear {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// OPT: hetc.attention {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// OPT: hetc.linear {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// OPT: hetc.add {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// OPT: hetc.layer_norm {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// OPT: hetc.linear {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// OPT: hetc.activation {{.*}}function = "relu", hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// OPT: hetc.linear {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// OPT: hetc.add {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// OPT: hetc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32} :
// OPT: hetc.lm_head %{{.*}}, %{{.*}} :

// A parallel layer with one shared norm, written feed-forward first and summed (mlp + attn) + h:
// run as the sequence h1 = h + attn, h2 = h1 + mlp, the feed-forward reading a copy of the norm of
// the layer's input, its ops moved after h1.
// PARALLEL: %[[H:.*]] = hetc.embedding
// PARALLEL: %[[N:.*]] = hetc.rms_norm %[[H]], {{.*}}hetc.sublayer = {index = 0 : i64, kind = "attention"}
// PARALLEL: %[[O:.*]], %{{.*}}, %{{.*}} = hetc.attention {{.*}}hetc.sublayer = {index = 0 : i64, kind = "attention"}
// PARALLEL: %[[P:.*]] = hetc.linear %[[O]], {{.*}}hetc.sublayer = {index = 0 : i64, kind = "attention"}
// PARALLEL: %[[H1:.*]] = hetc.add %[[H]], %[[P]] {{.*}}hetc.sublayer = {index = 0 : i64, kind = "attention"}
// PARALLEL: %[[N2:.*]] = hetc.rms_norm %[[H]], {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// PARALLEL: hetc.linear %[[N2]], {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// PARALLEL: hetc.swiglu {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// PARALLEL: %[[D:.*]] = hetc.linear {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// PARALLEL: %[[H2:.*]] = hetc.add %[[H1]], %[[D]] {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// PARALLEL: hetc.rms_norm %[[H2]]

// Gemma 2's sandwich norms: the norm of each sublayer's output belongs to that sublayer, between
// its output projection and its residual add.
// SANDWICH: %[[O:.*]], %{{.*}}, %{{.*}} = hetc.attention {{.*}}hetc.sublayer = {index = 0 : i64, kind = "attention"}
// SANDWICH: %[[P:.*]] = hetc.linear %[[O]], {{.*}}hetc.sublayer = {index = 0 : i64, kind = "attention"}
// SANDWICH: %[[PN:.*]] = hetc.rms_norm %[[P]], {{.*}}hetc.sublayer = {index = 0 : i64, kind = "attention"}
// SANDWICH: hetc.add %{{.*}}, %[[PN]] {{.*}}hetc.sublayer = {index = 0 : i64, kind = "attention"}
// SANDWICH: %[[S:.*]] = hetc.swiglu {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// SANDWICH: %[[D:.*]] = hetc.linear %[[S]], {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// SANDWICH: %[[DN:.*]] = hetc.rms_norm %[[D]], {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}
// SANDWICH: hetc.add %{{.*}}, %[[DN]] {{.*}}hetc.sublayer = {index = 1 : i64, kind = "feed_forward"}

// BLOOM's norm of the embeddings starts the residual stream: outside every layer, between the
// embedding and layer 0's first norm; the attention keeps its ALiBi slopes.
// EMBNORM: hetc.embedding
// EMBNORM-NEXT: hetc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32} :
// EMBNORM-NEXT: hetc.layer_norm {{.*}}hetc.layer = 0 : i64, hetc.sublayer = {index = 0 : i64, kind = "attention"}
// EMBNORM: hetc.attention {{.*}}alibi_slopes = array<f32: 2.500000e-01, 6.250000e-02>
